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
from compactor.lifting import actions, constraints, content, failures, lift, narrative
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
        # (``_used`` checks ``_USED_ANY``'s literals as substrings: the same answer)
        assert bool(content._USED_ANY.search(t)) == any(
            n in t for n in ("env", "Storage.", "fetch(", "axios.", "requests.", '"/', "'/", "`/"))



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


# --- round eight (branch lift8): whole-text checks that skip splitting a message or a file --------

def _short_messages() -> list[str]:
    """Assistant-like texts: the fixtures' and corpus' texts, their sentences and lines, and built ones."""
    out = [t for t in _texts() if len(t) <= 400]
    for t in _texts():
        out += [ln for ln in t.splitlines() if ln.strip()][:20]
        out += split_sentences(t)[:20]
    out += ["Checking module 1234.", "Done: 3/4 tests pass, so the fix holds.", "- Use the cache **because** it is fast.",
            "1. Because the API limits us to 10 requests per second.", "> so that it works. Next one.",
            "| rate | 5 ms |", "It failed, so I retried.", "Set the limit to 30 seconds. Then rerun it.",
            "We use v2 instead of v1.", "Renamed x.py. It now loads data/x.csv at 2x speed."]
    return out


def test_a_message_the_reason_check_skips_holds_no_reason() -> None:
    skipped = 0
    for t in _short_messages():
        if not narrative._may_hold_reasons(t):
            skipped += 1
            assert narrative.reason_sentences(t) == [], t
    assert skipped > 100  # (the check does skip messages)


def _split_by_cuts(text: str) -> list[str]:
    """``split_sentences`` as it was before the no-gap shortcut: every line with a sentence end cut."""
    out: list[str] = []
    if "." in text and constraints._GLUED_PRE_RE.search(text) and constraints._GLUED_RE.search(text):
        text = constraints._GLUED_RE.sub(" ", text)
    for line in text.splitlines():
        if "." not in line and "!" not in line and "?" not in line:
            if line.strip():
                out.append(line.strip())
            continue
        start = 0
        for cut in [m.start() for m in constraints._SENTENCE_GAP_RE.finditer(line)] + [len(line)]:
            piece = line[start:cut].strip()
            if piece and not constraints._abbrev_end(piece) or cut == len(line):
                if piece:
                    out.append(piece)
                start = cut
    return out


def test_split_sentences_is_the_cut_by_cut_split() -> None:
    for t in list(_texts()) + _short_messages():
        assert split_sentences(t) == _split_by_cuts(t), t[:80]


def test_function_lines_are_looked_for_wherever_a_text_can_have_them() -> None:
    from compactor.lifting import behaviour

    texts = [t for t in _texts() if "def " in t][:400] + [
        "def f(x):\n    a = 2\n    return a * x\n", "def f(x):\n    return x + 1\n", "def f(x):\r    a = 2\r    return a\r",
        "def f(x):\n    a = 2\u2028    return a * x", "class A:\n    def f(self):\n        return 5 * 3\n"]
    for t in texts:
        sigs = [(m.start(), m.end(), content._flat(m.group(1))) for m in content._SIGS["py"].finditer(t)]
        if behaviour.function_lines("py", t, sigs):
            assert content._py_bodies_possible(t), t[:80]
    assert not content._py_bodies_possible("def f(x):\n    return x + 1\n")


def test_the_zero_tally_and_partial_answer_prechecks_let_every_match_through() -> None:
    from compactor.lifting import outputs

    texts = list(_texts()) + ["DONE: 0/49 transcripts extracted", "x\n0 of 12 succeeded\n", "0 OUT OF 3 passed",
                              "0\u00a0/ 7 ok", '{"restricted": true, "maxChars": 8000, "totalChars": 20526}',
                              '{"hasMore":true}', "10/10 ok", "v1.0/2 x"]
    hits = 0
    for t in texts:
        lines = [ln.strip() for ln in t[-2000:].splitlines()]
        if any(failures._ZERO_TALLY_RE.search(ln) for ln in lines):
            hits += 1
            assert failures._ZERO_TALLY_PRE.search(t, max(0, len(t) - 2000)), t[-200:]
        if outputs._PARTIAL_FLAG_RE.search(t[-outputs.PARTIAL_TAIL_CHARS:]):
            assert "true" in t[-outputs.PARTIAL_TAIL_CHARS:]
    assert hits >= 3
    assert failures.zero_tally("DONE: 0/49 transcripts extracted").startswith("DONE")
    assert outputs.partial_result('{"restricted": true, "maxChars": 8000, "totalChars": 20526}').startswith("partial")


def test_signatures_are_the_scans_matches() -> None:
    texts = list(_texts())
    texts += [p.read_text() for p in sorted((Path(__file__).resolve().parents[2] / "compactor").rglob("*.py"))[:40]]
    texts += [("x = 1\n" * 400) + "async\n  def f(a,\n b) -> int:\n  pass\nclass A(B,\n C):\n  pass\n" + "def g(): pass\n" * 3,
              ("// c\n" * 500) + "export default async function f(a) {\n}\nconst g = (x) => x\nlet h = async () => 1\n"
              "interface I {}\nexport abstract class K extends L.M {}\n", ("x\n" * 1200) + "pub(crate) async fn f<T>(a: T) -> u8 {\n"
              "}\nstruct S\nenum E\ntrait T\nfn g()\n", ("// x\n" * 500) + "func (r *R) F(a int) error {\nfunc G()\ntype T struct\n"]
    texts += ["def f_1(x):\n    return x + 49\n", "  class A:\n\tdef b(self): pass\n", "\ndef f():\n", "x = 1  # def f():\n",
              "async  \n def g(a):\n", "def f(a,\n  b):\ndef g(): pass", "export const f = (a) => a\n  let g = () => 1\n",
              "func F() {\n}\n  func G()\ntype T int\n", "pub fn f() {}\r\npub fn g() {}\n", "", "\n\n", "def"]
    assert len(texts) > 40
    for t in texts:
        for kind in ("py", "js", "rs", "go", "sh"):
            rx = content._SIGS[kind]
            want = [(m.start(), m.end(), content._flat(m.group(1))) for m in rx.finditer(t)]
            got = content._sig_items(kind, rx, t)
            assert got == want, (kind, t[:60])


def test_the_write_patterns_match_only_where_a_needle_is() -> None:
    texts = list(_texts()) + ["with open('out/a.json', 'w') as f:", "df.to_csv('r.csv')", "Path('x.txt').write_text(s)",
                              "np.savez('a.npz', x)", "os.makedirs('out', exist_ok=True)", "fs.writeFileSync('a.txt', s)",
                              "fs.mkdirSync(`dir`)", "torch.save(m, 'm.pt')"]
    hits = 0
    for t in texts:
        for rx, needles in ((content._PY_WRITES, content._PY_WRITE_NEEDLES), (content._JS_WRITES, content._JS_WRITE_NEEDLES)):
            if rx.search(t):
                hits += 1
                assert any(n in t for n in needles), t[:80]
    assert hits >= 8


def test_a_file_kind_is_read_from_its_name_after_the_last_slash() -> None:
    cases = {"src/mod_1.py": "py", "a/.env.local": "env", "x.ENV": "env", "dir.py/file": "", "a/b.": "",
             "web/App.TSX": "js", "x.tar.gz": "", "": "", "/": "", ".": "", "conf/app.yml": "yaml", "a.b/c.rs": "rs"}
    assert {p: content.kind_of(p) for p in cases} == cases
