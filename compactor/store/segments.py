"""How an append is cut into segments and how segments merge on the way in (the log's
``append``; the reasons are in ``store.log``'s docstring, "Merging keeps the head small"):
an event's line as stored, an append's lines in chunks of bounded size, and the head's tail
segments a one-chunk append absorbs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from compactor.events import Event
from compactor.records import Segment

WEIGHT_UNIT = 2048  # bytes counted as one event when weighing a segment
MAX_SEGMENT_EVENTS = 8192
MAX_SEGMENT_BYTES = 16 << 20
CHUNK_EVENTS = 4096  # a large append (bulk import) is split into segments of this size
CHUNK_BYTES = 8 << 20


def weight(n_events: int, n_bytes: int) -> int:
    """Size of a segment for merge planning: events, or 2 KiB units if events are large."""
    return max(n_events, -(-n_bytes // WEIGHT_UNIT))


@dataclass
class Chunk:
    """The bytes of one segment to write: events ``first..last`` and the seqs of the pinned."""

    first: int
    last: int
    data: bytes
    pinned: list[int]


def absorbable(segments: Sequence[Segment], n_events: int, n_bytes: int) -> list[Segment]:
    """The head's tail segments an append of ``n_events`` / ``n_bytes`` absorbs (merged like a
    binary counter: each while it is no larger than what is written so far, within the
    segment limits), in order."""
    absorbed: list[Segment] = []
    for s in reversed(segments):
        s_ev = s.last - s.first + 1
        if (
            weight(s_ev, s.bytes) > weight(n_events, n_bytes)
            or s_ev + n_events > MAX_SEGMENT_EVENTS
            or s.bytes + n_bytes > MAX_SEGMENT_BYTES
        ):
            break
        absorbed.insert(0, s)
        n_events, n_bytes = n_events + s_ev, n_bytes + s.bytes
    return absorbed


def event_line(e: Event) -> memoryview:
    """An event's JSON after its ``{"seq":N,`` prefix (the seq is written per attempt): bytes
    straight from pydantic and a view past the prefix, no copy of a big event. The event is
    dumped as it is, whatever its seq (issue 17: a copy with ``seq=0`` only to dump it was ~4
    of ~10 us an event of ``compactor import``): ``seq`` is the first field and an int, so the
    prefix ends at the first comma."""
    line = e.__pydantic_serializer__.to_json(e, exclude_none=True)
    if not line.startswith(b'{"seq":'):  # pragma: no cover - field order is fixed
        raise AssertionError("Event JSON must start with seq")
    return memoryview(line)[line.index(b",", 7) + 1:]


def chunk_lines(first: int, events: list[Event], lines: list[bytes]) -> list[Chunk]:
    """The segments' bytes of an append of ``events`` from seq ``first`` (``lines``: each event's
    ``event_line``, released as it is copied in): at most CHUNK_EVENTS events or CHUNK_BYTES
    bytes each, with the seqs of their pinned events."""
    chunks: list[Chunk] = []
    buf: list[bytes] = []
    pinned: list[int] = []
    size = 0
    start = seq = first
    for i, e in enumerate(events):
        full = b'{"seq":%d,' % seq + lines[i] + b"\n"
        lines[i] = b""  # the segment bytes hold it now
        if buf and (len(buf) >= CHUNK_EVENTS or size + len(full) > CHUNK_BYTES):
            chunks.append(Chunk(start, seq - 1, b"".join(buf), pinned))
            buf, pinned, size, start = [], [], 0, seq
        buf.append(full)
        size += len(full)
        if e.kind == "pinned":
            pinned.append(seq)
        seq += 1
    chunks.append(Chunk(start, seq - 1, b"".join(buf), pinned))
    return chunks
