"""Streamed append (``store.bulk.append_stream``) and streamed import: the same stored bytes as
``SessionLog.append`` of the whole batch, and the append protocol's guarantees (a failed or
beaten import leaves the head unchanged; a foreign segment does not wedge the session)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import compactor.store.segments as segments
from compactor.bench.scale import write_session
from compactor.events import Event, TextBlock
from compactor.importers import _claude_code, import_file
from compactor.store import LocalStore, ObjectStore, SessionLog
from compactor.store.bulk import append_stream
from compactor.tokens import with_tokens
from tests.conftest import corpus_files
from tests.unit.store_fixtures import make_store, store  # noqa: F401 (pytest fixtures)
from tests.unit.test_session_log import Hooked

T = "acme"


def ev(i: str, kind: str = "message", role: str = "user", text: str = "") -> Event:
    return Event(id=i, role=role, kind=kind, blocks=[TextBlock(text=text or f"text of {i}")])


def stored(store: ObjectStore) -> dict[str, bytes]:
    """Every object, heads without their time and random log id (the rest must match)."""
    out = {}
    for k in store.list(""):
        data = store.get(k)[0]
        if k.endswith("head.json"):
            h = json.loads(data)
            h.pop("updated_at"), h.pop("log_id")
            data = json.dumps(h, sort_keys=True).encode()
        out[k] = data
    return out


def streamed(log: SessionLog, events: list[Event], batch: int = 7):
    def produce(sink):
        for i in range(0, len(events), batch):
            sink(events[i:i + batch])
        return "done"

    return append_stream(log, produce)


# each case: appends made first (plain), then the batch under test
CASES = {
    "new session, one chunk": ([], [ev(f"e{i}") for i in range(30)]),
    "merged with the log's tail": ([[ev("a"), ev("b")], [ev("c")]], [ev(f"e{i}") for i in range(5)]),
    "several chunks": ([[ev("a")]], [ev(f"e{i}", text="x" * (i % 50)) for i in range(130)]),
    "pinned and duplicates": (
        [[ev("e1"), ev("e2")]],
        [ev("e0", kind="pinned", role="system"), ev("e1"), ev("e2"), ev("e3"), ev("e3"), ev("e9", kind="pinned", role="system")],
    ),
    "all stored already": ([[ev("a"), ev("b")]], [ev("a"), ev("b"), ev("a")]),
    "nothing": ([[ev("a")]], []),
}


@pytest.mark.parametrize("case", list(CASES))
def test_streamed_append_stores_the_same_bytes_as_append(tmp_path, monkeypatch, case) -> None:
    monkeypatch.setattr(segments, "CHUNK_EVENTS", 40)
    before, batch = CASES[case]
    logs = []
    for name in ("plain", "streamed"):
        st = LocalStore(tmp_path / name)
        log = SessionLog(st, T, "s")
        for b in before:
            log.append(b)
        logs.append((st, log))
    (a_store, a_log), (b_store, b_log) = logs
    want = a_log.append(batch)
    got, out = streamed(SessionLog(b_store, T, "s"), batch)
    assert out == "done"
    assert got.model_dump(exclude={"attempts"}) == want.model_dump(exclude={"attempts"})
    assert stored(b_store) == stored(a_store)
    assert SessionLog(b_store, T, "s").read_events() == SessionLog(a_store, T, "s").read_events()


def test_an_import_that_fails_midway_changes_nothing_visible(store, monkeypatch) -> None:
    monkeypatch.setattr(segments, "CHUNK_EVENTS", 10)
    log = SessionLog(store, T, "s")
    log.append([ev("a"), ev("b")])
    head = log.head()
    view = log.read_view()

    def produce(sink):
        sink([ev(f"e{i}") for i in range(35)])  # three segments written already
        raise RuntimeError("the transcript broke off")

    with pytest.raises(RuntimeError):
        append_stream(SessionLog(store, T, "s"), produce)
    assert len([k for k in store.list("") if "/log/" in k]) > len(head.segments)  # orphans only
    fresh = SessionLog(store, T, "s")
    assert fresh.head().model_dump(exclude={"etag"}) == head.model_dump(exclude={"etag"})
    assert fresh.read_view() == view
    # the next import over the orphans' keys lands whole
    r, _ = streamed(fresh, [ev(f"e{i}") for i in range(35)])
    assert (r.appended, r.version) == (35, 37)
    assert [e.id for e in SessionLog(store, T, "s").read_events()] == ["a", "b", *(f"e{i}" for i in range(35))]


def test_a_writer_that_moves_the_head_first_makes_the_import_run_again(store, monkeypatch) -> None:
    monkeypatch.setattr(segments, "CHUNK_EVENTS", 10)
    other = SessionLog(store, T, "s")
    other.append([ev("o1")])
    fired = []

    def before(key, kw):
        if key.endswith("head.json") and kw.get("if_match") and not fired:
            fired.append(key)
            other.append([ev("o2"), ev("e3")])  # wins the race, and stores one of ours

    log = SessionLog(Hooked(store, before), T, "s", backoff_base=0.001)
    runs = []

    def produce(sink):
        runs.append(1)
        sink([ev(f"e{i}") for i in range(25)])
        return len(runs)

    r, n = append_stream(log, produce)
    assert fired and n == 2 and r.attempts == 2
    assert (r.first_seq, r.appended, r.duplicates, r.version) == (4, 24, 1, 27)
    ids = [e.id for e in SessionLog(store, T, "s").read_events()]
    assert ids == ["o1", "o2", "e3", *(f"e{i}" for i in range(25) if i != 3)]
    assert [e.seq for e in SessionLog(store, T, "s").read_events()] == list(range(1, 28))


def test_a_dead_writers_segment_at_the_next_key_is_bypassed(tmp_path) -> None:
    store = LocalStore(tmp_path / "store")
    log = SessionLog(store, T, "s", backoff_base=0.001)
    log.append([ev("a")])
    store.put(log._segment_key(2, 3), b'{"seq":2,"id":"ghost","role":"user"}\n', if_none_match=True)
    r, _ = streamed(SessionLog(store, T, "s", backoff_base=0.001), [ev("b"), ev("c")])
    assert (r.first_seq, r.version) == (2, 3)
    assert [e.id for e in SessionLog(store, T, "s").read_events()] == ["a", "b", "c"]


# --- the streamed import ----------------------------------------------------------------------


def _claude_files(tmp_path: Path) -> list[Path]:
    small = tmp_path / "small.jsonl"
    write_session(small, 1_200)
    return [p for p in corpus_files() if "claude-code" in p.parts] + [small]


def test_streamed_claude_code_import_gives_the_same_events_and_stats(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(_claude_code, "RELEASE_EVERY", 1)  # hand over after every line
    for path in _claude_files(tmp_path):
        whole = import_file(path)
        batches: list[list[Event]] = []
        res = import_file(path, sink=batches.append)
        assert res.events == [] and len(batches) > 1
        assert [e for b in batches for e in b] == whole.events, path
        assert res.stats == whole.stats and res.skipped == whole.skipped


def test_an_importer_that_does_not_stream_hands_over_its_events_at_the_end(tmp_path) -> None:
    path = tmp_path / "msgs.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]))
    batches: list[list[Event]] = []
    res = import_file(path, sink=batches.append)
    assert res.events == [] and [[e.id for e in b] for b in batches] == [[e.id for e in import_file(path).events]]


def test_a_store_error_in_the_sink_is_not_reported_as_a_broken_file(tmp_path) -> None:
    path = tmp_path / "small.jsonl"
    write_session(path, 50)

    def sink(events):
        raise ValueError("store said no")

    with pytest.raises(ValueError, match="store said no"):
        import_file(path, sink=sink)


def test_cli_import_stores_what_append_of_the_whole_import_stores(tmp_path, capsys) -> None:
    from compactor.cli import main

    path = tmp_path / "small.jsonl"
    write_session(path, 9_000)  # three segments at the default chunk size
    a = LocalStore(tmp_path / "a")
    SessionLog(a, T, "s").append(with_tokens(import_file(path).events))
    assert main(["import", str(path), "--store", f"file://{tmp_path / 'b'}", "--tenant", T,
                 "--session", "s", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["events"], doc["appended"], doc["version"]) == (9_000, 9_000, 9_000)
    b = LocalStore(tmp_path / "b")
    assert len(SessionLog(b, T, "s").head().segments) == 3
    assert stored(b) == stored(a)


def test_a_head_that_keeps_moving_gives_concurrent_modification_and_none_of_ours(tmp_path) -> None:
    from compactor.errors import ConcurrentModification

    store = LocalStore(tmp_path / "store")
    other = SessionLog(store, T, "s")
    other.append([ev("o0")])
    n = [0]

    def before(key, kw):
        if key.endswith("head.json") and kw.get("if_match"):
            n[0] += 1
            other.append([ev(f"o{n[0]}")])

    log = SessionLog(Hooked(store, before), T, "s", max_attempts=3, backoff_base=0.001)
    with pytest.raises(ConcurrentModification) as exc:
        streamed(log, [ev("mine-1"), ev("mine-2")])
    assert exc.value.details.get("attempts") == 3
    assert [e.id for e in SessionLog(store, T, "s").read_events()] == ["o0", "o1", "o2", "o3"]
