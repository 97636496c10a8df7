"""SessionLog on both backends: concurrency, idempotency, bad input, views, immutables."""

from __future__ import annotations

import random
import threading
from typing import Callable

import pytest

from compactor.errors import (
    BucketNotFound,
    ConcurrentModification,
    IntegrityError,
    InvalidId,
    NotFound,
    PreconditionFailed,
)
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.records import Checkpoint, CompactionRecord, SeqRange
import compactor.store.log as logmod
from compactor.store import LocalStore, ObjectStore, SessionLog, list_sessions, validate_id
from compactor.store.s3 import S3Store
from tests.unit.store_fixtures import make_store, store  # noqa: F401 (pytest fixtures)

T = "acme"




def ev(i: str, text: str = "", role: str = "user", kind: str = "message") -> Event:
    return Event(id=i, role=role, kind=kind, blocks=[TextBlock(text=text or f"text of {i}")])


def snapshot(store: ObjectStore) -> dict[str, bytes]:
    return {k: store.get(k)[0] for k in store.list("")}


class Hooked:
    """Store proxy that runs ``before(key, kwargs)`` ahead of each put (to stage races)."""

    def __init__(self, inner: ObjectStore, before=None, after=None) -> None:
        self.inner, self.before, self.after = inner, before, after
        self.url = inner.url
        self.calls: list[tuple[str, str]] = []

    def get(self, key):
        self.calls.append(("get", key))
        return self.inner.get(key)

    def head(self, key):
        self.calls.append(("head", key))
        return self.inner.head(key)

    def list(self, prefix):
        self.calls.append(("list", prefix))
        return self.inner.list(prefix)

    def put(self, key, data, **kw):
        self.calls.append(("put", key))
        if self.before:
            self.before(key, kw)
        etag = self.inner.put(key, data, **kw)
        if self.after:
            self.after(key, kw)
        return etag


# --- concurrency and idempotency --------------------------------------------------------------


def test_eight_concurrent_writers_lose_and_duplicate_nothing(make_store):
    writers, per = 8, 50
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            log = SessionLog(make_store(), T, "busy", backoff_base=0.002)
            rng = random.Random(w)
            events = [ev(f"w{w}-{i:03d}") for i in range(per)]
            i = 0
            while i < per:
                n = rng.randint(1, 7)
                log.append(events[i : i + n])
                i += n
            # a client retry of an earlier batch is absorbed
            again = log.append(events[:5])
            assert again.appended == 0 and again.duplicates == 5
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors

    log = SessionLog(make_store(), T, "busy")
    events = log.read_events()
    assert log.head().version == writers * per
    assert [e.seq for e in events] == list(range(1, writers * per + 1))  # gap-free
    ids = [e.id for e in events]
    assert len(set(ids)) == len(ids) == writers * per  # none lost, none duplicated
    for w in range(writers):
        mine = [e.id for e in events if e.id.startswith(f"w{w}-")]
        assert mine == [f"w{w}-{i:03d}" for i in range(per)]  # each writer's order kept
    assert all(e.tokens and e.tokens > 0 for e in events)  # counted at append


def test_the_same_events_retried_are_stored_once(store):
    log = SessionLog(store, T, "s")
    batch = [ev("a"), ev("b"), ev("c")]
    r1 = log.append(batch)
    assert (r1.first_seq, r1.last_seq, r1.appended, r1.version) == (1, 3, 3, 3)
    assert log.append(batch).appended == 0
    # a fresh client (cold id index) dedups too, and only the new event lands
    r3 = SessionLog(store, T, "s").append([ev("b"), ev("c"), ev("d"), ev("d")])
    assert (r3.appended, r3.duplicates, r3.first_seq, r3.version) == (1, 3, 4, 4)
    assert [e.id for e in log.read_events()] == ["a", "b", "c", "d"]


def test_short_lived_clients_stay_warm_and_a_recreated_session_starts_cold(store, tmp_path):
    SessionLog(store, T, "s").append([ev(f"e{i}") for i in range(50)])
    spy = Hooked(store)
    r = SessionLog(spy, T, "s").append([ev("e49"), ev("new")])  # a new object per call
    assert (r.appended, r.duplicates) == (1, 1)
    assert not [k for op, k in spy.calls if op == "get" and "/log/" in k]  # no segment reads
    if isinstance(store, LocalStore):  # the same name, deleted and created again
        import shutil

        shutil.rmtree(store.root)
        r = SessionLog(LocalStore(store.root), T, "s").append([ev("e1")])
        assert (r.appended, r.first_seq) == (1, 1)


def test_empty_append_and_missing_session(store):
    log = SessionLog(store, T, "nothing")
    assert log.head().version == 0 and log.head().etag is None
    assert log.read_events() == [] and log.read_view() == []
    assert log.append([]).appended == 0
    assert store.list("") == []


def test_merging_keeps_the_head_small_and_events_intact(store):
    log = SessionLog(store, T, "long")
    for i in range(0, 300, 3):
        log.append([ev(f"e{i}"), ev(f"e{i+1}", kind="pinned", role="system"), ev(f"e{i+2}")])
    head = log.head()
    assert len(head.segments) <= 12
    assert [s.first for s in head.segments][0] == 1
    for a, b in zip(head.segments, head.segments[1:]):
        assert b.first == a.last + 1  # contiguous manifest
    pinned = [p for s in head.segments for p in s.pinned]
    assert pinned == list(range(2, 301, 3))
    assert [e.id for e in SessionLog(store, T, "long").read_events()] == [f"e{i}" for i in range(300)]
    assert [e.seq for e in log.read_events(100, 104)] == [100, 101, 102, 103, 104]


def test_large_append_is_split_into_segments(store, monkeypatch):
    import compactor.store.segments as segments

    monkeypatch.setattr(segments, "CHUNK_EVENTS", 40)
    log = SessionLog(store, T, "bulk")
    r = log.append([ev(f"e{i}") for i in range(100)])
    assert r.appended == 100
    assert [(s.first, s.last) for s in log.head().segments] == [(1, 40), (41, 80), (81, 100)]
    assert len(SessionLog(store, T, "bulk").read_events()) == 100


# --- bad input: typed error, nothing stored changed -------------------------------------------


@pytest.mark.parametrize(
    "tenant,session",
    [("../x", "s"), (T, "../../etc"), (T, "a/b"), (T, ".."), (T, "."), (T, ""), (T, "x" * 129),
     ("t/u", "s"), (T, "ok\n"), (T, "a\\b")],
)
def test_ids_that_escape_are_rejected_before_any_io(store, tenant, session):
    SessionLog(store, T, "ok").append([ev("a")])
    before = snapshot(store)
    spy = Hooked(store)
    with pytest.raises(InvalidId):
        SessionLog(spy, tenant, session)
    assert spy.calls == []
    assert snapshot(store) == before


def test_other_ids_are_validated_before_io(store):
    log = SessionLog(store, T, "s")
    spy = Hooked(store)
    log.store = spy
    for bad in ("../x", "a/b"):
        with pytest.raises(InvalidId):
            log.read_checkpoint(bad)
        with pytest.raises(InvalidId):
            log.set_checkpoint(bad, expected_etag=None)
    with pytest.raises(InvalidId):
        log.get_artifact("../../t/other/a/sha256/x")
    assert spy.calls == []
    assert validate_id("a.b-c_1", "x") == "a.b-c_1"


def test_tampered_segment_is_detected(store):
    log = SessionLog(store, T, "s", merge=False)
    log.append([ev("a"), ev("b")])
    log.append([ev("c")])
    seg = log.head().segments[0]
    data, _ = store.get(seg.key)
    store.put(seg.key, data.replace(b"text of a", b"text of X"))
    before = snapshot(store)
    fresh = SessionLog(store, T, "s")
    with pytest.raises(IntegrityError) as exc:
        fresh.read_events()
    assert exc.value.details["key"] == seg.key and seg.key in str(exc.value)
    with pytest.raises(IntegrityError):
        fresh.read_view()
    logmod._INDEXES.clear()  # a writer in a fresh process: its id index is cold
    with pytest.raises(IntegrityError):
        SessionLog(store, T, "s").append([ev("d")])  # cannot dedup against damaged data
    assert snapshot(store) == before


def test_tampered_artifact_is_detected(store):
    log = SessionLog(store, T, "s")
    ref = log.put_artifact(b"x" * 5000)
    assert ref.sha256 and ref.bytes == 5000 and ref.preview_head == "x" * 300
    assert log.get_artifact(ref.sha256) == b"x" * 5000
    assert log.put_artifact(b"x" * 5000) == ref  # idempotent
    key = f"t/{T}/a/sha256/{ref.sha256}"
    store.put(key, b"y" * 5000)
    before = snapshot(store)
    with pytest.raises(IntegrityError) as exc:
        log.get_artifact(ref.sha256)
    assert exc.value.details["key"] == key
    with pytest.raises(IntegrityError):
        log.put_artifact(b"x" * 5000)
    with pytest.raises(NotFound):
        log.get_artifact("0" * 64)
    assert snapshot(store) == before


def test_missing_bucket(s3_endpoint):
    import boto3

    store = S3Store("compactor-no-such-bucket", endpoint_url=s3_endpoint)
    log = SessionLog(store, T, "s")
    for op in (log.head, lambda: log.append([ev("a")]), lambda: store.head("x"), lambda: store.list("")):
        with pytest.raises(BucketNotFound) as exc:
            op()
        assert "compactor-no-such-bucket" in str(exc.value) and "create" in str(exc.value)
    names = [b["Name"] for b in boto3.client("s3", endpoint_url=s3_endpoint).list_buckets()["Buckets"]]
    assert "compactor-no-such-bucket" not in names  # never created behind the user's back


def test_head_moved_underneath_a_writer_retries(store):
    other = SessionLog(store, T, "s")
    other.append([ev("o1")])
    fired = []

    def before(key, kw):
        if key.endswith("head.json") and kw.get("if_match") and not fired:
            fired.append(key)
            other.append([ev("o2")])  # another writer wins the race

    log = SessionLog(Hooked(store, before), T, "s")
    r = log.append([ev("mine")])
    assert fired and r.attempts == 2
    assert (r.first_seq, r.version) == (3, 3)
    assert [e.id for e in SessionLog(store, T, "s").read_events()] == ["o1", "o2", "mine"]


def test_head_always_moving_gives_concurrent_modification(store):
    other = SessionLog(store, T, "s")
    other.append([ev("o0")])
    n = [0]

    def before(key, kw):
        if key.endswith("head.json") and kw.get("if_match"):
            n[0] += 1
            other.append([ev(f"o{n[0]}")])

    log = SessionLog(Hooked(store, before), T, "s", max_attempts=3, backoff_base=0.001)
    with pytest.raises(ConcurrentModification):
        log.append([ev("mine-1"), ev("mine-2")])
    fresh = SessionLog(store, T, "s")
    assert [e.id for e in fresh.read_events()] == ["o0", "o1", "o2", "o3"]  # none of ours
    assert fresh.head().version == 4
    assert [e.id for e in fresh.read_view()] == ["o0", "o1", "o2", "o3"]


def test_a_retried_request_that_landed_counts_as_success(store):
    """The CAS landed but the client saw 412 (its retry): no duplicate, no error."""
    raised = []

    def after(key, kw):
        if key.endswith("head.json") and not raised:
            raised.append(key)
            raise PreconditionFailed("simulated 412 on a retried request")

    log = SessionLog(Hooked(store, after=after), T, "s")
    r = log.append([ev("a"), ev("b")])
    assert raised and (r.appended, r.version) == (2, 2)
    assert log.append([ev("a"), ev("b")]).appended == 0
    assert [e.seq for e in SessionLog(store, T, "s").read_events()] == [1, 2]


def test_a_crashed_writers_segment_does_not_wedge_the_session(store):
    """A foreign segment at the exact next key (writer died before its CAS) is bypassed."""
    log = SessionLog(store, T, "s", backoff_base=0.001)
    log.append([ev("a")])
    store.put(log._segment_key(2, 2), b'{"seq":2,"id":"ghost","role":"user"}\n', if_none_match=True)
    r = log.append([ev("b")])
    assert (r.first_seq, r.version) == (2, 2)
    seg = log.head().segments[-1]
    assert seg.key != log._segment_key(2, 2)
    assert [e.id for e in SessionLog(store, T, "s").read_events()] == ["a", "b"]


# --- checkpoints, views, records --------------------------------------------------------------


def _ckpt(cid: str, end: int, session: str = "s", **kw) -> Checkpoint:
    return Checkpoint(id=cid, tenant=T, session=session, covers=SeqRange(start=1, end=end), summary="sum", **kw)


def test_view_reads_only_the_segments_it_needs(store):
    log = SessionLog(store, T, "s", merge=False)
    log.append([ev("sys", "be terse", role="system", kind="pinned")])
    for i in range(2, 11):
        log.append([ev(f"e{i}", role="user" if i % 2 else "assistant")])
    log.write_checkpoint(_ckpt("c1", 6))
    h = log.set_checkpoint("c1", expected_etag=log.head().etag)
    assert h.checkpoint == "c1" and h.version == 10
    spy = Hooked(store)
    view = SessionLog(spy, T, "s").read_view()
    assert [e.id for e in view] == ["sys", "checkpoint:c1", "e7", "e8", "e9", "e10"]
    seg_reads = sorted(k for op, k in spy.calls if op == "get" and "/log/" in k)
    keys = {s.first: s.key for s in h.segments}
    assert seg_reads == sorted([keys[1], keys[7], keys[8], keys[9], keys[10]])


def test_checkpoint_writes_are_immutable_and_idempotent(store):
    log = SessionLog(store, T, "s")
    log.append([ev("a"), ev("b")])
    ck = _ckpt("c1", 1)
    key = log.write_checkpoint(ck)
    assert log.write_checkpoint(ck) == key  # same again: fine
    before = snapshot(store)
    with pytest.raises(PreconditionFailed):
        log.write_checkpoint(_ckpt("c1", 2))
    assert snapshot(store) == before
    assert SessionLog(store, T, "s").read_checkpoint("c1") == ck
    assert [c.id for c in log.list_checkpoints()] == ["c1"]
    with pytest.raises(NotFound):
        log.read_checkpoint("nope")


def test_set_checkpoint_is_a_cas(store):
    log = SessionLog(store, T, "s")
    log.append([ev("a"), ev("b")])
    log.write_checkpoint(_ckpt("c1", 1))
    stale = log.head().etag
    log.append([ev("c")])
    before = snapshot(store)
    with pytest.raises(PreconditionFailed):
        log.set_checkpoint("c1", expected_etag=stale)
    assert snapshot(store) == before
    h = log.set_checkpoint("c1", expected_etag=None)
    assert h.checkpoint == "c1" and h.version == 3 and h.etag == log.head().etag
    assert log.current_checkpoint().id == "c1"
    # rollback to no checkpoint
    assert log.set_checkpoint(None, expected_etag=h.etag).checkpoint is None


def test_records(store):
    log = SessionLog(store, T, "s")
    rec = CompactionRecord(id="run-1", tenant=T, session="s", tokens_before=10, tokens_after=5)
    log.write_record(rec)
    log.write_record(rec)
    with pytest.raises(PreconditionFailed):
        log.write_record(rec.model_copy(update={"tokens_after": 6}))
    [got] = log.list_records()
    assert got.sha256 and got.model_copy(update={"sha256": None}) == rec  # sealed when stored


def test_list_sessions(store):
    for s in ("b", "a", "c.1"):
        SessionLog(store, T, s).append([ev("x")])
    SessionLog(store, "other", "z").append([ev("x")])
    assert list_sessions(store, T) == ["a", "b", "c.1"]
    assert list_sessions(store, "nobody") == []
    with pytest.raises(InvalidId):
        list_sessions(store, "../x")


def test_tool_blocks_round_trip(store):
    log = SessionLog(store, T, "s")
    events = [
        Event(id="u", role="user", blocks=[TextBlock(text="list files")]),
        Event(id="a", role="assistant", blocks=[ToolUseBlock(id="t1", name="bash", input={"cmd": "ls"})]),
        Event(id="r", role="user", blocks=[ToolResultBlock(tool_use_id="t1", content=[TextBlock(text="x.py")])]),
    ]
    log.append(events)
    back = SessionLog(store, T, "s").read_events()
    assert [e.with_(seq=0, tokens=None) for e in back] == events


def test_read_pinned_and_after(store):
    log = SessionLog(store, T, "s", merge=False)
    log.append([ev("p1", role="system", kind="pinned"), ev("a"), ev("b")])
    log.append([ev("c"), ev("p2", role="system", kind="pinned"), ev("d")])
    log.append([ev("e")])
    assert [e.id for e in log.read_pinned_and_after(3)] == ["p1", "c", "p2", "d", "e"]
    assert [e.id for e in log.read_pinned_and_after(5, 6)] == ["p1", "p2", "d"]
    assert [e.id for e in log.read_pinned_and_after(0, 2)] == ["p1", "a"]


def _proc_writer(root: str, w: int, per: int) -> None:
    log = SessionLog(LocalStore(root), T, "procs", backoff_base=0.002)
    events = [ev(f"p{w}-{i:03d}") for i in range(per)]
    for i in range(0, per, 3):
        log.append(events[i : i + 3])


def test_writers_in_separate_processes_on_a_local_store(tmp_path):
    import multiprocessing

    root = str(tmp_path / "store")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_proc_writer, args=(root, w, 30)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    events = SessionLog(LocalStore(root), T, "procs").read_events()
    assert [e.seq for e in events] == list(range(1, 121))
    for w in range(4):
        assert [e.id for e in events if e.id.startswith(f"p{w}-")] == [f"p{w}-{i:03d}" for i in range(30)]
