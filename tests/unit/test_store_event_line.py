"""An event's stored line does not depend on the seq it arrives with (issue 17: the store dumps
the event as it is and cuts its ``{"seq":N,`` prefix instead of copying it with ``seq=0``)."""

from __future__ import annotations

from datetime import datetime, timezone

from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.store import LocalStore, SessionLog
from compactor.store.segments import event_line


def _events() -> list[Event]:
    at = datetime(2026, 12, 3, 5, 30, tzinfo=timezone.utc)
    return [
        Event(id="u1", role="user", at=at, blocks=[TextBlock(text='a "quoted", comma, {brace}')]),
        Event(id="a1", role="assistant", blocks=[ToolUseBlock(id="c1", name="bash", input={"command": "ls, -la"})]),
        Event(id="r1", role="user", blocks=[ToolResultBlock(tool_use_id="c1", content=[TextBlock(text="x," * 5000)])],
              tokens=7, meta={"k": [1, 2]}),
        Event(id=",", role="user", kind="pinned", blocks=[]),
    ]


def test_the_line_is_the_seq_zero_dump_whatever_the_seq():
    for e in _events():
        want = e.with_(seq=0).model_dump_json(exclude_none=True).encode()
        assert want.startswith(b'{"seq":0,')
        for seq in (0, 1, 9, 10, 123_456_789):
            got = bytes(event_line(e.with_(seq=seq)))
            assert b'{"seq":0,' + got == want, (e.id, seq)


def test_a_log_stores_the_same_bytes_whatever_seqs_the_events_carry(tmp_path):
    logs = []
    for name, shift in (("zero", 0), ("shifted", 40_000)):
        store = LocalStore(tmp_path / name)
        log = SessionLog(store, "acme", "s1")
        log.append([e.with_(seq=shift + i) for i, e in enumerate(_events())])
        logs.append((store, log))
    (s0, log0), (s1, log1) = logs
    segs0 = sorted(k for k in s0.list("") if "/log/" in k)
    segs1 = sorted(k for k in s1.list("") if "/log/" in k)
    assert segs0 and segs0 == segs1
    assert [s0.get(k)[0] for k in segs0] == [s1.get(k)[0] for k in segs1]
    got = [e.model_dump(mode="json") for e in log1.read_events()]
    assert [(g["seq"], g["id"], g["blocks"]) for g in got] == [
        (i + 1, e.id, e.model_dump(mode="json")["blocks"]) for i, e in enumerate(_events())]
    assert got == [e.model_dump(mode="json") for e in log0.read_events()]
