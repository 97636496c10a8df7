"""The ladder carry holds no set of its distinct command texts (issue 17, memory: a 4 MB table
at 300k events, held through the ladder): whether a rung's new commands repeat a carried one is
read from the carried items (or the run counts, when a command ran more than once), and
answers as the set did. A ladder's summaries are the ones built without the carry
(``tests/unit/test_summary_ladder_carry.py``)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from compactor.summarize.ladder_carry import CommandCarry, extend_commands, fresh_commands


def _key(c: str) -> str:
    return c


def _reference(held: list[str], commands: list[str]) -> Any:
    """What the carry with a set of its texts answered: None, or the new places."""
    m = len(held)
    if commands[:m] != held:
        return None
    new = commands[m:]
    if any(t in set(held) for t in new) or len(set(new)) != len(new):
        return None
    return list(range(m, len(commands)))


def test_a_carry_extends_as_with_a_set_of_its_texts() -> None:
    rng = random.Random(7)
    for repeats in (False, True):
        held = [f"pytest tests/test_{i}.py" for i in rng.sample(range(4_000), 800)]
        if repeats:
            held += held[:5]  # (a command run twice: the carry keeps run counts)
        carry: CommandCarry | None = fresh_commands(held, _key)
        assert (carry.counts is not None) == repeats
        extended = refused = 0
        for _ in range(150):
            new = [f"pytest tests/test_{i}.py" for i in rng.sample(range(4_000), rng.randint(1, 5))]
            if rng.random() < 0.2:
                new.append(new[0])  # (twice among the new)
            commands = held + new
            want = _reference(held, commands)
            got = extend_commands(carry, commands, _key)
            assert (None if got is None else list(got[1])) == want
            if got is None:
                refused += 1
                continue
            extended += 1
            carry, held = got[0], commands
            assert carry.items == held
            if carry.counts is not None:
                assert carry.counts == Counter(held)
        assert extended > 20 and refused > 20


def test_a_command_run_again_is_handled_whole() -> None:
    cmds = [f"make target{i}" for i in range(300)]
    carry = fresh_commands(cmds, _key)
    assert carry.counts is None and not hasattr(carry, "names")
    grown = extend_commands(carry, cmds + ["make new1", "make new2"], _key)
    assert grown is not None and list(grown[1]) == [300, 301]
    items = grown[0].items
    assert extend_commands(grown[0], items + ["make target5"], _key) is None
    assert extend_commands(grown[0], items + ["make x", "make x"], _key) is None
    assert extend_commands(grown[0], items + ["make new2"], _key) is None
    again = fresh_commands(cmds + ["make target3"], _key)
    assert again.counts is not None and again.counts["make target3"] == 2
    assert extend_commands(again, again.items + ["make target7"], _key) is None
    assert extend_commands(again, again.items + ["make fresh"], _key) is not None
