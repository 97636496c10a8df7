"""The lift's shortcuts of round fourteen (issue 17, ``liftB15``) give what the general paths give.

``content_facts`` answers a short whole Python module from one search and its first line's
signature; ``kind_of`` lowers only what it must; sentence cuts are found from the sentence ends;
``own_lines`` looks before each colon for an inline paste; ``next_words`` takes one sentence
without its loop. Each is compared with the path it replaces on texts built to hit every
pattern and every pre-check's boundary, on the fixtures, the corpus (when present) and a
generated session.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from compactor.bench.scale import small_session_lines
from compactor.lifting import constraints, content, failures
from tests.unit.test_lift_prechecks import _texts

_NEEDLES = ['"', "'", "`", "=", "#", "/", "-", "import", "range(", "env", "Storage.", "fetch(", "axios.", "requests."]


def _python_texts() -> list[str]:
    """Short modules around the shortcut's edges: each needle of ``_PY_MORE`` at the start, the end
    and inside; a signature on a later line; three lines (bodies); case and non-ASCII."""
    base = "def f_1(x):\n    return x + 49\n"
    out = [base, base.rstrip("\n"), "def f(a, b) -> int:\n    return a\n", "class A:\n    pass\n", "class A(B):",
           "async def g(x):\n    await x\n", "def __init__(self):\n    pass\n", "def f(self, a):\n    pass\n",
           "  def f():\n    pass\n", "\ndef f():\n", "x\ndef f():\n", "x\n  class A:\n", "x\n\tasync def f():\n",
           "def f():\n    return 1\n    pass\n", "def f():\n    a\n    b\n    c\n", "DEF f():\n    pass\n",
           "def f_é(x):\n    return 'é'\n", "def f(x):\n    return x  # ok\n", "return x\n", "x + 1", "def", "\n\n",
           "def f():\r\n    pass\r\n", "def f():\r\ndef g():\r\n", "def f(x):\n    return x\n\n\n", "pass\ndefine\n",
           "def f(x)\n    return x\n", "class\n", "def f(\n  a):\n    pass\n", "def f(): return x\ndef g(): return y\n"]
    for needle in _NEEDLES:
        out += [needle + base, base + needle, base.replace("x + 49", f"x {needle} 49"), needle, f"def f({needle}):\n"]
    return out


def _general(monkeypatch: pytest.MonkeyPatch, *args, **kwargs) -> list[str]:
    """``content_facts`` without the shortcut: ``_PY_FIRST_ONLY`` always finds something."""
    with monkeypatch.context() as m:
        m.setattr(content, "_PY_FIRST_ONLY", re.compile(""))
        return content.content_facts(*args, **kwargs)


def test_a_short_module_has_the_general_paths_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    generated = [line.split('"content": "', 1)[1].split('"}]', 1)[0].encode().decode("unicode_escape")
                 for line in small_session_lines(600) if '"tool_result"' in line]
    texts = _python_texts() + generated + [t[:3000] for t in _texts()]
    shortcut = 0
    for t in texts:
        n = len(t.splitlines())
        for whole in (True, False):
            for lines in (None, n):
                got = content.content_facts("m.py", t, whole, kind="py", lines=lines)
                assert got == _general(monkeypatch, "m.py", t, whole, kind="py", lines=lines), (t[:80], whole, lines)
        assert content.content_facts("a/b.PY", t) == _general(monkeypatch, "a/b.PY", t)
        got = content.read_facts("src/m.py", t)
        with monkeypatch.context() as m:
            m.setattr(content, "_PY_FIRST_ONLY", re.compile(""))
            assert got == content.read_facts("src/m.py", t), t[:80]
        shortcut += n <= 2 and content._PY_FIRST_ONLY.search(t) is None
    assert shortcut >= 250  # (the generated reads and the short texts above take it)
    assert content.read_facts("src/mod_1.py", generated[0]) == ["def f_1(x)"]


def _kind_of_before(path: str) -> str:
    """``content.kind_of`` as it was before round fourteen."""
    slash = path.rfind("/")
    dot = path.rfind(".")
    if dot <= slash:
        return ""
    if path[slash + 1:slash + 5].lower() == ".env":
        return "env"
    return content._KINDS.get(path[dot + 1:].lower(), "")


def test_kind_of_is_the_rule_it_was() -> None:
    names = [".env", ".ENV", ".Env", ".eNv.py", ".env.local", ".envrc", ".e", ".E", ".ex.py", "x.env", "x.ENV", "a.py",
             "a.PY", "a.Py", "a.tsx", "a.TSX", "a.md", "a.", ".", "a", "a.py.bak", "a.e.py", "x.İ", "é.py", "a.yml",
             "noext", ".py", "..py", "x.e/y", "x.E/y", "a.b/.env"]
    paths = [p for n in names for p in (n, f"src/{n}", f"a.b/{n}", f"/{n}", f"dir.env/{n}", f".E/{n}")]
    paths += [p.rstrip("/") + "/" for p in paths[:20]] + ["", "/", "./", "a/./b"]
    assert [content.kind_of(p) for p in paths] == [_kind_of_before(p) for p in paths]
    assert {content.kind_of(p) for p in ("x/.Env", "A.PY", "x.e/y.rs")} == {"env", "py", "rs"}


def test_sentence_cuts_from_the_ends_are_the_gaps() -> None:
    lines = ["a.  b", "a.\tb", "a. ", "a.", "... x", "?! x", "a. b. c", ". x", "x .y", "e.g. this", "a!\t \tB", "a?", ""]
    lines += [ln for t in _texts() for ln in t.splitlines()]
    for ln in lines:
        want = [m.start() for m in constraints._SENTENCE_GAP_RE.finditer(ln)]
        assert [m.end() for m in constraints._SENTENCE_END_RE.finditer(ln)] == want, ln[:80]
    assert constraints._sentence_spans("Fix it. Do not stop.  Now") == [(0, 7), (8, 20), (22, 25)]


def _paste_lines() -> list[str]:
    words = [w for w in constraints._PASTE_INLINE_WORDS]
    out = []
    for w in words:
        for v in (w, w.upper(), w.title()):
            out += [f"{v}: x", f"the tool {v} : x", f"it {v}\t:  y", f"{v}:x", f"x{v}: y", f"{v}s: y", f"a: b {v}: c"]
    out += ["Task 0: fix the failing test in src/mod_0.py. Do not modify the tests.", "a: b", ": x", "error", "x:"]
    return out


def test_a_line_that_says_a_paste_inline_is_looked_at() -> None:
    lines = _paste_lines() + [ln for t in _texts() for ln in t.splitlines()]
    hits = 0
    for ln in lines:
        if constraints._PASTE_INLINE_RE.search(ln):
            hits += 1
            assert constraints._may_say_inline(ln), ln[:80]
    assert hits >= 150
    assert not constraints._may_say_inline("Task 0: fix the failing test in src/mod_0.py.")


def test_own_lines_and_constraints_are_those_of_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = ["\n".join(_paste_lines()[i:i + 5]) + "\nDo not change the tests." for i in range(0, 400, 5)]
    texts += [t for t in _texts() if len(t) < 20_000]
    got = [(constraints.own_lines(t), constraints.constraint_sentences(t)) for t in texts]
    monkeypatch.setattr(constraints, "_may_say_inline", lambda line: True)
    assert got == [(constraints.own_lines(t), constraints.constraint_sentences(t)) for t in texts]
    assert constraints.constraint_sentences("Task 0: fix it. Do not modify the tests.") == ["Do not modify the tests."]


def test_next_words_of_one_sentence_is_the_loops() -> None:
    cases = [[" " * k + "x" * n + " " * k] for n in range(0, 16) for k in (0, 1, 3)] + [["y" * 200], [""], ["\tab\n"]]
    cases += [constraints.split_sentences(t)[:1] for t in _texts()]
    for c in cases:  # (a blank sentence first is skipped by the loop: the one sentence goes through it)
        assert failures.next_words(c) == failures.next_words(["", *c]), c
    assert failures.next_words(["Checking module 12."]) == "Checking module 12."
    assert failures.next_words(["Checking 1."]) == ""


def test_the_fixtures_are_read() -> None:
    assert (Path(__file__).resolve().parent.parent / "fixtures").is_dir()
    assert len(_texts()) > 100
