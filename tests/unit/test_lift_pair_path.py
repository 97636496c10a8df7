"""The lift's per-tool-call path (issue 17, round twelve) says the same as before it was made cheaper.

A run that worked is keyed only when a failure asks what resolved it: failures must still find
the later run that resolved them, and what that run set differently, whether the state is built
once or at several cuts of one pass. ``kind_of``, ``plausible_path`` and ``classify``'s tool-name
memo are held equal to the rules they replace.
"""

from __future__ import annotations

import itertools

from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.lifting import actions, content, shell
from compactor.lifting.lift import Lifter, lift_state


def _call(seq: int, uid: str, command: str, **params: object) -> Event:
    return Event(seq=seq, id=f"e{seq}", role="assistant",
                 blocks=[ToolUseBlock(id=uid, name="Bash", input={"command": command, **params})])


def _result(seq: int, uid: str, text: str, is_error: bool = False) -> Event:
    return Event(seq=seq, id=f"e{seq}", role="user",
                 blocks=[ToolResultBlock(tool_use_id=uid, content=[TextBlock(text=text)], is_error=is_error)])


def _session() -> list[Event]:
    """Runs that worked before and after two failures: ``make build`` fails and a rerun with a
    longer timeout works; ``pytest -q`` fails, a later ``cd /r && pytest -q`` (the same key) works."""
    evs: list[Event] = []
    seq = 0

    def pair(uid: str, command: str, text: str, is_error: bool = False, **params: object) -> None:
        nonlocal seq
        evs.append(_call(seq + 1, uid, command, **params))
        evs.append(_result(seq + 2, uid, text, is_error))
        seq += 2

    for k in range(6):
        pair(f"ok{k}", f"cat src/mod_{k}.py", f"def f_{k}(x):\n    return x + {k}\n")
    pair("b1", "make build", "Exit code 2\nerror: timed out", True, timeout=10)
    for k in range(6, 9):
        pair(f"ok{k}", f"cat src/mod_{k}.py", f"def f_{k}(x):\n    return x\n")
    pair("t1", "pytest -q", "Exit code 1\nE   AssertionError: 1 != 2\n==== 1 failed, 3 passed in 0.1s ====", True)
    pair("b2", "make build", "built", timeout=600)
    pair("t2", "cd /r && pytest -q", "==== 4 passed in 0.1s ====")
    return evs


def _resolution(state) -> list[tuple[str, int | None, str]]:
    return [(f.tool_use_id, f.resolved_at, f.fixed_by) for f in state.failed_approaches]


def test_failures_find_the_runs_that_resolved_them() -> None:
    state = lift_state(_session())
    by_id = {f.tool_use_id: f for f in state.failed_approaches}
    assert by_id["b1"].resolved_at == 23 and by_id["b1"].fixed_by == "timeout=600"
    assert by_id["t1"].resolved_at == 25 and by_id["t1"].fixed_by == ""


def test_a_pass_built_at_several_cuts_resolves_as_separate_lifts_do() -> None:
    evs = _session()
    lifter = Lifter(evs)
    for cut in (4, 14, 20, 22, 24, 26):  # (before any failure, between them, after each fix)
        prefix = [e for e in evs if e.seq <= cut]
        assert lifter.state_at(cut) == lift_state(prefix), cut
    assert _resolution(lifter.state_at(None, final=True)) == _resolution(lift_state(evs)) == [
        ("b1", 23, "timeout=600"), ("t1", 25, "")]


def test_a_state_lifted_on_top_of_a_previous_one_resolves_its_failures() -> None:
    evs = _session()
    prev = lift_state([e for e in evs if e.seq <= 22])  # both failures open, many runs that worked
    assert _resolution(prev) == [("b1", None, ""), ("t1", None, "")]
    assert _resolution(lift_state([e for e in evs if e.seq > 22], prev)) == [("b1", 23, "timeout=600"), ("t1", 25, "")]


def _kind_of_before(path: str) -> str:
    """``content.kind_of`` as it was before round twelve: the whole file name lowercased."""
    base = path[path.rfind("/") + 1:].lower()
    if ".env" in base and (base.startswith(".env") or base.endswith(".env")):
        return "env"
    dot = base.rfind(".")
    return content._KINDS.get(base[dot + 1:], "") if dot >= 0 else ""


def test_kind_of_is_the_whole_names_rule() -> None:
    parts = ["", "/", ".", "a", "A", ".env", ".ENV", "env", "py", "PY", "x.Ts", "\u212a", "\u0130", "\u03a3", "d/",
             "Toml", ".Env.local", "yml"]
    paths = ["".join(p) for k in range(1, 5) for p in itertools.product(parts, repeat=k)]
    assert len(paths) > 100_000
    assert [content.kind_of(p) for p in paths] == [_kind_of_before(p) for p in paths]
    assert {content.kind_of(p) for p in ("a/.env.local", "x/prod.ENV", "src/App.TSX", "d.py/x", ".envrc")} == {
        "env", "js", ""}


def test_plausible_path_rejects_every_bad_character_and_url() -> None:
    for c in sorted(shell._BAD_PATH_CHARS):
        assert not shell.plausible_path(f"src/a{c}b.py"), repr(c)
    for tok in ("http://x.org/a.py", "https://x.org/a", "s3://bucket/key.json", "-v", ".", "..", "a" * 301 + ".py"):
        assert not shell.plausible_path(tok), tok
    for tok in ("src/a.py", "README.md", "a/b", "~/x.json", "src/mod_12345.py"):
        assert shell.plausible_path(tok), tok
    assert shell.shell_files("cat -n src/a.py src/a.py README.md --x").reads == ["src/a.py", "README.md"]


def test_classify_reads_tool_names_the_same_when_remembered_and_when_forgotten() -> None:
    uses = [ToolUseBlock(id=f"u{i}", name=name, input=inp) for i, (name, inp) in enumerate([
        ("Bash", {"command": "cat src/a.py"}), ("BASH", {"command": "cat src/a.py"}),
        ("Read-File", {"path": "src/a.py"}), ("str-replace-editor", {"command": "view", "path": "a.py"}),
        ("notes_write", {"path": "n.md", "content": "x"}), ("TodoWrite", {"todos": [{"content": "a"}]}),
        ("update_plan", {"plan": [{"step": "b", "status": "pending"}]}), ("search", {"query": "q"})])]
    first = [actions.classify(u) for u in uses]
    assert [a.kind for a in first] == ["command", "command", "read", "read", "change", "todo", "todo", "other"]
    assert [actions.classify(u) for u in uses] == first  # (the names remembered now)
    actions._ROUTES.clear()
    for k in range(actions._MAX_ROUTES + 10):  # (a flood of names: the memo stays bounded)
        actions._route(f"tool{k}")
    assert len(actions._ROUTES) <= actions._MAX_ROUTES
    assert [actions.classify(u) for u in uses] == first
