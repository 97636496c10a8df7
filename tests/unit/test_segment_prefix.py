"""A reader that decoded a session's tail segments decodes only the new lines of the segment an
append folds them into (SegmentCache.decoded_prefix), and reads the same events as a cold reader."""

from __future__ import annotations

import compactor.store.log as logmod
from compactor.events import Event, TextBlock
from compactor.store import LocalStore, SessionLog
from compactor.store.caches import SegmentCache

T = "acme"


def ev(i: str, kind: str = "message") -> Event:
    return Event(id=i, role="system" if kind == "pinned" else "user", kind=kind,
                 blocks=[TextBlock(text=f"text of {i}")])


def _counting(monkeypatch) -> list[int]:
    parsed: list[int] = []
    real = logmod._parse_events

    def counted(data: bytes):
        out = real(data)
        parsed.append(len(out))
        return out

    monkeypatch.setattr(logmod, "_parse_events", counted)
    return parsed


def test_a_warm_reader_parses_each_appended_event_once_and_reads_what_a_cold_one_reads(tmp_path, monkeypatch):
    store = LocalStore(tmp_path / "store")
    writer = SessionLog(store, T, "s")  # its own cache: the reader fetches every new segment
    cache = SegmentCache()
    parsed = _counting(monkeypatch)
    n = merged = warm_parsed = 0
    for batch in range(12):
        size = 3 + batch % 4
        writer.append([ev(f"e{n + i}", "pinned" if (n + i) % 7 == 0 else "message") for i in range(size)])
        n += size
        merged += writer.head().segments[-1].first < n - size + 1  # folded into one segment
        start = len(parsed)
        warm = SessionLog(store, T, "s", cache=cache).read_events()
        warm_parsed += sum(parsed[start:])
        start = len(parsed)
        cold = SessionLog(store, T, "s", cache=SegmentCache()).read_events()
        assert sum(parsed[start:]) == n  # a cold reader parses every event
        assert [e.model_dump() for e in warm] == [e.model_dump() for e in cold]
        assert [e.seq for e in warm] == list(range(1, n + 1))
    assert merged >= 6  # appends did fold the tail
    assert warm_parsed == n  # the warm reader parsed each event once over the 12 appends


def test_the_folded_segment_is_checked_past_the_reused_part(tmp_path):
    store = LocalStore(tmp_path / "store")
    writer = SessionLog(store, T, "s")
    cache = SegmentCache()
    writer.append([ev("a"), ev("b")])
    reader = SessionLog(store, T, "s", cache=cache)
    assert [e.id for e in reader.read_events()] == ["a", "b"]
    writer.append([ev("c"), ev("d")])
    seg = writer.head().segments[-1]
    assert seg.first == 1  # folded: the reader's decoded segment is its prefix
    prefix = cache.decoded_prefix(seg, store.get(seg.key)[0])
    assert [e.id for e in prefix[0]] == ["a", "b"] and 0 < prefix[1] < seg.bytes
    assert [e.id for e in SessionLog(store, T, "s", cache=cache).read_events()] == ["a", "b", "c", "d"]
    # Bytes that only start like a cached segment are not taken for it.
    other = seg.model_copy(update={"key": seg.key.replace("/s/", "/other/")})
    assert cache.decoded_prefix(other, store.get(seg.key)[0]) == ([], 0)
