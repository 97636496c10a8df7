"""Nothing raw reaches a terminal: every command that prints conversation text shows control
characters escaped, and ``--json`` keeps the text exactly (JSON does its own escaping)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from activities.breaker import update_breaker
from compactor import breaker
from compactor.cli import main
from compactor.cli.common import table
from compactor.cli.terminal import TerminalStream, sanitize
from compactor.records import Checkpoint, CompactionRecord, SeqRange
from compactor.store import SessionLog, open_store

# What a terminal acts on: C0 but \n and \t, DEL, C1, bidi and line separators.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
ATTACKS = ["\x1b]0;PWNED\x07", "\x1b[2J", "\x1b]52;c;aGk=\x07", "\x9b31m", "\r", "\x08", "\x7f", "\u202e",
           "\x1bP+q\x1b\\", "\x00", "\x85"]

hostile = st.lists(st.one_of(st.sampled_from(ATTACKS), st.text(min_size=1, max_size=8)),
                   min_size=1, max_size=6).map("".join)


def test_sanitize_escapes_controls_and_keeps_text():
    assert sanitize("a\x1b]0;t\x07b") == "a\\e]0;t\\ab"
    assert sanitize("x\x9b2Jy\u202ez") == "x\\x9b2Jy\\u202ez"
    assert sanitize("line1\r\nline2\ttab \\ path") == "line1\nline2\ttab \\ path"
    assert sanitize("plain text, ünïcödé ✓") == "plain text, ünïcödé ✓"


@given(hostile)
@settings(max_examples=200, deadline=None, database=None)
def test_sanitize_is_safe_and_idempotent(text):
    out = sanitize(text)
    assert not UNSAFE.search(out)
    assert sanitize(out) == out


def test_the_stream_and_tables_use_it(capsys):
    import sys

    TerminalStream(sys.stdout).write("a\x1b[2Jb\n")
    assert capsys.readouterr().out == "a\\e[2Jb\n"
    t = table([["\x1b[31mred", 1]], ["name", "n"])
    assert "\x1b" not in t and t.splitlines()[1].split()[0] == "-" * len("\\e[31mred")  # aligned


def session_with(root: Path, text: str) -> str:
    """A stored session whose message, tool input, tool output, file path, checkpoint
    summary, record error and breaker error all carry ``text``."""
    doc = {"system": "sys", "messages": [
        {"role": "user", "content": f"please fix {text}"},
        {"role": "assistant", "content": [
            {"type": "text", "text": f"reading {text}"},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": f"/src/{text}.py"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": f"out {text}", "is_error": True}]},
        {"role": "assistant", "content": f"done {text}"},
        {"role": "user", "content": f"next {text} end"},
    ]}
    src = root / "t.json"
    src.write_text(json.dumps(doc))
    url = f"file://{root / 'store'}"
    assert main(["import", str(src), "--format", "anthropic-messages", "--session", "s", "--store", url]) == 0
    store = open_store(url)
    log = SessionLog(store, "default", "s")
    log.write_checkpoint(Checkpoint(id="c1", tenant="default", session="s", covers=SeqRange(start=1, end=3),
                                    summary=f"summary {text}", snapshot_version=3))
    log.set_checkpoint("c1", expected_etag=None)
    log.write_record(CompactionRecord(id="r1", tenant="default", session="s", checkpoint="c1",
                                      status="failed", error=f"boom {text}"))
    update_breaker(store, "default", "s", lambda st_: breaker.record(
        st_, tenant="default", session="s", ok=False, trigger="sweep", error=f"err {text}"))
    return url


COMMANDS = [["view", "s"], ["inspect", "s"], ["inspect", "s", "--diff"], ["inspect", "s", "--diff", "c1"],
            ["sessions"], ["breaker", "s"], ["verify", "s"]]


@given(hostile)
@settings(max_examples=12, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_every_command_that_prints_conversation_text_escapes_it(tmp_path_factory, capsys, text):
    root = tmp_path_factory.mktemp("term")
    url = session_with(root, text)
    for argv in COMMANDS:
        capsys.readouterr()
        rc = main([*argv, "--store", url])
        out = capsys.readouterr()
        assert rc in (0, 1), (argv, out.err)
        assert not UNSAFE.search(out.out + out.err), argv
    # the text does reach the output (escaped), so the check above is not vacuous
    capsys.readouterr()
    main(["view", "s", "--store", url])
    assert sanitize(f"next {text} end") in capsys.readouterr().out
    # errors echo user input: a file name full of controls
    rc = main(["import", str(root / f"no{text}such.json"), "--store", url])
    err = capsys.readouterr().err
    assert rc == 2 and not UNSAFE.search(err)
    # --json is unchanged: the exact text comes back
    main(["view", "s", "--json", "--store", url])
    doc = json.loads(capsys.readouterr().out)
    texts = json.dumps(doc, ensure_ascii=False)
    assert json.dumps(f"done {text}", ensure_ascii=False)[1:-1] in texts


@pytest.mark.parametrize("argv", [["view", "\x1b]0;x\x07"], ["inspect", "s", "--diff", "\x1b[2J"],
                                  ["sessions", "--tenant", "\x9bevil"]])
def test_bad_arguments_are_echoed_escaped(capsys, tmp_path, argv):
    rc = main([*argv, "--store", f"file://{tmp_path}"])
    err = capsys.readouterr().err
    assert rc == 2 and not UNSAFE.search(err) and len(err.strip().splitlines()) == 1
