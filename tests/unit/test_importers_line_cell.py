"""A Claude Code import's per-line steps made cheaper (issue 17, round nineteen) without a
change a user could notice: an entry of the wrong shape is still a ParseError naming its
line, wherever it is and whether the import is streamed or counted (the line is kept in a
cell, ``iter_jsonl(..., where)``, and published to ``CURRENT_LINE`` only when an exception
leaves the loop); line endings of any mix of ``\\r`` and ``\\n`` read as before (one
``rstrip``); and a transcript imports into the same events either way."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest

from compactor.bench.scale import write_session
from compactor.errors import ParseError
from compactor.importers import import_file
from compactor.importers._common import CURRENT_LINE, Source


def _line(i: int) -> dict:
    if i % 2:
        return {"type": "assistant", "uuid": f"a{i}", "sessionId": "s", "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"id": f"m{i}", "role": "assistant", "content": [
                    {"type": "text", "text": f"Step {i}."},
                    {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"run {i}"}}]}}
    return {"type": "user", "uuid": f"u{i}", "sessionId": "s", "timestamp": "2026-01-01T00:00:02.000Z",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i - 1}",
                                                       "content": f"out {i}"}]}}


#: Valid JSON of the wrong shape (each raises inside the importer: TypeError / AttributeError).
_BAD = [
    {"type": [], "uuid": "x", "message": {"role": "user", "content": "x"}},
    {"type": "assistant", "uuid": "x", "message": {"role": "assistant", "content": [{"type": "text", "text": "t"}],
                                                    "usage": 7}},
    {"type": "assistant", "uuid": "x", "message": {"role": "assistant", "content": [{"type": "image", "source": 7}]}},
]


@pytest.mark.parametrize("bad", range(len(_BAD)))
@pytest.mark.parametrize("mode", ["plain", "streamed", "counted"])
def test_an_entry_of_the_wrong_shape_names_its_line_wherever_it_is(tmp_path: Path, bad: int, mode: str) -> None:
    n = 600  # (past ``RELEASE_EVERY``: drafts are finished while the lines are read)
    for at in (1, 2, 300, n):
        lines = [json.dumps(_line(i)) for i in range(1, n + 1)]
        lines.insert(at - 1, json.dumps(_BAD[bad]))
        lines.insert(0, json.dumps({"type": "progress", "uuid": "p"}))  # (bookkeeping: skipped, numbered)
        path = tmp_path / f"b{bad}-{at}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        sink: list = []
        with pytest.raises(ParseError) as info:
            if mode == "plain":
                import_file(path, "claude-code")
            else:
                import_file(path, "claude-code", sink=sink.extend, count=mode == "counted")
        assert info.value.details["line"] == at + 1, (bad, at, mode)
        assert f"line {at + 1}" in str(info.value)
        assert CURRENT_LINE.get() == at + 1


def test_a_finished_import_leaves_no_current_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_session(path, 700)
    CURRENT_LINE.set(5)
    for kw in ({}, {"sink": [].extend, "count": True}):
        assert import_file(path, "claude-code", **kw).stats["events"] > 0
        assert CURRENT_LINE.get() is None


def _lines_before(data: bytes, keep_empty: bool) -> list[tuple[int, str]]:
    """``Source.lines`` as it read before round nineteen (decoded, then ``rstrip("\\n")`` and
    ``rstrip("\\r")``)."""
    out = []
    for no, raw in enumerate(io.BytesIO(data).readlines(), 1):
        line = raw.decode("utf-8-sig" if no == 1 else "utf-8", errors="replace")
        line = line.rstrip("\n").rstrip("\r")
        if keep_empty or (line and not line.isspace()):
            out.append((no, line))
    return out


@pytest.mark.parametrize("keep_empty", [False, True])
def test_lines_of_any_mix_of_endings_read_as_before(keep_empty: bool) -> None:
    rnd = random.Random(19)
    parts = ["\n", "\r", "\r\n", "\r\r\n", " ", "\t", "a", "{}", "\u00e9", "\ufeff", "\r\r"]
    for _ in range(3000):
        text = "".join(rnd.choice(parts) for _ in range(rnd.randint(0, 12)))
        data = text.encode() + (b"\xff\r\n" if rnd.random() < 0.1 else b"")
        got = list(Source("t", data=data).lines(keep_empty=keep_empty))
        assert got == _lines_before(data, keep_empty), repr(data)


@pytest.mark.parametrize("streamed", [False, True])
def test_line_endings_of_any_mix_read_as_plain_newlines(tmp_path: Path, streamed: bool) -> None:
    lines = [json.dumps(_line(i)) for i in range(1, 41)]
    ends = ["\n", "\r\n", "\r\r\n", "\n", "\r\r\r\n"]
    base = tmp_path / "lf.jsonl"
    base.write_text("\n".join(lines) + "\n")
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes("".join(line + ends[i % len(ends)] for i, line in enumerate(lines)).encode()
                      + b"\r")  # (a last line of only a carriage return: blank, skipped)

    def dumps(path: Path) -> list[str]:
        got: list = []
        res = import_file(path, "claude-code", sink=got.extend, count=True) if streamed else import_file(path)
        return [e.model_dump_json() for e in (got or res.events)]

    want = dumps(base)
    assert len(want) == 40 and dumps(mixed) == want
