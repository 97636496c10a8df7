"""The lift's short path for a plain shell command that worked (issue 17, round fourteen) folds a pair
as the general path does.

``ShellPairs.shell_pair`` folds a shell tool's plain call (``cat src/x.py``: no quote, pipe,
redirect or heredoc; no file changed; no tests run) whose result worked, without an ``_Action``,
and declines every other pair, changing nothing. A lift with the short path turned off
(``shellpair.ON``) must give the same state, at several cuts of one pass and on top of a previous
state, on generated sessions, the fixtures, the synthetic sessions, the corpus (when present), and
a session of crafted edge shapes around the path's guard.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import pytest

from compactor.bench.scale import write_session
from compactor.bench.synthetic import synthetic_sessions
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.importers import import_file
from compactor.lifting import shellpair
from compactor.lifting.lift import Lifter, lift_state
from tests.conftest import corpus_files, fixture_sessions

_LONG_OK = "x = 1\n" * 150 + "Exit code: 0\n"  # (the exit code in the tail a long result is searched by)
_LONG_FAIL = "x = 1\n" * 150 + "Exit code: 2\n"

# (tool name, command or input, result text, is_error): pairs around the short path's guard
_EDGES: list[tuple[str, object, str, bool]] = [
    ("Bash", "cat src/a.py", "def f(x):\n    return x\n", False),
    ("Bash", "cat src/a.py", "def f(x):\n    return 2\n", False),  # the same file again (``_touch``)
    ("Bash", "cat src/b.py", "Exit code 1\ncat: src/b.py: No such file or directory", False),  # failed
    ("Bash", "cat src/c.py", "no such file", True),  # an error result
    ("Bash", "cat src/d.py", _LONG_OK, False),
    ("Bash", "cat src/e.py", _LONG_FAIL, False),
    ("Bash", "cat src/f.py", "Traceback (most recent call last):\n  x\nValueError: bad", False),
    ("Bash", "cat src/g.py", "ValueError: listed at the start of a line\n", False),  # an error named, ok
    ("Bash", "cat a.py b.py", "a\nb\n", False),  # two files read: no facts
    ("Bash", "cat -n src/a.py", "1 def f(x):\n", False),
    ("Bash", "cat a.py\x0b", "def g():\n    pass\n", False),  # a word ``_touch`` strips
    ("Bash", "cat \u00a0b.py", "y = 2\n", False),
    ("Bash", "ls -la", "total 0\n", False),  # no file read: the output's gist
    ("Bash", "ls", "", False),  # an empty result
    ("Bash", "curl -s http://h/api", '{"id": 7, "name": "x"}', False),
    ("Bash", "pip install requests", "Successfully installed requests-2.31.0", False),
    ("Bash", "pytest -q", "==== 3 passed in 0.1s ====", False),  # a test run: the general path
    ("Bash", "pytest -q tests/a.py", "==== 1 failed, 2 passed in 0.1s ====", False),
    ("Bash", "cd src && cat a.py", "def f(x):\n    return x\n", False),  # ``&&``: the scanner
    ("Bash", "cat src/a.py | head -3", "def f(x):\n", False),  # a pipe
    ("Bash", "echo hi > out.txt", "", False),  # a redirect: a file changed
    ("Bash", "cat > w.py <<'EOF'\nx = 1\nEOF", "", False),  # a heredoc
    ("Bash", "rm old.py", "", False),  # a plain command that changes a file
    ("Bash", "sed -i s/a/b/ x.py", "", False),
    ("Bash", "grep -n foo a.py", "Exit code 1\n", False),  # grep found nothing: not a failure
    ("Bash", "open src/a.py", "[File: src/a.py (3 lines total)]\n1:x\n(Open file: src/a.py)", False),
    ("Bash", "cat src/h.py", "[File: src/h.py (3 lines total)]\n1:x\n", False),  # a SWE marker
    ("Bash", "cat src/i.py", "x\n(Open file: src/i.py)\n", False),
    ("Bash", "npm run build", "0 files compiled\n", False),
    ("Bash", "  cat   src/j.py  ", "z = 3\n", False),  # runs of spaces
    ("Bash", "FOO=1 cat src/k.py", "k = 1\n", False),
    ("Bash", {"command": "cat src/l.py", "description": "has *** marker"}, "l = 1\n", False),
    ("Bash", {"command": "cat src/m.py", "timeout": 30}, "m = 1\n", False),  # not all strings
    ("Bash", {"cmd": "cat src/n.py"}, "n = 1\n", False),
    ("exec_command", "cat src/o.py", "o = 1\n", False),
    ("Read", {"file_path": "src/p.py"}, "p = 1\n", False),  # a read tool
    ("Write", {"file_path": "src/q.py", "content": "q = 1\n"}, "ok", False),
    ("WebFetch", {"url": "http://h/x"}, "Error: not found", False),
    ("Bash", "make build", "Exit code 2\nerror: timed out", False),
    ("Bash", "make build", "built", False),  # the same key, later: resolves the failure
    ("Bash", "cat " + "x" * 400 + ".py", "long = 1\n", False),  # a command clipped
]


def _edge_session() -> list[Event]:
    evs: list[Event] = [Event(seq=1, id="e1", role="user", blocks=[TextBlock(text="Fix src/a.py.")])]
    for k, (name, inp, text, is_error) in enumerate(_EDGES):
        seq = len(evs) + 1
        uid = f"u{k}"
        inp = {"command": inp} if isinstance(inp, str) else inp
        evs.append(Event(seq=seq, id=f"e{seq}", role="assistant",
                         blocks=[TextBlock(text=f"Step {k}."), ToolUseBlock(id=uid, name=name, input=inp)]))
        evs.append(Event(seq=seq + 1, id=f"e{seq + 1}", role="user",
                         blocks=[ToolResultBlock(tool_use_id=uid, content=[TextBlock(text=text)], is_error=is_error)]))
    # a call whose result comes two events later (unknown at a cut between), and the user's call
    n = len(evs)
    evs += [Event(seq=n + 1, id="x1", role="assistant", blocks=[ToolUseBlock(id="late", name="Bash",
                                                                            input={"command": "cat src/z.py"})]),
            Event(seq=n + 2, id="x2", role="assistant", blocks=[TextBlock(text="Waiting for it.")]),
            Event(seq=n + 3, id="x3", role="user", blocks=[ToolResultBlock(tool_use_id="late",
                                                                           content=[TextBlock(text="z = 1\n")])]),
            Event(seq=n + 4, id="x4", role="user", blocks=[ToolUseBlock(id="usr", name="Bash",
                                                                       input={"command": "cat src/y.py"})]),
            Event(seq=n + 5, id="x5", role="user", blocks=[ToolResultBlock(tool_use_id="usr",
                                                                           content=[TextBlock(text="y = 1\n")])]),
            Event(seq=n + 6, id="x6", role="assistant", blocks=[ToolUseBlock(id="last", name="Bash",
                                                                            input={"command": "cat src/w.py"})]),
            Event(seq=n + 7, id="x7", role="user", blocks=[ToolResultBlock(tool_use_id="last",
                                                                           content=[TextBlock(text="w = 1\n")])])]
    return evs


@functools.lru_cache(maxsize=1)
def _generated() -> list[Event]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "small.jsonl"
        write_session(path, 3000)
        return import_file(path).events


def _states(events: list[Event]) -> list[str]:
    """The state's JSON at every tenth of the events in one pass, at the end, and of the last two
    fifths lifted on top of the state of the first three."""
    seqs = [e.seq for e in events]
    if not seqs:
        return []
    lifter = Lifter(events)
    cuts = sorted({seqs[(len(seqs) - 1) * k // 10] for k in range(1, 11)})
    out = [lifter.state_at(c).model_dump_json() for c in cuts]
    prev = lift_state(events[: len(events) * 3 // 5])
    out.append(lift_state(events, prev).model_dump_json())
    return out


def _same_without_short_path(events: list[Event], monkeypatch: pytest.MonkeyPatch) -> None:
    short = _states(events)
    monkeypatch.setattr(shellpair, "ON", False)
    general = _states(events)
    monkeypatch.setattr(shellpair, "ON", True)
    assert short == general


def test_the_edge_shapes_lift_as_the_general_path_does(monkeypatch: pytest.MonkeyPatch) -> None:
    events = _edge_session()
    taken = []
    real = shellpair.ShellPairs.shell_pair

    def spy(self, e, use, seq, got, use_id, alone=False):  # type: ignore[no-untyped-def]
        assert use_id == use.id and alone == (len(e.tool_uses) == 1)
        ok = real(self, e, use, seq, got, use_id, alone)
        taken.append((use.id, ok))
        return ok

    monkeypatch.setattr(shellpair.ShellPairs, "shell_pair", spy)
    state = lift_state(events)
    took = {uid for uid, ok in taken if ok}
    # the guard: plain reads that worked take the short path, every other shape declines
    assert {"u0", "u1", "u9", "u10", "u11", "u12", "u13", "u14", "u15", "u29", "u30"} <= took
    assert not took & {"u2", "u3", "u5", "u6", "u16", "u17", "u18", "u19", "u20", "u21", "u22", "u23", "u24",
                       "u25", "u26", "u27", "u31", "u32", "u33", "u35", "u36", "u37", "u38"}
    assert "usr" not in {uid for uid, _ in taken}  # (the user's call: the general path)
    assert state.last_action is not None and state.last_action.tool_use_id == "last"
    assert state.last_action.what == "cat src/w.py" and state.last_action.status == "ok"
    monkeypatch.setattr(shellpair.ShellPairs, "shell_pair", real)
    _same_without_short_path(events, monkeypatch)


def test_a_generated_session_lifts_as_the_general_path_does(monkeypatch: pytest.MonkeyPatch) -> None:
    _same_without_short_path(_generated(), monkeypatch)


def test_the_fixtures_and_synthetic_sessions_lift_as_the_general_path_does(monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = fixture_sessions() + [list(evs) for _, evs in synthetic_sessions(6, seed=11)]
    assert sessions
    for events in sessions:
        _same_without_short_path(events, monkeypatch)


def test_the_corpus_lifts_as_the_general_path_does(monkeypatch: pytest.MonkeyPatch) -> None:
    files = corpus_files()
    if not files:
        pytest.skip("corpus not present")
    for path in files:
        _same_without_short_path(import_file(path).events, monkeypatch)


def test_a_command_the_one_search_passes_over_is_no_test_run_and_no_install() -> None:
    """``shell_pair`` asks ``is_test_command`` and ``is_install`` only of a command holding one of their
    needles (``_TEST_OR_INSTALL``): every command without one must be neither (the corpus' commands,
    the edge shapes' and generated ones around the needles)."""
    from compactor.lifting.actions import is_test_command
    from compactor.lifting.outputs import is_install

    commands = [c for _, c, _, _ in _EDGES if isinstance(c, str)]
    for path in corpus_files():
        for e in import_file(path).events:
            commands += [c for u in e.tool_uses if isinstance(u.input, dict)
                         and isinstance(c := u.input.get("command"), str)]
    words = ["pytest", "py.test", "tox", "nox", "npm test", "yarn run test:unit", "go test", "cargo nextest", "make check",
             "pip install x", "python -m pip install -e .", "uv add y", "apt-get install z", "brew install q", "gem i r",
             "poetry add s", "conda install t", "bun i", "cat", "ls -la", "grep -n foo a.py", "echo done", "rspec",
             "phpunit", "mocha", "jest", "sudo", "&&", ";", "|", "(", "./runtests.py", "manage.py test"]
    commands += [f"{a} {b}" for a in words for b in words]
    passed = 0
    for c in commands:
        if shellpair._TEST_OR_INSTALL.search(c) is None:
            passed += 1
            assert not is_test_command(c) and not is_install(c), c
    assert passed > 100 and any(is_install(c) for c in commands) and any(is_test_command(c) for c in commands)
