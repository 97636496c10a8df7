"""The lift's per-message and per-call shortcuts (issue 17, round nine) give the states of the full path.

An assistant message whose lowercased ASCII text holds no decision, failure or no-effect needle
is not searched sentence by sentence; a message is looked at once for a file name; blocks that
hold no artifact are passed over by their type; a call without files shares read-only empty
maps. These tests lift the fixtures, the corpus, synthetic and generated sessions with each
shortcut turned off and require the same states, and check the facts each shortcut rests on.
"""

from __future__ import annotations

import functools
import random
import re
from pathlib import Path

import pytest

from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.lifting import actions, content, failures, lift, notes
from tests.unit.test_lift_trusted import _generated, _sessions as _transcripts


@functools.lru_cache(maxsize=1)
def _sessions() -> tuple[tuple[str, list], ...]:
    """The fixtures, the corpus and synthetic sessions (``test_lift_trusted``'s), and the needles."""
    return (*_transcripts(), ("needles", _needle_session()))


_NEEDLE_WORDS = [*lift._DECISION_NEEDLES, *lift._FAILED_NEEDLES, *failures._SOFT_FAIL_NEEDLES,
                 "did not yield any output", "returned nothing", "0 results", "I'll use pytest instead of nose",
                 "that didn't work", "the plan is simple", "src/app.py holds the routes", "Checking module 3.",
                 "Writing the loader that reads the config with its defaults", "Now the parser handles empty rows too"]


def _needle_session() -> list[Event]:
    """Calls and results, each call beside a message built from the needles (in several casings,
    with curly quotes and glued sentences), so every shortcut meets texts on both of its sides."""
    rnd = random.Random(17)
    events: list[Event] = [Event(seq=1, id="u1", role="user", blocks=[TextBlock(text="Fix the tests, please.")])]
    seq = 1
    for k in range(160):
        words = rnd.sample(_NEEDLE_WORDS, 3)
        parts = [w.upper() if rnd.random() < 0.2 else w.capitalize() for w in words]
        text = rnd.choice([". ", ".", "\n", "! "]).join(parts) + rnd.choice([".", "", "?"])
        if rnd.random() < 0.2:
            text = text.replace("'", "\u2019")
        seq += 1
        uid = f"t{k}"
        cmd = rnd.choice(["cat src/app.py", "pytest -q", "ls", "grep -r foo .", f"touch src/n{k}.py"])
        events.append(Event(seq=seq, id=f"a{k}", role="assistant", blocks=[
            TextBlock(text=text), ToolUseBlock(id=uid, name="Bash", input={"command": cmd})]))
        seq += 1
        events.append(Event(seq=seq, id=f"r{k}", role="user", blocks=[ToolResultBlock(
            tool_use_id=uid, content=[TextBlock(text=rnd.choice(["ok", "0 of 4 passed", "def f(x):\n    return 1\n"]))])]))
        if rnd.random() < 0.3:  # a reply without a call after a result
            seq += 1
            events.append(Event(seq=seq, id=f"m{k}", role="assistant", blocks=[TextBlock(text=text)]))
    return events


def _dumps(events: list) -> list[str]:
    seqs = [e.seq for e in events]
    lifter = lift.Lifter(events)
    return [lifter.state_at(seqs[int((len(seqs) - 1) * f)]).model_dump_json() for f in (0.3, 0.7, 1.0)]


def _full_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every shortcut off: each sentence searched, the file-name search per text, every block looked at."""
    monkeypatch.setattr(lift, "_DECISION_FAILED_PRE", re.compile(""))
    on_text = failures.SoftCalls.on_text
    monkeypatch.setattr(failures.SoftCalls, "on_text",
                        lambda self, seq, sentences, failed, low=None, plain=False:
                        on_text(self, seq, sentences, failed, None))
    intent = notes._intent
    monkeypatch.setattr(notes, "_intent", lambda text, names_file=None: intent(text))
    monkeypatch.setattr(lift, "_NO_ARTIFACT", frozenset())


def test_the_lift_with_its_shortcuts_equals_the_full_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sessions = [*_sessions(), ("generated", _generated(tmp_path, 800))]
    fast = [_dumps(evs) for _, evs in sessions]
    _full_path(monkeypatch)
    slow = [_dumps(evs) for _, evs in sessions]
    for (name, _), f, s in zip(sessions, fast, slow, strict=True):
        assert f == s, name
    needles = _dumps(dict(sessions)["needles"])[-1]
    assert '"decisions":[{' in needles and '"failed_approaches":[{' in needles  # (the texts do hit)


def _texts() -> list[str]:
    out = [e.text for _, evs in _sessions() for e in evs if e.text]
    rnd = random.Random(3)
    spaces = [" ", "\t", "\n", "\u00a0", "\u2003", "\x1c", "  \n "]
    for t in rnd.sample(out, min(400, len(out))):  # the same words, other whitespace between them
        out.append("".join(w + rnd.choice(spaces) for w in t.split()))
    return out


def test_a_message_names_a_file_alike_with_its_whitespace_collapsed() -> None:
    texts = _texts()
    named = 0
    for t in texts:
        names = notes._names_file(t)
        assert names == notes._names_file(" ".join(t.split())), t[:80]
        assert notes._intent(t, names) == notes._intent(t), t[:80]
        named += names
    assert 0 < named < len(texts)


def test_signatures_are_found_only_in_texts_holding_a_word_of_their_kind() -> None:
    texts = [t for t in _texts() if t.strip()]
    texts += ["def f(x):\n    return x\n", "  async def g():\n", "class A(B):\n", "export default function h() {}",
              "pub fn main() {\n", "func (s *S) Run() error {\n", "type T struct {\n"]
    hits = 0
    for kind, words in content._SIG_WORDS.items():
        for t in texts:
            found = content._SIGS[kind].search(t) is not None
            hits += found
            assert not found or any(w in t for w in words), (kind, t[:80])
    assert hits > 5


def test_a_call_without_files_shares_read_only_empty_maps() -> None:
    a = actions.classify(ToolUseBlock(id="1", name="Bash", input={"command": "ls"}))
    b = actions.classify(ToolUseBlock(id="2", name="WebSearch", input={"query": "x"}))
    assert a.digests is b.digests and not a.digests and dict(a.texts) == {} and a.shell_ops.get("x", "s") == "s"
    assert list(b.paths) == [] and list(b.reads) == []
    with pytest.raises(TypeError):
        a.digests["f"] = "d"  # type: ignore[index]
    with pytest.raises(TypeError):
        a.texts.update(f="t")  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        b.paths.append("f")  # type: ignore[attr-defined]
    c = actions.classify(ToolUseBlock(id="3", name="Write", input={"file_path": "a.py", "content": "X = 1\n"}))
    assert c.paths == ["a.py"] and c.texts == {"a.py": "X = 1\n"} and c.texts is not a.texts


def test_the_sentence_gap_and_glue_checks_answer_as_the_patterns_they_stand_for() -> None:
    from compactor.lifting import constraints

    rnd = random.Random(5)
    alphabet = "aZq.!? \t\n\r\x0b\u00a0\u2028é1"
    texts = _texts() + ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 14))) for _ in range(40_000)]
    gaps = glued = 0
    for t in texts:
        gap = constraints._SENTENCE_GAP_RE.search(t) is not None
        assert gap == (constraints._SENTENCE_GAP_PRE.search(t) is not None), repr(t[:80])
        glue = re.search(r"[a-z][.!?][A-Z]", t) is not None
        assert glue == (constraints._GLUED_PRE_RE.search(t) is not None), repr(t[:80])
        gaps += gap
        glued += glue
    assert gaps > 100 and glued > 100


def test_a_message_saying_the_call_did_nothing_is_a_soft_failure_though_no_other_family_is_in_it() -> None:
    # (issue 17: the soft-failure needles are part of the lifter's one search of every family's, and
    # ``SoftCalls.on_text`` does not search a message in which that search found none)
    said = ["The command did not produce any output.", "It returned nothing.", "Running it had no effect.",
            "It did not print anything.", "It found 0 matches."]
    for text in said:
        low = text.lower()
        assert lift._TEXT_FAMILIES.search(low) is not None
        evs = [Event(seq=1, id="u", role="user", blocks=[TextBlock(text="Fix the app.")]),
               Event(seq=2, id="a", role="assistant", blocks=[
                   TextBlock(text="Listing."), ToolUseBlock(id="t1", name="Bash", input={"command": "ls src"})]),
               Event(seq=3, id="r", role="user", blocks=[ToolResultBlock(
                   tool_use_id="t1", content=[TextBlock(text="app.py\n")])]),
               Event(seq=4, id="b", role="assistant", blocks=[TextBlock(text=text)])]
        st = lift.lift_state(evs)
        assert [(f.what, f.error) for f in st.failed_approaches] == [("ls src", failures.SOFT_ERROR)], text
    # a text with no needle of any family is plain, and holds no soft failure
    assert lift._TEXT_FAMILIES.search("checking module 12.") is None
