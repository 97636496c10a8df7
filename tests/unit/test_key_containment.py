"""Key containment: a stored object may only name keys under the prefix it belongs to.

A head listing another tenant's segment, a record copied from another session: each is refused
on read and reported by ``compactor verify``, with the same answer whether the foreign object
exists or not, and nothing of the other tenant's text reaches this one (view, compaction).
"""

from __future__ import annotations

import json

import pytest
from temporalio.testing import ActivityEnvironment

from activities.contracts import FreezeInput
from activities.store_activities import StoreActivities
from compactor.cli import main
from compactor.errors import IntegrityError
from compactor.events import Event, TextBlock
from compactor.records import CompactionRecord
from compactor.store import ObjectStore, SessionLog
from compactor.store.verify import verify_session
from tests.unit.store_fixtures import cli_url, cold_process, make_store, store  # noqa: F401 - fixtures

SECRET = "SECRET-OF-OTHER-TENANT"


pytestmark = pytest.mark.usefixtures("cold_process")


@pytest.fixture
def url(cli_url) -> str:
    return cli_url


def ev(i: str, text: str) -> Event:
    return Event(id=i, role="user", blocks=[TextBlock(text=text)])


def snapshot(store: ObjectStore) -> dict[str, bytes]:
    return {k: store.get(k)[0] for k in store.list("")}


def steal(store: ObjectStore, foreign_key: str | None = None) -> str:
    """The attack: tenant acme's head lists the other tenant's segment (sha256 and all)."""
    other = SessionLog(store, "other", "secret")
    mine = SessionLog(store, "acme", "mine")
    if not other.exists():
        other.append([ev("x1", f"{SECRET} one"), ev("x2", f"{SECRET} two")])
        mine.append([ev("a1", "hello"), ev("a2", "world")])
    theirs = other.head().segments[0]
    key = "t/acme/s/mine/head.json"
    doc = json.loads(store.get(key)[0])
    doc["segments"] = [dict(theirs.model_dump(mode="json"), key=foreign_key or theirs.key)]
    store.put(key, json.dumps(doc).encode())
    return theirs.key


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_view_refuses_a_head_pointing_into_another_tenant(store, url, capsys, monkeypatch):
    steal(store)
    monkeypatch.setenv("COMPACTOR_TENANTS", "acme")
    before = snapshot(store)
    rc, out, err = run(capsys, "view", "mine", "--tenant", "acme", "--store", url)
    assert rc == 1 and SECRET not in out + err
    assert "outside the session's log" in err and len(err.strip().splitlines()) == 1
    rc, out, err = run(capsys, "view", "mine", "--tenant", "acme", "--store", url, "--json")
    assert rc == 1 and SECRET not in out + err
    assert snapshot(store) == before


def test_the_error_does_not_tell_whether_the_foreign_key_exists(store, url, capsys):
    real = steal(store)
    _, _, err_real = run(capsys, "view", "mine", "--tenant", "acme", "--store", url)
    fake = real.replace("/secret/", "/nosuch/")
    steal(store, foreign_key=fake)
    _, _, err_fake = run(capsys, "view", "mine", "--tenant", "acme", "--store", url)
    assert err_real.replace(real, "KEY") == err_fake.replace(fake, "KEY")


def test_no_read_path_serves_the_foreign_segment(store):
    steal(store)
    log = SessionLog(store, "acme", "mine")
    for read in (log.read_view, log.read_events, lambda: log.read_pinned_and_after(0)):
        with pytest.raises(IntegrityError):
            read()
    # even with the head's own check bypassed, the segment fetch refuses before any I/O
    head = log.read_head_unchecked()
    with pytest.raises(IntegrityError) as exc:
        log._events(head.segments[0])
    assert SECRET not in str(exc.value)


async def test_a_durable_compaction_does_not_copy_foreign_text(store):
    steal(store)
    before = snapshot(store)
    acts = StoreActivities(store)
    with pytest.raises(Exception) as exc:
        await ActivityEnvironment().run(acts.freeze_snapshot, FreezeInput(tenant="acme", session="mine"))
    assert "outside the session's log" in str(exc.value) and SECRET not in str(exc.value)
    assert snapshot(store) == before


def test_verify_reports_the_foreign_key_without_reading_it(store, url, capsys):
    real = steal(store)
    rep = verify_session(SessionLog(store, "acme", "mine"))
    assert not rep.ok
    assert any("outside the session's log" in f.message for f in rep.problems)
    rc, out, _ = run(capsys, "verify", "mine", "--tenant", "acme", "--store", url)
    assert rc == 1 and "outside the session's log" in out and SECRET not in out
    # the same report for a key that does not exist: nothing was read
    steal(store, foreign_key=real.replace("/secret/", "/nosuch/"))
    rep2 = verify_session(SessionLog(store, "acme", "mine"))
    assert [f.message.replace("nosuch", "secret") for f in rep2.problems] == [f.message for f in rep.problems]


@pytest.mark.parametrize("bad", ["t/acme/s/mine/log/../../other/log/x.jsonl", "t/acme/s/mine/log/a/b.jsonl",
                                 "t/acme/s/mine/ckpt/c.json", "t/acme/s/mine2/log/x.jsonl", "/etc/passwd"])
def test_any_key_outside_the_log_prefix_is_refused(store, bad):
    steal(store, foreign_key=bad)
    with pytest.raises(IntegrityError) as exc:
        SessionLog(store, "acme", "mine").head()
    assert "outside the session's log" in str(exc.value)


def test_a_record_copied_from_another_session_is_refused_and_reported(store, url, capsys):
    other = SessionLog(store, "other", "secret")
    other.append([ev("x1", SECRET)])
    key = other.write_record(CompactionRecord(id="run-9", tenant="other", session="secret",
                                              error=SECRET))
    mine = SessionLog(store, "acme", "mine")
    mine.append([ev("a1", "hello")])
    store.put("t/acme/s/mine/records/run-9.json", store.get(key)[0])
    with pytest.raises(IntegrityError):
        mine.list_records()
    rc, out, err = run(capsys, "inspect", "mine", "--tenant", "acme", "--store", url)
    assert rc == 1 and SECRET not in out + err and "copied here from another session" in err
    rep = verify_session(mine)
    assert [f.key for f in rep.problems] == ["t/acme/s/mine/records/run-9.json"]
