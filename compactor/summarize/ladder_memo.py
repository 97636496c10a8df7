"""The shrink ladder's line memo (issue 17): lines built for one rung's state, kept for the next.

The shrink ladder renders the states of growing cuts, which share their items (one lifting
pass): a command's or a read file's line is built and counted once per compaction instead of
once per rung (at 300k events a rung's ~300k lines no longer fit the count memo of
``compactor.tokens``, so every rung tokenized each of them again).

Only the memo lives here: what a line says and how it ranks is ``structured``'s, which builds
the lines this memo keeps (``read_lines`` takes its builder) and reads the memo from
``LADDER_MEMO`` while it renders.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from compactor.summarize.ladder_lines import Line


def _ints() -> array:
    return array("i")


def _tiers() -> array:
    return array("b")


@dataclass(slots=True)
class LadderMemo:
    """Lines already built, and sized, for the items of an earlier rung's state, by their place
    in its lists (the rungs' lists grow by appending; an item at the same place is checked by
    identity). Parallel lists, not a tuple per item (issue 17, memory). A line's numbers are
    ``array`` columns (its key, tier, correction, size and length: 4 bytes each, a tier 1, no
    int object per line), and its entry is the item itself until a rung ranks the line apart from
    the most of its section or something reads it (``memo_line``): then the line object, kept
    and put in the next rung's document again (a new one per line per rung was ~0.05 s a rung
    at 100k lines): its order is fixed by its place, a drop is marked per document, and a
    command's tier is set again by each rung. At 300k events a rung's ~296k lines were ~144
    bytes of objects each (round seventeen); a few hundred of them are made now."""

    read_items: list = field(default_factory=list)
    """The files only read (``read_lines``), their facts lines (None: none), entries (the file,
    or its line once made) and each line's correction (``ladder_count.line_sizes``: what it
    counts inside its section beyond its own size), size and length."""
    read_facts: list = field(default_factory=list)
    read_lines: list = field(default_factory=list)
    read_corrs: array = field(default_factory=_ints)
    read_tokens: array = field(default_factory=_ints)
    read_lengths: array = field(default_factory=_ints)
    cmd_items: list = field(default_factory=list)
    """By index in ``state.commands``: the command whose line is kept (None: none), 2 x its run
    count + its gist flag, its entry (the command, or its line once made), its own tier, its
    correction, size and length."""
    cmd_keys: array = field(default_factory=_ints)
    cmd_lines: list = field(default_factory=list)
    cmd_tiers: array = field(default_factory=_tiers)
    cmd_corrs: array = field(default_factory=_ints)
    cmd_tokens: array = field(default_factory=_ints)
    cmd_lengths: array = field(default_factory=_ints)
    commands: Any = None
    """What the last render made of its commands list (``ladder_carry.CommandCarry``)."""
    reads: Any = None
    """What the last render made of its files read (``ladder_carry.ReadCarry``)."""

    def grow_commands(self, n: int) -> None:
        k = n - len(self.cmd_items)
        more = [None] * k
        self.cmd_items += more
        self.cmd_lines += more
        zeros = array("i", bytes(4 * k))
        for column in (self.cmd_keys, self.cmd_corrs, self.cmd_tokens, self.cmd_lengths):
            column += zeros
        self.cmd_tiers += array("b", bytes(k))


def memo_line(entries: list, items: list, keys: list, tokens: array, lengths: array, k: int, item: Any,
              key: Any, make: Callable[[int, Any, Any, int | None, int], Line]) -> Line:
    """The line of place ``k`` for ``item`` built with ``key``: the memo's when its entry is that
    item with that key (made from the columns the first time, ``make(k, item, key, length,
    tokens)``, and kept as the entry), else a line made anew (``make(k, item, key, None, 0)``:
    sized again, not kept; a document built before another document of the same rung rebuilt
    the entry with another key, as the old memo's line object stayed in its document)."""
    if k < len(items) and items[k] is item and keys[k] == key:
        entry = entries[k]
        if isinstance(entry, Line):
            return entry
        line = entries[k] = make(k, item, key, lengths[k], tokens[k])
        return line
    return make(k, item, key, None, 0)


LADDER_MEMO: ContextVar[LadderMemo | None] = ContextVar("structured_ladder_memo", default=None)
"""Command and file-read lines already built for an item of an earlier rung's state.
Set by ``begin_ladder_memo`` for the ladder; None elsewhere (no memo, nothing kept)."""


def begin_ladder_memo() -> Token:
    """From here on (in this context) ``render_summary`` reuses the command and file-read lines
    it built before; ``end_ladder_memo(token)`` lets them go."""
    return LADDER_MEMO.set(LadderMemo())


def end_ladder_memo(token: Token) -> None:
    LADDER_MEMO.reset(token)


def command_columns(memo: LadderMemo, make: Callable, commands: list, runs: Sequence[int], counts: Any,
                    gists: set[int]) -> tuple[Callable[[int], Line], Callable[[], Iterable[int]]]:
    """A document's "Commands run" as ``ladder_count.count_beyond`` reads it: the line at a place
    of the section, made if its entry is the command (``runs``: the document's latest runs;
    ``counts`` and ``gists`` the document's, which make a line's key: 2 x its run count + its gist
    flag; ``make``: ``memo_line``'s), and its lines' text lengths."""
    return partial(_command_at, memo, make, commands, runs, counts, gists), partial(_lengths_at, memo.cmd_lengths, runs)


def read_columns(memo: LadderMemo, make: Callable, read_only: list,
                 get_facts: Callable[[str], Any]) -> tuple[Callable[[int], Line], Callable[[], Iterable[int]]]:
    """A document's "Files read" as ``count_beyond`` reads it (``get_facts``: the document's
    facts, a line's key)."""
    return (partial(_read_at, memo, make, read_only, get_facts),
            partial(memo.read_lengths.__getitem__, slice(0, len(read_only))))


def _command_at(memo: LadderMemo, make: Callable, commands: list, runs: Sequence[int], counts: Any, gists: set[int],
                p: int) -> Line:
    i = runs[p]
    c = commands[i]
    key = 2 * (counts[c.command] if counts is not None else 1) + (i in gists)
    return memo_line(memo.cmd_lines, memo.cmd_items, memo.cmd_keys, memo.cmd_tokens, memo.cmd_lengths, i, c, key, make)


def _read_at(memo: LadderMemo, make: Callable, read_only: list, get_facts: Callable[[str], Any], k: int) -> Line:
    f = read_only[k]
    return memo_line(memo.read_lines, memo.read_items, memo.read_facts, memo.read_tokens, memo.read_lengths, k, f,
                     get_facts(f.path), make)


def _lengths_at(lengths: array, runs: Sequence[int]) -> Iterable[int]:
    """The text lengths of the lines of ``runs`` (a range from 0: a slice of the column)."""
    if isinstance(runs, range):
        return lengths[:len(runs)]
    return map(lengths.__getitem__, runs)


def made_lines(lines: list, spans: dict[str, tuple[int, int, int]],
               columns: dict[str, tuple[Callable[[int], Line], Any]]) -> list:
    """``lines`` with every memo entry of the sections of ``columns`` (at ``spans``) made its line
    (a document read whole: rendered and measured, or dropped from the bottom)."""
    for name, (at, _) in columns.items():
        start, end, _ = spans[name]
        if not all(isinstance(e, Line) for e in lines[start:end]):
            lines[start:end] = [e if isinstance(e, Line) else at(p) for p, e in enumerate(lines[start:end])]
    return lines


def read_lines(files: list, get_facts: Callable[[str], Any], memo: LadderMemo,
               make: Callable[[int, Any, Any], tuple[Any, int, int, int]], ks: Iterable[int] | None = None) -> list:
    """The "Files read" entries of ``files``, each line built (``make(k, file, facts)``: its entry,
    the file itself or its line, its count inside its section, its size and its length) and sized
    once per ladder: a file's line changes only with its item (a new read is a new one) or its
    facts. Afterwards the memo's first ``len(files)`` entries are this call's
    (``read_corrs[:len(files)]`` their counts). ``ks``: only the entries of these places, in this
    order (the other entries are the caller's already)."""
    out: list = []
    append = out.append
    items, known, kept, corrs = memo.read_items, memo.read_facts, memo.read_lines, memo.read_corrs
    sizes, lengths = memo.read_tokens, memo.read_lengths
    n_known = len(items)
    for k in range(len(files)) if ks is None else ks:
        f = files[k]
        facts = get_facts(f.path)
        if k < n_known and items[k] is f and known[k] == facts:
            append(kept[k])
            continue
        line, corr, tokens, length = make(k, f, facts)
        if k < n_known:
            items[k], known[k], kept[k], corrs[k], sizes[k], lengths[k] = f, facts, line, corr, tokens, length
        else:  # (k == len(items): the lines are met in order)
            items.append(f)
            known.append(facts)
            kept.append(line)
            corrs.append(corr)
            sizes.append(tokens)
            lengths.append(length)
        append(line)
    return out
