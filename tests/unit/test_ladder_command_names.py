"""The ladder carry's distinct command texts as sorted hashes (``ladder_carry.CommandNames``,
issue 17, memory: a set of every text was a 4 MB table at 300k events, held through the
ladder). Whether a rung's new commands repeat one of the carried ones is answered exactly as
the set answered, hashes shared by other texts included, and a ladder's summaries are the ones
built without the carry (``tests/unit/test_summary_ladder_carry.py``)."""

from __future__ import annotations

import random

import pytest

from compactor.summarize import ladder_carry
from compactor.summarize.ladder_carry import CommandNames, extend_commands, fresh_commands


def _names(texts: list[str]) -> CommandNames:
    return fresh_commands(texts, _key).names  # (the carry's own: its hashes as it takes them)


def _key(c: str) -> str:
    return c


@pytest.mark.parametrize("collide", [False, True])
def test_meets_answers_as_a_set_of_the_texts(monkeypatch: pytest.MonkeyPatch, collide: bool) -> None:
    if collide:  # (every text of one length shares its hash: each hit is checked against the texts)
        monkeypatch.setattr(ladder_carry, "hash", len, raising=False)
    rng = random.Random(7)
    held = [f"pytest tests/test_{i}.py" for i in rng.sample(range(5_000), 1_500)]
    names = _names(held)
    known = set(held)
    for _ in range(200):
        new = [f"pytest tests/test_{i}.py" for i in rng.sample(range(5_000), rng.randint(1, 6))]
        new = list(dict.fromkeys(new))
        assert names.meets(new, held, _key) == any(t in known for t in new)
        if not any(t in known for t in new) and rng.random() < 0.5:
            names.add(new)
            held += new
            known.update(new)
    assert len(names) == len(known)
    assert not names.meets(["never held"], held, _key)
    assert names.meets([held[0]], held, _key) and names.meets([held[-1]], held, _key)


def test_the_hashes_stay_sorted_as_texts_are_added() -> None:
    names = CommandNames()
    held: list[str] = []
    for k in range(50):
        new = [f"cmd {k} {j}" for j in range(k % 7 + 1)]
        assert not names.meets(new, held, _key)
        names.add(new)
        held += new
        hashes = names._hashes
        assert list(hashes) == sorted(hash(t) for t in held)
    assert all(names.meets([t], held, _key) for t in held)


def test_a_carry_extends_only_with_new_commands() -> None:
    cmds = [f"make target{i}" for i in range(300)]
    carry = fresh_commands(cmds, _key)
    assert len(carry.names) == 300 and carry.counts is None
    grown = extend_commands(carry, cmds + ["make new1", "make new2"], _key)
    assert grown is not None and list(grown[1]) == [300, 301]
    # a command run again (one carried) or twice among the new: the whole handled again
    assert extend_commands(grown[0], grown[0].items + ["make target5"], _key) is None
    assert extend_commands(grown[0], grown[0].items + ["make x", "make x"], _key) is None
    assert extend_commands(grown[0], grown[0].items + ["make new2"], _key) is None
    again = fresh_commands(cmds + ["make target3"], _key)
    assert again.counts is not None and len(again.names) == 300
