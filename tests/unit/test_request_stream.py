"""``compactor view --json`` and ``compactor plot`` read a stored session segment by segment
(issue 17) and print what they printed when they held it whole: ``view --json`` the bytes of
``json.dump`` of ``render_request(read_view())`` (``engine/request_stream.py``), on generated,
fixture and corpus sessions, before and after a compaction (summary, cleared results)."""

from __future__ import annotations

import io
import json

import pytest

from compactor.bench.synthetic import synthetic_sessions
from compactor.cli import main
from compactor.cli.data import write_request_json
from compactor.engine.compact import compact
from compactor.engine.measure import render_request, view_tokens
from compactor.engine.policy import make_policy
from compactor.engine.request_stream import stream_request
from compactor.engine.view import build_view, stream_view
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.importers import import_file
from compactor.records import Checkpoint, SeqRange
from compactor.store import LocalStore, SessionLog
from compactor.tokens import with_tokens
from tests.conftest import corpus_files, fixture_sessions


def _old_json(log: SessionLog) -> str:
    """What ``view --json`` printed before it streamed: the whole view, the whole request."""
    system, messages = render_request(log.read_view())
    out = io.StringIO()
    json.dump({"system": system, "messages": messages}, out, ensure_ascii=False, indent=1)
    return out.getvalue() + "\n"


def _stored(tmp_path, events: list[Event], name: str) -> SessionLog:
    log = SessionLog(LocalStore(tmp_path / "store"), "acme", name)
    for i in range(0, len(events), 40):  # many segments: a view spans several
        log.append(with_tokens(events[i:i + 40]))
    return log


def _view_json(capsys, tmp_path, name: str) -> str:
    capsys.readouterr()
    assert main(["view", name, "--json", "--store", f"file://{tmp_path / 'store'}", "--tenant", "acme"]) == 0
    return capsys.readouterr().out


def _compacted(log: SessionLog, target: int) -> Checkpoint | None:
    res = compact(log.read_events(), make_policy("default"), target, session=log.session, tenant="acme")
    if res.checkpoint is None:
        return None
    head = log.head()
    log.write_checkpoint(res.checkpoint)
    for sha in res.artifacts:
        log.put_artifact(res.artifacts[sha])
    log.set_checkpoint(res.checkpoint.id, expected_etag=head.etag, sha256=log.checkpoint_sha256(res.checkpoint.id))
    log.write_record(res.record.model_copy(update={"status": "committed", "committed_version": head.version}))
    return res.checkpoint


def _sessions() -> list[tuple[str, list[Event]]]:
    out = [(name.replace("/", "-"), events) for name, events in synthetic_sessions(2, seed=11)]
    out += [(f"fixture-{i}", evs) for i, evs in enumerate(fixture_sessions()) if evs]
    out += [(f"corpus-{i}", import_file(p).events) for i, p in enumerate(corpus_files())]
    return out


def test_view_json_is_the_whole_request_dumped_before_and_after_compactions(tmp_path, capsys) -> None:
    """Every session: byte-identical output with no checkpoint, with a summary and cleared or
    referenced results (a small target), and with results cleared only (a large one)."""
    kinds: set[str] = set()
    for name, events in _sessions():
        log = _stored(tmp_path, events, name)
        assert _view_json(capsys, tmp_path, name) == _old_json(log), name
        size = view_tokens(with_tokens(events))
        for target in (max(1_000, size // 5), max(1_000, size * 9 // 10)):
            ckpt = _compacted(log, target)
            if ckpt is None:
                continue
            kinds.add("summary" if not ckpt.covers.empty else "cleared only")
            if ckpt.replacements:
                kinds.add("replacements")
            assert _view_json(capsys, tmp_path, name) == _old_json(log), (name, target)
    assert kinds >= {"summary", "replacements"}


def _edge_session() -> list[Event]:
    """Pinned and injected system events mid-view, a leading assistant turn, a result that
    arrives after the conversation moved on, calls never answered, newlines and non-ASCII."""
    def ev(i: int, role: str, blocks: list, **kw) -> Event:
        return Event(seq=i, id=f"e{i}", role=role, blocks=blocks, **kw)

    return [
        ev(1, "assistant", [TextBlock(text="resuming: où en étions-nous?\n\tstep 2")]),
        ev(2, "system", [TextBlock(text="You are careful.")], kind="pinned"),
        ev(3, "user", [TextBlock(text="run the tests\nthen lint")]),
        ev(4, "assistant", [ToolUseBlock(id="t1", name="Bash", input={"command": "pytest -q", "n": 1.5})]),
        ev(5, "assistant", [ToolUseBlock(id="t2", name="Bash", input={})]),
        ev(6, "user", [ToolResultBlock(tool_use_id="t2", content=[TextBlock(text="ok ✓")])]),
        ev(7, "system", [TextBlock(text="reminder: \"quotes\" and \\ backslashes")], injected=True),
        ev(8, "assistant", [TextBlock(text="t1 still runs")]),
        ev(9, "user", [ToolResultBlock(tool_use_id="t1", content=[TextBlock(text="3 failed")], is_error=True)]),
        ev(10, "user", [TextBlock(text="   ")]),
        ev(11, "assistant", [ToolUseBlock(id="t3", name="Read", input={"path": "a.py", "nested": {"x": []}})]),
        ev(12, "assistant", [TextBlock(text="and another"), ToolUseBlock(id="t4", name="Grep", input={"p": "x"})]),
    ]


@pytest.mark.parametrize("ckpt", [None, "summary", "replaced"])
def test_the_streamed_request_is_render_request_of_the_view(ckpt) -> None:
    events = _edge_session()
    cp = None
    if ckpt == "summary":
        cp = Checkpoint(id="c1", tenant="t", session="s", covers=SeqRange(start=1, end=4), summary="did things",
                        state={"unknown_actions": [{"tool_use_id": "t1", "name": "Bash"}]})
    elif ckpt == "replaced":
        cp = Checkpoint(id="c2", tenant="t", session="s", covers=SeqRange(start=1, end=0),
                        replacements={6: [ToolResultBlock(tool_use_id="t2", content=[TextBlock(text="[cleared]")])]})
    expected = render_request(build_view(events, cp))
    reads = []

    def read():
        reads.append(1)
        return iter(events)

    system, messages = stream_request(lambda first: stream_view(read, cp, first=first))
    assert len(reads) == 1  # the first read is done before the first message
    assert (system, list(messages)) == expected
    assert len(reads) == 2
    texts = json.dumps(expected[1])
    assert "outcome is unknown" in texts
    if ckpt != "summary":  # (the summary covers t1's call: its result is shown as text, no placeholder)
        assert "(continued)" in texts and "arrived later" in texts  # the late result's placeholder
    else:
        assert "which the summary covers" in texts


@pytest.mark.parametrize("messages", [
    [],
    [{"role": "user", "content": []}],
    [{"role": "user", "content": [{"type": "text", "text": "a\nb \"q\" \\ é ✓ \u2028 \x00"}]},
     {"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "n",
                                        "input": {"a": [1, 2.5, None, True], "b": {}, "c": [[], {"d": "e"}]}}]}],
])
def test_write_request_json_writes_json_dump_s_bytes(messages) -> None:
    for system in ("", "sys\nprompt ü"):
        want = io.StringIO()
        json.dump({"system": system, "messages": messages}, want, ensure_ascii=False, indent=1)
        got = io.StringIO()
        write_request_json(system, iter(messages), got)
        assert got.getvalue() == want.getvalue()


def test_view_json_and_plot_never_hold_the_session_whole(tmp_path, capsys, monkeypatch) -> None:
    """Neither command reads the whole log into a list (the memory issue 17 is about)."""
    pytest.importorskip("matplotlib")
    from compactor.cli.plot import token_series

    _, events = next(iter(synthetic_sessions(1, seed=3)))
    log = _stored(tmp_path, events, "big")
    assert _compacted(log, max(1_000, view_tokens(with_tokens(events)) // 5)) is not None
    want = _old_json(log)
    series = token_series([(e.seq, e.tokens or 0) for e in log.read_events()], log.list_records())

    def whole(*_a, **_k):
        raise AssertionError("read the whole session")

    for name in ("read_events", "read_view", "read_pinned_and_after"):
        monkeypatch.setattr(SessionLog, name, whole)
    assert _view_json(capsys, tmp_path, "big") == want
    url = f"file://{tmp_path / 'store'}"
    assert main(["plot", "big", "--json", "--out", str(tmp_path / "p.png"), "--store", url, "--tenant", "acme"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["seqs"], got["view"], got["log"]) == (series.seqs, series.view, series.log)
    assert len(got["seqs"]) == len(events) and [m["status"] for m in got["marks"]] == [m.status for m in series.marks]
