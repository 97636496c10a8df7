"""The open-breaker gauge is counted from the store's per-tenant index, which follows the
breaker state through opens, closes, operator clears and a retry after a lost write."""

from __future__ import annotations

from activities.breaker import BreakerActivities, BreakerRecordInput, clear_breaker
from compactor.store import open_store
from compactor.store.breakers import count_open_breakers, open_index_key
from compactor.store.erase import delete_session


async def _fail(acts: BreakerActivities, tenant: str, session: str, run: str) -> None:
    await acts.record_breaker(BreakerRecordInput(tenant=tenant, session=session, ok=False, trigger="sweep",
                                                 run_id=run, error="IntegrityError: x"))


async def test_index_follows_opens_closes_and_clears(tmp_path):
    store = open_store(f"file://{tmp_path}/store")
    acts = BreakerActivities(store)
    for s in ("s1", "s2"):
        for i in range(3):
            await _fail(acts, "acme", s, f"{s}-r{i}")
    await _fail(acts, "beta", "s1", "b-r0")  # one failure: still closed
    assert count_open_breakers(store) == {"acme": 2, "beta": 0}
    await acts.record_breaker(BreakerRecordInput(tenant="acme", session="s1", ok=True, trigger="manual", run_id="ok"))
    assert count_open_breakers(store) == {"acme": 1, "beta": 0}
    clear_breaker(store, "acme", "s2")
    assert count_open_breakers(store)["acme"] == 0
    assert count_open_breakers(store, ["acme"]) == {"acme": 0}


async def test_a_retry_after_a_lost_index_write_repairs_it(tmp_path):
    store = open_store(f"file://{tmp_path}/store")
    acts = BreakerActivities(store)
    for i in range(3):
        await _fail(acts, "acme", "s1", f"r{i}")
    # The worker died after the state's write and before the index's: the index lacks s1.
    store.put(open_index_key("acme"), b'{"sessions": []}')
    assert count_open_breakers(store) == {"acme": 0}
    await _fail(acts, "acme", "s1", "r2")  # Temporal retries the same run's record_breaker
    assert count_open_breakers(store) == {"acme": 1}


async def test_deleting_a_session_with_an_open_breaker_drops_it_from_the_count(tmp_path):
    from compactor.events import Event, TextBlock
    from compactor.store import SessionLog

    store = open_store(f"file://{tmp_path}/store")
    acts = BreakerActivities(store)
    SessionLog(store, "acme", "s1").append([Event(id="u", role="user", blocks=[TextBlock(text="hi")])])
    for i in range(3):
        await _fail(acts, "acme", "s1", f"r{i}")
    assert count_open_breakers(store) == {"acme": 1}
    delete_session(store, "acme", "s1", by="test")
    assert count_open_breakers(store) == {"acme": 0}
