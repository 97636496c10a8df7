"""The lift's substring pre-checks (issue 17) never skip a search that would have matched.

Each case-insensitive alternation the lift runs per sentence or per result is searched only
when a literal every match holds is there; these tests run the pattern itself on every
sentence of the fixtures and the corpus, and on texts built to hit each alternative, and
require the pre-check to let every match through.
"""

from __future__ import annotations

import functools
import random
import re
from pathlib import Path

import pytest

from compactor.importers import import_file
from compactor.lifting import actions, content, failures, lift, narrative
from compactor.lifting.constraints import split_sentences
from tests.conftest import corpus_files

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# (pattern, pre-check on the lowercased ASCII text) pairs of the lift
LOWERCASE_PRECHECKS = [
    (lift._DECISION_RE, lift._DECISION_PRE),
    (lift._FAILED_TEXT_RE, lift._FAILED_PRE),
    (narrative._REASON_RE, narrative._REASON_PRE),
    (narrative._RULE_RE, narrative._RULE_PRE),
    (failures._SOFT_FAIL_RE, failures._SOFT_FAIL_PRE),
]


def _alternatives(rx: re.Pattern[str]) -> list[str]:
    """Texts that hit the alternatives of ``rx``: its literal words with the optional parts
    spelled out both ways, in a few casings."""
    words = re.findall(r"[A-Za-z][A-Za-z' ]*[A-Za-z]|\d|[=≤≥×%/,]", rx.pattern)
    out: list[str] = []
    for w in words:
        for v in (w, w.replace("'", ""), w.upper(), w.title(), f"it {w} 3 x", f"so, {w}"):
            out.append(f"Here {v} now 12 / 4 at 5x.")
    return out


@functools.lru_cache(maxsize=1)  # (read once for every test here)
def _texts() -> tuple[str, ...]:
    files = [p for p in sorted(FIXTURES.rglob("*")) if p.is_file() and p.suffix in (".jsonl", ".json")]
    texts: list[str] = []
    for path in files + corpus_files():
        try:
            events = import_file(path).events
        except Exception:  # noqa: BLE001 - a fixture of another format (a bad-input case): not a transcript
            continue
        for e in events:
            if e.text:
                texts.append(e.text)
            for r in e.tool_results:
                texts.append(actions._result_text(r))
    return tuple(texts)


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    out: list[str] = []
    for t in _texts():
        out += split_sentences(t)
        out += narrative.report_units(t)
    rnd = random.Random(7)
    for rx, _ in LOWERCASE_PRECHECKS:
        out += _alternatives(rx)
    out += [s.replace("'", "\u2019") for s in rnd.sample(out, min(500, len(out)))]
    return out


def test_the_sentences_hit_every_pattern(sentences: list[str]) -> None:
    for rx, _ in LOWERCASE_PRECHECKS:
        assert any(rx.search(s) for s in sentences), rx.pattern[:60]


def test_a_lowercase_precheck_lets_every_match_through(sentences: list[str]) -> None:
    for rx, pre in LOWERCASE_PRECHECKS:
        for s in sentences:
            probe = s.replace("\u2019", "'")
            if probe.isascii() and rx.search(probe):
                assert pre.search(probe.lower()), (rx.pattern[:40], probe)


def test_the_lift_decisions_reasons_and_soft_failures_are_the_searches_results(sentences: list[str]) -> None:
    for s in sentences:
        probe = s.replace("\u2019", "'")
        assert narrative.is_reason(s) == bool(
            narrative._REASON_RE.search(probe)
            or narrative._DIGIT_RE.search(probe) and narrative._RULE_RE.search(probe))
        assert failures._soft_fail(s) == bool(failures._SOFT_FAIL_RE.search(s))


def test_the_result_prechecks_let_every_match_through() -> None:
    texts = list(_texts()) + ["x\nValueError: bad", "error[E0308]: mismatched", "src/a.ts: error TS2345 x",
                        "panic: runtime error", "KeyboardInterrupt", "Exception in thread"]
    for t in texts:
        lines = t.splitlines()
        hit = any(actions._ERROR_LINE_RE.match(ln) or actions._ERROR_ANY_RE.search(ln)
                  or actions._RUST_ERR_RE.search(ln) or actions._TS_ERR_RE.search(ln) for ln in lines)
        if hit or actions._GO_PANIC_RE.search(t):
            assert any(n in t for n in ("Error", "Exception", "Interrupt", "error", "panic: ")), t[:80]
        for cmd in [ln for ln in lines if ln.strip()][:3]:
            assert actions.is_test_command(cmd) == bool(actions._TEST_RE.search(cmd))
        for pat, _ in content._USED_NEEDLES:
            if pat.search(t):
                assert content._USED_ANY.search(t), t[:80]



def test_file_names_installs_and_bare_signatures_are_the_searches_results(sentences: list[str]) -> None:
    from compactor.lifting import notes, outputs

    commands = [ln for t in _texts() for ln in t.splitlines()[:5]] + [
        "sudo apt-get install -y jq", "uv pip install -e .", "python -m pip install x", "npm i left-pad",
        "cd web && pnpm add vite", "brew install gh", "cat README"]
    for s in sentences + commands:
        assert notes._names_file(s) == bool(notes._PATH_TOKEN.search(s)), s
        assert outputs.is_install(s) == bool(outputs._INSTALL_RE.search(s)), s
    for sig in ["def __init__(self)", "def run(self, x)", "constructor()", "def f(a, b)", "class A"]:
        bare = bool(content._BARE_SIG.search(sig))
        assert bare == (("self" in sig or "constructor" in sig) and bare)
