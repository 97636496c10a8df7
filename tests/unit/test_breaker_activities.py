"""activities.breaker: breaker.json through a real LocalStore, CAS, operator clear."""

from __future__ import annotations

import json

import pytest

from activities.breaker import (
    BreakerActivities,
    BreakerCheckInput,
    BreakerRecordInput,
    clear_breaker,
    load_breaker,
)
from compactor.store import open_store


@pytest.fixture
def store(tmp_path):
    return open_store(f"file://{tmp_path}")


async def _fail(acts, n, trigger="sweep"):
    out = None
    for _ in range(n):
        out = await acts.record_breaker(BreakerRecordInput(tenant="t", session="s", ok=False, trigger=trigger, error="x"))
    return out


async def test_three_failures_persist_and_block_automatic_triggers(store):
    acts = BreakerActivities(store)
    assert (await acts.check_breaker(BreakerCheckInput(tenant="t", session="s", trigger="sweep"))).allowed
    outs = [await _fail(acts, 1) for _ in range(3)]
    assert [o.transition for o in outs] == ["unchanged", "unchanged", "opened"]
    doc = json.loads(store.get("t/t/s/s/breaker.json")[0])
    assert doc["open"] is True and doc["consecutive_failures"] == 3
    gate = await acts.check_breaker(BreakerCheckInput(tenant="t", session="s", trigger="budget:soft"))
    assert not gate.allowed and gate.open
    manual = await acts.check_breaker(BreakerCheckInput(tenant="t", session="s", trigger="manual"))
    assert manual.allowed
    # another session is unaffected
    assert (await acts.check_breaker(BreakerCheckInput(tenant="t", session="other", trigger="sweep"))).allowed


async def test_operator_clear_and_manual_success_close_it(store):
    acts = BreakerActivities(store)
    await _fail(acts, 3)
    st = clear_breaker(store, "t", "s", by="operator bob")
    assert not st.open and st.cleared_by == "operator bob"
    assert (await acts.check_breaker(BreakerCheckInput(tenant="t", session="s", trigger="sweep"))).allowed
    await _fail(acts, 3)
    out = await acts.record_breaker(BreakerRecordInput(tenant="t", session="s", ok=True, trigger="manual"))
    assert out.transition == "closed" and not out.open
    st, etag = load_breaker(store, "t", "s")
    assert st is not None and st.consecutive_failures == 0 and etag


def test_load_absent_breaker(store):
    assert load_breaker(store, "t", "nobody") == (None, None)
