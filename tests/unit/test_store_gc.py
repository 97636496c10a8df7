"""gc on both backends (local directory, S3 on moto_server): what it removes, what it keeps,
and that view, verify and rollback to every kept checkpoint are unchanged by it."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Callable

import pytest

import compactor.store.log as logmod
from compactor import operator
from compactor.bench.lifecycle import agent_round, busy_session
from compactor.events import Event, TextBlock
from compactor.records import Checkpoint, CompactionRecord, SeqRange
from compactor.store import LocalStore, ObjectStore, SessionLog
from compactor.store.gc import GcSettings, gc_session, gc_tenant
from compactor.store.s3 import S3Store
from compactor.store.verify import verify_session
from tests.unit.store_fixtures import make_store, store  # noqa: F401 (pytest fixtures)

T, S = "acme", "busy"
NOW = GcSettings(grace_s=0)




def _fresh() -> None:
    logmod._VERIFIED_CKPTS.clear()
    logmod._INDEXES.clear()


def dump(events) -> list[dict]:
    return [e.model_dump(mode="json") for e in events]


def views_of_every_checkpoint(log: SessionLog, ckpts: list[str]) -> dict[str, list[dict]]:
    """The view after a rollback to each checkpoint (and to none), then back where it was."""
    start = log.head().checkpoint
    out = {}
    for c in [*ckpts, None]:
        operator.rollback(log, c)
        out[str(c)] = dump(SessionLog(log.store, log.tenant, log.session).read_view())
    operator.rollback(log, start)
    return out


def test_gc_after_100_appends_and_20_compactions_leaves_at_most_1_3x_live(store):
    counts = asyncio.run(busy_session(store, T, S, appends=100, compactions=20))
    assert counts["appends"] == 100 and counts["committed"] + counts["noop"] == 20
    assert counts["committed"] >= 15 and counts["merges"] >= counts["committed"]
    log = SessionLog(store, T, S)
    head = log.head()
    view = dump(log.read_view())
    events = dump(log.read_events())
    committed = [r.checkpoint for r in log.list_records() if r.checkpoint]
    kept = gc_tenant(store, T, NOW, dry_run=True).sessions[0].kept_checkpoints
    assert set(kept) >= set(committed) and len(kept) >= 15
    before_views = views_of_every_checkpoint(log, kept)
    head = log.head()
    stored = {k: store.get(k)[0] for k in store.list(f"t/{T}/")}

    rep = gc_tenant(store, T, NOW)

    tot = rep.totals()
    assert tot["stored_bytes"] >= 2 * tot["live_bytes"]  # a busy session leaves a lot behind
    assert tot["after_bytes"] <= 1.3 * tot["live_bytes"], tot
    left = {k: store.get(k)[0] for k in store.list(f"t/{T}/")}
    assert sum(map(len, left.values())) == tot["after_bytes"]
    # nothing that stayed changed, and what a user reads is the same
    assert all(stored[k] == v for k, v in left.items())
    assert rep.sessions[0].kept_checkpoints == kept
    _fresh()
    log = SessionLog(store, T, S)
    assert log.head().etag == head.etag
    assert dump(log.read_view()) == view and dump(log.read_events()) == events
    assert verify_session(log).ok
    assert views_of_every_checkpoint(log, kept) == before_views
    # a second gc finds nothing more
    again = gc_tenant(store, T, NOW)
    assert not again.sessions[0].removed and again.artifacts_removed == 0


def test_dry_run_changes_nothing(store):
    asyncio.run(busy_session(store, T, S, appends=30, compactions=5))
    before = {k: store.get(k)[0] for k in store.list("")}
    rep = gc_tenant(store, T, NOW, dry_run=True)
    assert sum(rep.sessions[0].removed.values()) > 0
    assert {k: store.get(k)[0] for k in store.list("")} == before


def ev(i: str, text: str = "") -> Event:
    return Event(id=i, role="user", blocks=[TextBlock(text=text or f"text of {i}")])


def test_never_removes_what_the_head_a_checkpoint_or_a_record_names(store):
    log = SessionLog(store, T, S, merge=False)
    log.append([ev("a"), ev("b")])
    log.append([ev("c")])
    c1 = Checkpoint(id="c1", tenant=T, session=S, covers=SeqRange(start=1, end=2), summary="one")
    log.write_checkpoint(c1)
    h = log.set_checkpoint("c1", expected_etag=None)
    log.write_record(CompactionRecord(id="run-1", tenant=T, session=S, checkpoint="c1",
                                      checkpoint_sha256=h.checkpoint_sha256, snapshot_version=3))
    c2 = Checkpoint(id="c2", tenant=T, session=S, covers=SeqRange(start=1, end=3), summary="two", based_on="c1")
    log.write_checkpoint(c2)
    log.set_checkpoint("c2", expected_etag=None)  # no record: the head names it
    log.write_checkpoint(Checkpoint(id="c2-m1", tenant=T, session=S, covers=SeqRange(start=1, end=3), summary="x"))
    store.put(f"t/{T}/s/{S}/breaker.json", b"{}")
    rep = gc_session(store, T, S, NOW)
    keys = set(store.list(f"t/{T}/s/{S}/"))
    assert rep.removed == {"checkpoint": 1}
    assert f"t/{T}/s/{S}/ckpt/c2-m1.json" not in keys
    assert {f"t/{T}/s/{S}/ckpt/c1.json", f"t/{T}/s/{S}/ckpt/c2.json", f"t/{T}/s/{S}/breaker.json",
            f"t/{T}/s/{S}/records/run-1.json", f"t/{T}/s/{S}/head.json"} <= keys
    assert {s.key for s in log.head().segments} <= keys


def test_retention_keeps_the_newest_recorded_checkpoints(store):
    asyncio.run(busy_session(store, T, S, appends=40, compactions=8))
    log = SessionLog(store, T, S)
    recs = [r for r in log.list_records() if r.checkpoint]
    assert len(recs) >= 5
    rep = gc_session(store, T, S, GcSettings(grace_s=0, retain_checkpoints=2))
    newest = [r.checkpoint for r in recs[-2:]]
    kept = set(rep.kept_checkpoints)
    assert set(newest) <= kept and log.head().checkpoint in kept
    assert rep.retired_checkpoints and not kept & set(rep.retired_checkpoints)
    assert len(kept) <= 4  # 2 newest + what each is based on
    for c in rep.retired_checkpoints:
        with pytest.raises(Exception) as info:
            operator.rollback(log, c)
        assert getattr(info.value, "exit_code", None) == 2
    _fresh()
    assert verify_session(SessionLog(store, T, S)).ok
    for c in newest:
        operator.rollback(log, c)


def test_gc_walks_checkpoints_without_their_lifted_state(store, monkeypatch):
    """gc reads only which checkpoint each is based on: the slim read (``ckpt_slim``), never a
    full parse of a checkpoint's lifted state (~600 MB for a 300k-event session). The same
    checkpoints are kept and retired as with full reads."""
    asyncio.run(busy_session(store, T, S, appends=40, compactions=8))
    for retain in (0, 2):
        cfg = GcSettings(grace_s=0, retain_checkpoints=retain)
        _fresh()
        full = gc_session(store, T, S, cfg, dry_run=True)
        _fresh()
        with monkeypatch.context() as m:
            def no_full_read(self, *a, **k):  # noqa: ANN001, ANN002, ANN003
                raise AssertionError("gc parsed a whole checkpoint")
            m.setattr(SessionLog, "read_checkpoint", no_full_read)
            slim = gc_session(store, T, S, cfg, dry_run=True)
        assert len(full.kept_checkpoints) >= 2
        assert (slim.kept_checkpoints, slim.retired_checkpoints) == (full.kept_checkpoints, full.retired_checkpoints)


def test_rollback_checks_a_checkpoint_without_its_lifted_state(store, monkeypatch):
    """A rollback never uses the target's lifted state: it reads it slim (the same digest and
    ownership checks), so a huge session's rollback does not build it. The head each rollback
    leaves is the one full reads gave."""
    asyncio.run(busy_session(store, T, S, appends=30, compactions=6))
    log = SessionLog(store, T, S)
    targets = [r.checkpoint for r in log.list_records() if r.checkpoint][-3:] + [None]
    heads = {}
    for slim in (False, True):
        with monkeypatch.context() as m:
            if slim:
                def no_full_read(self, *a, **k):  # noqa: ANN001, ANN002, ANN003
                    raise AssertionError("rollback parsed a whole checkpoint")
                m.setattr(SessionLog, "read_checkpoint", no_full_read)
            for c in targets:
                _fresh()
                operator.rollback(SessionLog(store, T, S), c)
                h = SessionLog(store, T, S).head()
                heads.setdefault(str(c), []).append((h.checkpoint, h.checkpoint_sha256))
    assert len(heads) == 4 and all(a == b for a, b in heads.values()), heads


def test_a_damaged_record_stops_gc_of_that_session(store):
    asyncio.run(busy_session(store, T, S, appends=12, compactions=2))
    key = next(k for k in store.list(f"t/{T}/s/{S}/records/"))
    store.put(key, store.get(key)[0].replace(b'"committed"', b'"failed"').replace(b'"noop"', b'"failed"'))
    before = {k: store.get(k)[0] for k in store.list("")}
    rep = gc_session(store, T, S, NOW)
    assert rep.skipped and "nothing removed" in rep.skipped and not rep.removed
    assert {k: store.get(k)[0] for k in store.list("")} == before


def test_a_rollback_racing_gc_gets_its_checkpoint_back(store):
    log = SessionLog(store, T, S)
    log.append([ev("a"), ev("b"), ev("c")])
    log.write_checkpoint(Checkpoint(id="orphan", tenant=T, session=S, covers=SeqRange(start=1, end=2), summary="s"))

    class Racing:
        """Deleting the orphan checkpoint: a rollback to it lands just before."""
        delete_many = None  # one delete at a time, through the hook below

        def __init__(self, inner):
            self.inner, self.url = inner, inner.url

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def delete(self, key):
            if key.endswith("/ckpt/orphan.json"):
                SessionLog(self.inner, T, S).set_checkpoint("orphan", expected_etag=None)
            self.inner.delete(key)

    rep = gc_session(Racing(store), T, S, NOW)
    assert rep.restored == [f"t/{T}/s/{S}/ckpt/orphan.json"] and not rep.removed
    _fresh()
    log = SessionLog(store, T, S)
    assert log.head().checkpoint == "orphan" and verify_session(log).ok
    assert len(log.read_view()) >= 1


def _age(store: LocalStore, prefix: str, seconds: float) -> None:
    for key in store.list(prefix):
        p = store.root / key
        st = os.stat(p)
        os.utime(p, (st.st_atime - seconds, st.st_mtime - seconds))


def test_grace_period_and_work_ttl(tmp_path):
    store = LocalStore(tmp_path / "s")
    asyncio.run(busy_session(store, T, S, appends=24, compactions=4))
    log = SessionLog(store, T, S)
    pre = f"t/{T}/s/{S}/"
    # fresh garbage stays: a grace period of an hour removes nothing yet
    rep = gc_session(store, T, S, GcSettings(grace_s=3600))
    assert not rep.removed
    # a held run's work prefix (no record closes it) stays until the work TTL
    held = f"{pre}work/{log.head().version:012d}-abcdefabcdef/"
    store.put(held + "plan.json", b"{}")
    _age(store, pre, 7200)
    cfg = GcSettings(grace_s=3600, work_ttl_s=86_400)
    rep = gc_session(store, T, S, cfg)
    assert rep.removed.get("work", 0) > 0 and rep.removed.get("segment", 0) > 0
    assert store.head(held + "plan.json") is not None
    assert not [k for k in store.list(pre + "work/") if not k.startswith(held)]
    _age(store, held, 86_400)
    gc_session(store, T, S, cfg)
    assert store.list(pre + "work/") == []


def test_a_superseded_segment_waits_a_grace_period_from_when_it_was_superseded(tmp_path):
    store = LocalStore(tmp_path / "s")
    log = SessionLog(store, T, S)
    log.append([ev("a")])
    _age(store, "t/", 7200)  # the first segment is old...
    log.append([ev("b")])   # ...and superseded just now by a merge
    old = f"t/{T}/s/{S}/log/000000000001-000000000001.jsonl"
    assert old not in {s.key for s in log.head().segments} and store.head(old)
    assert not gc_session(store, T, S, GcSettings(grace_s=3600)).removed
    assert store.head(old)
    _age(store, "t/", 7200)
    assert gc_session(store, T, S, GcSettings(grace_s=3600)).removed == {"segment": 1}


def test_a_segment_not_yet_in_the_head_is_kept(store):
    log = SessionLog(store, T, S)
    log.append([ev("a"), ev("b")])
    # a writer that wrote its segment and has not swapped the head yet (or lost the swap)
    ahead = f"t/{T}/s/{S}/log/000000000003-000000000004.jsonl"
    store.put(ahead, b"x")
    assert not gc_session(store, T, S, NOW).removed
    assert store.head(ahead) is not None


def test_gc_concurrent_with_appends_and_compactions_loses_nothing(store):
    first = asyncio.run(busy_session(store, T, S, appends=20, compactions=4))
    cfg = GcSettings(grace_s=1.0)
    time.sleep(cfg.grace_s + cfg.slack + 0.3)  # what the first part left behind is past the grace period now
    stop = threading.Event()
    runs: list = []
    errors: list[BaseException] = []

    def gc_loop():
        try:
            while not stop.is_set():
                runs.append(gc_session(store, T, S, cfg))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    th = threading.Thread(target=gc_loop)
    th.start()
    try:  # the same session goes on: appends, compactions that merge, records
        second = asyncio.run(busy_session(store, T, S, appends=30, compactions=6, prefix="y"))
    finally:
        stop.set()
        th.join()
    assert not errors, errors
    assert second["committed"] >= 3 and sum(sum(r.removed.values()) for r in runs) > 0
    _fresh()
    log = SessionLog(store, T, S)
    ids = [e.id for e in log.read_events()]
    assert len(ids) == len(set(ids)) == 2 + first["events"] + second["events"]
    assert verify_session(log).ok
    committed = [r.checkpoint for r in log.list_records() if r.checkpoint]
    views_of_every_checkpoint(log, committed)  # every recorded checkpoint still rolls back


def test_the_checkpoint_of_a_run_still_in_flight_stays(store):
    log = SessionLog(store, T, S)
    log.append([ev("a"), ev("b"), ev("c")])
    pre = f"t/{T}/s/{S}/"
    # a commit_swap wrote its checkpoint, then its worker died: the retry will adopt it
    store.put(pre + "work/000000000003-0123456789ab/candidate.json", b"{}")
    cid = "c000000000003-0123456789ab"
    log.write_checkpoint(Checkpoint(id=cid, tenant=T, session=S, covers=SeqRange(start=1, end=2), summary="s"))
    assert not gc_session(store, T, S, NOW).removed
    assert store.head(pre + f"ckpt/{cid}.json") is not None
    # the run ends (a record at its snapshot version): both go
    time.sleep(1.1)  # S3 times are whole seconds: the record is written after the work objects
    log.write_record(CompactionRecord(id="run-x", tenant=T, session=S, status="failed", snapshot_version=3))
    rep = gc_session(store, T, S, NOW)
    assert rep.removed == {"checkpoint": 1, "work": 1}


def test_the_documented_s3_lifecycle_rules_are_accepted_by_an_s3_endpoint(s3_endpoint, s3_bucket):
    import json
    from pathlib import Path

    import boto3

    infra = Path(__file__).resolve().parents[2] / "infra"
    rules = json.loads((infra / "s3" / "lifecycle.json").read_text())
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.put_bucket_lifecycle_configuration(Bucket=s3_bucket, LifecycleConfiguration=rules)
    got = client.get_bucket_lifecycle_configuration(Bucket=s3_bucket)["Rules"]
    by_id = {r["ID"]: r for r in got}
    assert by_id["compactor-abort-incomplete-multipart"]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert by_id["compactor-expire-noncurrent-versions"]["NoncurrentVersionExpiration"]["NoncurrentDays"] == 7
    policy = json.loads((infra / "iam" / "gc-policy.json").read_text())
    actions = {a for s in policy["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert "s3:DeleteObject" in actions  # gc and delete are the only deleters
