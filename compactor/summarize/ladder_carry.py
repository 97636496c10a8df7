"""The shrink ladder's sections carried from rung to rung (issue 17, round fourteen).

The ladder's rungs render the states of growing cuts: a rung's lists of commands and files
read extend the previous rung's (the same items, in the same places, a few more at the end).
``ladder_memo`` keeps each item's line; this module keeps what the previous rung made of the
whole list: which runs are the latest of their command, the run counts, the fetch answers,
the section's lines in order, and which lines were ranked apart from their own tier (the
newest commands that worked, the failed runs told under Errors). A rung whose list extends
the previous one, with no command of the previous list run again, then handles only its new
items and the few lines whose rank or line may have changed, not every item again (~49k
commands and ~49k files read at 100k events, per rung).

Only the bookkeeping lives here: what a line says and how it ranks stays ``structured``'s.
The same lines, in the same order, with the same tiers as ``structured._build`` without it
(``tests/unit/test_summary_ladder_carry.py``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, islice
from operator import attrgetter, lt
from typing import Any

from compactor.summarize.ladder_lines import Line

_PATH = attrgetter("path")
_SEQ = attrgetter("seq")


@dataclass(slots=True)
class CommandCarry:
    """What one rung's ``_build`` made of ``state.commands``."""

    items: list = field(default_factory=list)
    """A copy of the list (the next rung's must start with these very items)."""
    latest_runs: Sequence[int] = range(0)
    """The latest run of each distinct command, in order (a range when each ran once: no
    ~150k index objects kept at 300k events)."""
    counts: Counter | None = None
    """Command text -> its runs (None: each ran once)."""
    answers: list = field(default_factory=list)
    """(cost, -index) of each latest run that answered something (a fetch's ``got: ...``)."""
    gists: set = field(default_factory=set)
    """The answers shown with their gist."""
    special: set = field(default_factory=set)
    """The runs whose line was ranked apart from its own tier (newest ok, told under Errors)."""
    by_tool: dict = field(default_factory=dict)
    """Tool call id -> the latest runs that failed or were cut (what Errors may tell in full)."""
    lines: list = field(default_factory=list)
    """The section's lines, one per latest run, in order."""
    raised: dict = field(default_factory=dict)
    """Index -> line, for the lines ranked above a plain ok command (``structured._fit``)."""


def extend_commands(carry: CommandCarry | None, commands: list, key: Any) -> tuple[CommandCarry, range] | None:
    """``carry`` grown by ``commands`` past its items, and the indexes of the new latest runs;
    None when ``commands`` does not extend the carried list with new commands only (a command
    run again moves its line: then every command is handled again). ``key``: a run's command
    text. The carry's counts are updated in place (it is the next one's)."""
    if carry is None:
        return None
    m = len(carry.items)
    if len(commands) < m or commands[:m] != carry.items:
        return None
    new = list(map(key, commands[m:]))
    distinct, counts = set(new), carry.counts
    # (the carried texts: the counts' keys, or a scan of the items, ~8 ms a rung at 300k events,
    # not a set of them held through the ladder: a 4 MB table at 300k, issue 17, memory)
    if len(distinct) != len(new) or not distinct.isdisjoint(map(key, carry.items) if counts is None else counts):
        return None
    fresh = range(m, len(commands))
    if counts is not None:
        counts.update(new)
    carry.items = commands[:]
    runs = carry.latest_runs
    carry.latest_runs = range(len(commands)) if isinstance(runs, range) else [*runs, *fresh]
    return carry, fresh


def fresh_commands(commands: list, key: Any) -> CommandCarry:
    """The carry of ``commands`` handled whole (``_build``'s own walk)."""
    if len(set(map(key, commands))) == len(commands):  # (each ran once: no index per command, issue 17 memory)
        latest_runs: Sequence[int] = range(len(commands))
        counts = None
    else:
        latest_by_cmd = {key(c): i for i, c in enumerate(commands)}
        latest_runs = sorted(latest_by_cmd.values())  # the latest run of each distinct command, in order
        counts = Counter(map(key, commands))
    return CommandCarry(items=commands[:], latest_runs=latest_runs, counts=counts)


@dataclass(slots=True)
class ReadCarry:
    """What one rung's ``_build`` made of the files read."""

    files: list = field(default_factory=list)
    """A copy of ``state.files_read``."""
    changed: frozenset = frozenset()
    """The changed files' paths (a file only read is one not among them)."""
    read_only: list = field(default_factory=list)
    with_facts: list = field(default_factory=list)
    """The files only read that hold facts (what ``read_details`` picks from)."""
    facts: dict = field(default_factory=dict)
    """Path -> the facts line it got (``read_details``)."""
    lines: list = field(default_factory=list)
    """The section's lines, one per file only read."""
    ascending: bool = False
    """``with_facts`` is in strictly ascending seq order."""
    raised: dict = field(default_factory=dict)
    """Place -> line, for the lines ranked above a plain file read (``structured._fit``)."""


def ascending(files: list, after: list) -> bool:
    """Whether ``files`` are in strictly ascending seq order, and after the last of ``after``."""
    seqs = [*map(_SEQ, after[-1:]), *map(_SEQ, files)]
    return all(map(lt, seqs, islice(seqs, 1, None)))


def extend_reads(carry: ReadCarry | None, files: list, changed: frozenset) -> tuple[list, list, int, bool] | None:
    """The files only read of ``files``, those of them with facts (and whether those are in
    strictly ascending seq order), and how many of them the carry's lines are for, when
    ``files`` extends the carried list with the same changed files; None otherwise."""
    if carry is None or changed != carry.changed:
        return None
    m = len(carry.files)
    if len(files) < m or files[:m] != carry.files:
        return None
    new = [f for f in files[m:] if f.path not in changed] if changed else files[m:]
    facts = [f for f in new if f.facts]
    # (none changed: the files only read are all of them, the state's own list, not a copy)
    return (carry.read_only + new if changed else files, carry.with_facts + facts, len(carry.read_only),
            carry.ascending and ascending(facts, carry.with_facts))



def carry_reads(carry: ReadCarry, read_only: list, facts: dict, m: int,
                lines_at: Callable[[Iterable[int]], list], low: int) -> tuple[list, dict]:
    """The "Files read" lines of ``read_only``, whose first ``m`` are the carry's files: the
    carry's lines, with those whose file's facts line changed made again, then the new files'
    (``lines_at(places)``: the lines of those places, in order); and place -> line of those
    whose tier is not ``low`` (``raised``), from the carry's."""
    old = carry.facts
    diff = {p for p in old.keys() | facts.keys() if old.get(p) != facts.get(p)} if old != facts else None
    out = carry.lines
    raised = carry.raised
    if diff:
        # (the places of those paths, found without a Python step per file)
        redo = list(compress(range(m), map(diff.__contains__, map(_PATH, islice(read_only, m)))))
        if redo:
            out = out.copy()
            for k, line in zip(redo, lines_at(redo)):
                out[k] = line
                if _ranked_apart(line, low):
                    raised[k] = line
                else:
                    raised.pop(k, None)
    new = lines_at(range(m, len(read_only)))
    raise_lines(raised, m, new, low)
    return out + new, raised


def raise_lines(raised: dict, start: int, lines: list, low: int) -> dict:
    """``raised`` with place -> line for those of ``lines`` (at ``start`` on) whose tier is not ``low``."""
    raised.update((k, ln) for k, ln in enumerate(lines, start) if _ranked_apart(ln, low))
    return raised


def _ranked_apart(entry: Any, low: int) -> bool:
    """Whether a section's entry is a line whose tier is not ``low`` (an entry that is not a
    line is an item whose line is of tier ``low``: not made, ``ladder_memo``)."""
    return isinstance(entry, Line) and entry.tier != low


def special_runs(carry: CommandCarry, todo: Sequence[int], commands: list, recent_ok: set[int],
                 explained: set) -> set[int]:
    """The latest runs this rung ranks apart from their own tier: ``recent_ok`` (the newest that
    worked) and those ``explained`` names (failed or cut runs the errors section tells in
    full), found through the carry's ``by_tool``, to which ``todo``'s runs are added."""
    by_tool = carry.by_tool
    for i in todo:
        c = commands[i]
        if c.status == "failed" or c.detail.startswith("partial"):
            by_tool.setdefault(c.tool_use_id, []).append(i)
    return recent_ok | {i for t in explained if t in by_tool for i in by_tool[t]}


def carry_command_lines(carry: CommandCarry, grown: bool, todo: Sequence[int], commands: list,
                        line_of: Callable[[int], Any], special: set[int], gists: set[int], low: int) -> list:
    """The "Commands run" lines (``line_of(i)``: the line of the run at ``i``, its tier set as
    this rung ranks it): with ``grown``, the carry's lines, but those ranked apart there or
    here (``special``) or whose gist changed made again, then ``todo``'s (the new runs), else
    ``todo``'s (every latest run). The carry then holds them, and ``raised``: index -> line for
    those whose tier is not ``low``."""
    raised = carry.raised
    out: list = []
    if grown:
        old = carry.lines
        first = todo[0] if todo else len(commands)
        redo = sorted(i for i in carry.special | special | (gists ^ carry.gists) if i < first)
        if redo:
            old = old.copy()
            for i in redo:
                line = old[bisect_left(carry.latest_runs, i)] = line_of(i)
                if _ranked_apart(line, low):
                    raised[i] = line
                else:
                    raised.pop(i, None)
        out = old
    made = list(map(line_of, todo))
    raised.update((i, line) for i, line in zip(todo, made) if _ranked_apart(line, low))
    carry.lines = [*out, *made] if grown else made
    carry.gists, carry.special = gists, special
    return carry.lines
