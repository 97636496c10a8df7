"""A shell tool's plain call takes a short path through ``classify`` (issue 17, round thirteen)
and gets the general path's answer.

``classify`` reads a call of a shell tool of no other table (``Bash``, ``exec_command``...) whose
input is strings without a patch envelope, with a ``command`` naming no SWE-agent verb, without
``_patch_files``, ``_command_of`` and ``_swe_command``; ``shell._plain_files`` reads ``cat FILE``
(one operand of a read program) without its word loop. Every call of the fixtures, the corpus,
the synthetic and generated sessions, and calls built around the edges of the short path must
classify as the general path does (the short path turned off), and lift to the same state.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

import functools
import tempfile
from pathlib import Path

from compactor.bench.scale import write_session
from compactor.events import Event, ToolUseBlock
from compactor.importers import import_file
from compactor.lifting import actions, shell
from compactor.lifting.lift import lift_state
from tests.conftest import corpus_files
from tests.unit import test_shell_plain


@functools.lru_cache(maxsize=1)
def _sessions() -> tuple[list[Event], ...]:
    """A generated session of small events (the issue's benchmark shape) and the corpus transcripts."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "small.jsonl"
        write_session(path, 3000)
        out = [import_file(path).events]
    return tuple(out + [import_file(p).events for p in corpus_files()])


def _general(monkeypatch: pytest.MonkeyPatch) -> None:
    """``classify`` without its short path: every route says its name is no plain shell tool."""
    route = actions._route
    monkeypatch.setattr(actions, "_route", lambda name: dataclasses.replace(route(name), plain_shell=False))


def _same(a: actions._Action, b: actions._Action) -> bool:
    return all(getattr(a, f.name) == getattr(b, f.name) and type(getattr(a, f.name)) is type(getattr(b, f.name))
               for f in dataclasses.fields(actions._Action))


_NAMES = ["Bash", "bash", "exec_command", "shell", "shell_command", "run_terminal_cmd", "execute_bash", "sh",
          "run_task", "shell_plan", "Read", "str_replace_editor", "apply_patch", "Write", "mcp_tool"]
_COMMANDS = ["cat src/mod_1.py", "  cat src/a.py  ", "", "   ", "open src/x.py", "open 12", "edit 3:4\nx\nend_of_edit",
             "create new.py", "submit", "find_file a.py", "goto 40", "scroll_down", "ls -la", "pytest -q tests",
             "cat a.py b.py", "cat -n", "cat .", "cat http://h/x.py", "head README", "sed s/a/b/ x.py", "cat a=b.py",
             "echo hi > out.txt", "*** Begin Patch\n*** Add File: a.py\n+x\n*** End Patch", "git mv a.py b.py",
             "\topen x.py", "cat\nsrc/a.py", "FOO=1 cat a.py", "sudo cat a.py", "/bin/cat a.py", "cat a\u00a0b.py"]
_EXTRA = [{}, {"description": "Show it"}, {"description": "has *** marker"}, {"timeout": 30}, {"cmd": "ls x.py"},
          {"workdir": "/r"}]


def _built_calls() -> list[ToolUseBlock]:
    out = []
    for k, (name, command, extra) in enumerate(itertools.product(_NAMES, _COMMANDS, _EXTRA)):
        out.append(ToolUseBlock(id=f"u{k}", name=name, input={"command": command, **extra}))
        out.append(ToolUseBlock(id=f"v{k}", name=name, input={**extra, "command": [command] if k % 2 else 7}))
    out += [ToolUseBlock(id="w1", name="Bash", input={"cmd": "cat a.py"}),
            ToolUseBlock(id="w2", name="Bash", input={}),
            ToolUseBlock(id="w3", name="Bash", input={"command": "cat a.py", "env": {"A": "1"}})]
    return out


def _session_calls() -> list[ToolUseBlock]:
    return [ToolUseBlock(id=f"s{k}", name=name, input={"command": c})
            for k, (name, c) in enumerate(itertools.product(["Bash", "exec_command"],
                                                            test_shell_plain._session_commands()))]


def test_classify_short_path_equals_general(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _built_calls() + _session_calls() + [u for evs in _sessions()
                                                  for e in evs for u in e.tool_uses]
    fast = [actions.classify(u, "open.py") for u in calls]
    _general(monkeypatch)
    slow = [actions.classify(u, "open.py") for u in calls]
    bad = [(u.name, u.input) for u, a, b in zip(calls, fast, slow) if not _same(a, b)]
    assert not bad, bad[:5]
    assert sum(a.kind == "command" for a in fast) > 1000  # (the short path is taken, and answers commands)


def test_plain_read_equals_scanner() -> None:
    commands = [f"{p} {w}" for p in ["cat", "nl", "head", "tail", "less", "more", "bat", "sed", "wc", "open", "cp", "ls"]
                for w in test_shell_plain._WORDS] + ["cat  a.py", "cat a.py ", "cat ", "cat"]
    for c in commands:
        if shell._SPECIAL_RE.search(c) is None:
            assert shell._plain_files(c) == shell._scanned_files(c), c


def test_lifts_equal_with_short_path(monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = _sessions()
    fast = [lift_state(evs).model_dump_json() for evs in sessions]
    _general(monkeypatch)
    assert fast == [lift_state(evs).model_dump_json() for evs in sessions]


def test_the_pass_keeps_no_classification_per_call() -> None:
    """Memory (issue 17): a pass remembers which calls it folded, not each call's block and
    ``_Action`` (~350 bytes a call, ~50 MB at 300k events); the state is the same."""
    import gc

    from compactor.lifting.lift import Lifter

    events = _sessions()[0]
    lifter = Lifter(events, None)
    state = lifter.state_at(events[len(events) // 2].seq)
    alive = sum(type(o) is actions._Action for o in gc.get_objects())
    assert alive < 10, alive  # (the last call's, and any a test holds)
    assert state.commands and lifter.state_at(None) == lift_state(events)


def test_a_failure_reads_the_next_move_from_the_kept_moves() -> None:
    """The moves are kept as parallel lists (issue 17, memory): a failure's next move is still the
    agent's first move after its result, a call in backticks or its words quoted, with its seq, at
    every cut of one pass as in separate lifts."""
    from compactor.events import TextBlock, ToolResultBlock
    from compactor.lifting.lift import Lifter

    def call(seq: int, uid: str, command: str, text: str = "") -> Event:
        blocks = ([TextBlock(text=text)] if text else []) + [ToolUseBlock(id=uid, name="Bash", input={"command": command})]
        return Event(seq=seq, id=f"e{seq}", role="assistant", blocks=blocks)

    def result(seq: int, uid: str, text: str, is_error: bool = False) -> Event:
        return Event(seq=seq, id=f"e{seq}", role="user",
                     blocks=[ToolResultBlock(tool_use_id=uid, content=[TextBlock(text=text)], is_error=is_error)])

    events = [call(1, "a", "make build"), result(2, "a", "Exit code 2\nerror: no rule", True),
              call(3, "b", "make all"), result(4, "b", "ok"),
              call(5, "c", "pytest -q"), result(6, "c", "Exit code 1\nE   AssertionError", True),
              Event(seq=7, id="e7", role="assistant", blocks=[TextBlock(text="The assertion is wrong, fixing it now.")]),
              call(8, "d", "cat src/a.py", "Reading the module first."), result(9, "d", "x = 1\n")]
    state = lift_state(events)
    nexts = {f.tool_use_id: f.next for f in state.failed_approaches}
    assert nexts == {"a": "`make all` (#3)", "c": '"The assertion is wrong, fixing it now." (#7)'}, nexts
    lifter = Lifter(events, None)
    for cut in (2, 4, 6, 7, 9):
        assert lifter.state_at(cut) == lift_state([e for e in events if e.seq <= cut]), cut
