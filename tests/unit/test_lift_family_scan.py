"""The lift's one search for every text family's needles (issue 17, round twelve) gives the states of the full path.

An assistant message whose lowercased ASCII text holds no needle of any family (decisions and
failures, reasons and rules, a file name's ".x") is searched once instead of once per family;
``split_sentences`` looks once at the whole text for a sentence end; a short message is no
intent; the ``Lifter`` reads each event once when the events come in order. These tests lift
the fixtures, the corpus, synthetic and generated sessions with each shortcut turned off and
require the same states, and check the facts each shortcut rests on.
"""

from __future__ import annotations

import functools
import random
import re
from pathlib import Path

import pytest

from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.lifting import constraints, lift, narrative, notes
from compactor.lifting.needles import any_needle, trie_source
from tests.unit.test_lift_trusted import _generated, _sessions as _transcripts

_WORDS = [*lift._DECISION_NEEDLES, *lift._FAILED_NEEDLES, *narrative._REASON_NEEDLES, *narrative._RULE_NEEDLES,
          "Checking module 3.", "src/app.py holds the routes", "took 12 ms", "**so** that", "**because** of it",
          "3 out of 4", "Running the tests now", "the limit is 40", "version 2 is out", "it is done", "all good here"]


@functools.lru_cache(maxsize=1)
def _sessions() -> tuple[tuple[str, list], ...]:
    """The fixtures, the corpus and synthetic sessions (``test_lift_trusted``'s), and short texts
    built from the needles of every family and from words that hold none."""
    rnd = random.Random(12)
    events: list[Event] = [Event(seq=1, id="u1", role="user", blocks=[TextBlock(text="Fix the tests, please.")])]
    for k in range(200):
        words = rnd.sample(_WORDS, rnd.randint(1, 3))
        parts = [w.upper() if rnd.random() < 0.1 else w.capitalize() if rnd.random() < 0.5 else w for w in words]
        text = rnd.choice([". ", ".", "\n", "! ", " "]).join(parts) + rnd.choice([".", "", "?", " 7."])
        if rnd.random() < 0.15:
            text = text.replace("'", "\u2019")
        events += _turn(len(events), k, text, rnd.choice(["ok", "", "def f(x):\n    return 1\n"]), rnd.random() < 0.3)
    seq = len(events)
    for k, text in enumerate(["**So** that we keep going", "Checking module 12345.", "**Instead** of looping"]):
        events.append(Event(seq=seq + k + 1, id=f"b{k}", role="assistant", blocks=[TextBlock(text=text)]))
    return (*_transcripts(), ("family needles", events))


def _turn(last: int, k: int, text: str, result: str, reply: bool) -> list[Event]:
    """A message with a call, its result, and (``reply``) the same words again without a call."""
    use = ToolUseBlock(id=f"t{k}", name="Bash", input={"command": f"cat src/m{k}.py"})
    out = [Event(seq=last + 1, id=f"a{k}", role="assistant", blocks=[TextBlock(text=text), use]),
           Event(seq=last + 2, id=f"r{k}", role="user",
                 blocks=[ToolResultBlock(tool_use_id=use.id, content=[TextBlock(text=result)])])]
    return out + [Event(seq=last + 3, id=f"m{k}", role="assistant", blocks=[TextBlock(text=text)])] if reply else out


def _dumps(events: list) -> list[str]:
    seqs = [e.seq for e in events]
    lifter = lift.Lifter(events)
    return [lifter.state_at(seqs[int((len(seqs) - 1) * f)]).model_dump_json() for f in (0.3, 0.7, 1.0)]


def test_the_lift_with_the_family_scan_equals_the_full_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sessions = [*_sessions(), ("generated", _generated(tmp_path, 800))]
    fast = [_dumps(evs) for _, evs in sessions]
    monkeypatch.setattr(lift, "_TEXT_FAMILIES", re.compile(""))  # every text may hold every family
    monkeypatch.setattr(constraints, "_ANY_CUT_PRE", re.compile(""))  # every text split line by line
    slow = [_dumps(evs) for _, evs in sessions]
    for (name, _), f, s in zip(sessions, fast, slow, strict=True):
        assert f == s, name
    last = _dumps(dict(sessions)["family needles"])[-1]
    assert '"reasons":[{' in last and '"decisions":[{' in last  # (the texts do hit)


def test_a_text_the_family_scan_passes_over_holds_no_reason_decision_or_file_name() -> None:
    texts = [e.text for _, evs in _sessions() for e in evs if e.text and e.role == "assistant"]
    plain = 0
    for t in texts:
        if not t.isascii() or lift._TEXT_FAMILIES.search(t.lower()) is not None:
            continue
        plain += 1
        assert not notes._names_file(t), t[:80]
        if "**" not in t:
            assert narrative.reason_sentences(t) == [], t[:80]
        for s in constraints.split_sentences(t):
            assert not lift._DECISION_RE.search(s) and not lift._FAILED_TEXT_RE.search(s), s
    assert plain > 30


def test_the_needle_search_finds_a_needle_exactly_where_one_occurs() -> None:
    rnd = random.Random(7)
    needles = ["ab", "abc", "b", "ca", "x y", "a.b", "("]
    pattern = any_needle(needles)
    for _ in range(20_000):
        t = "".join(rnd.choice("abcxy .(") for _ in range(rnd.randint(0, 9)))
        m = pattern.search(t)
        starts = [i for i in range(len(t)) if any(t.startswith(n, i) for n in needles)]
        assert (m.start() if m else None) == (starts[0] if starts else None), repr(t)
    assert any_needle([], r"\d").search("a1") and not re.compile(trie_source([])).search("abc")
    assert re.compile(trie_source(["", "q"])).search("z") is not None  # ("" occurs everywhere)


def test_split_sentences_looks_once_at_the_whole_text(monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(5)
    alphabet = "aZq.!? \t\n\r\x0b\x0c\x1c\x85\u2028\u00a0é1"
    texts = [e.text for _, evs in _sessions() for e in evs if e.text]
    texts += ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 14))) for _ in range(30_000)]
    fast = [constraints.split_sentences(t) for t in texts]
    monkeypatch.setattr(constraints, "_ANY_CUT_PRE", re.compile(""))
    assert fast == [constraints.split_sentences(t) for t in texts]
    assert sum(len(s) > 1 for s in fast) > 1_000


def test_a_message_shorter_than_an_intent_is_none_and_one_as_long_can_be() -> None:
    assert notes._intent("Adding the loader to app") == ""  # 24 characters
    assert notes._intent("Adding the loader to apps") == "Adding the loader to apps"  # 25: an intent


def test_the_lifter_sorts_and_leaves_out_events_as_before() -> None:
    evs = dict(_sessions())["family needles"]
    whole = lift.Lifter(evs).state_at(None)
    shuffled = list(evs)
    random.Random(1).shuffle(shuffled)
    assert lift.Lifter(shuffled).state_at(None) == whole
    prev = lift.Lifter(evs[:150]).state_at(None)
    later = lift.Lifter(evs[150:], prev).state_at(None)
    assert lift.Lifter(evs, prev).state_at(None) == later  # (the covered events are left out)
    assert lift.Lifter(list(reversed(evs)), prev).state_at(None) == later


def test_a_caseless_pattern_matches_where_the_case_insensitive_one_does() -> None:
    from compactor.lifting.needles import Caseless

    patterns = {n: p for n, p in vars(constraints).items() if isinstance(p, Caseless)}
    assert {"_CONSTRAINT_RE", "_MODAL_RE", "_HEDGE_RE", "_PASTE_INLINE_RE"} <= set(patterns)
    rnd = random.Random(9)
    texts = [t for _, evs in _sessions() for e in evs if (t := e.text)]
    texts += [line for t in texts for line in t.splitlines()]
    words = ["Never", "DON'T", "don’t", "MUST", "I Think", "Says:", "error message: x", "please", "i NEED", "We recommend",
             "NOT ALLOWED", "x,not y", "ONLY", "k", "\u212a", "Ensure", "é", "MU\u017fT", "\u017fhould not",
             # (the modal and hedge words, whose twins are written by first letter too)
             "Remember", "REMEMBER:", "I'd like", "i would LIKE", "Wondering whether", "Is it possible", "maybe",
             "Not sure", "we don't want", "I never want", "Needs to", "has TO", "requirement", "mustn't", "Curious"]
    texts += [" ".join(rnd.choice(words) for _ in range(rnd.randint(1, 5))) for _ in range(5_000)]
    hits = 0
    for name, p in patterns.items():
        for t in texts:
            want = p.pattern.search(t)
            got = p.search(t)
            assert (got.span() if got else None) == (want.span() if want else None), (name, t[:80])
            assert not want or want.re.groups == 0 or got.span(1) == want.span(1), (name, t[:80])
            hits += want is not None
    assert hits > 1_000
    with pytest.raises(ValueError):
        Caseless(re.compile(r"\bFoo", re.I))  # an upper-case literal would not match the lowercased text
    with pytest.raises(ValueError):
        Caseless(re.compile(r"foo"))
