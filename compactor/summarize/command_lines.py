"""The structured summary's "Commands run" lines: one per distinct command, its latest run.

Each rung of the shrink ladder renders a state of ~100k-300k commands that extends the
previous rung's (issue 17). With the ladder memo (``ladder_memo.LadderMemo``) a command's line
is built and counted once, kept by its place in ``state.commands``, and the rung's list of
lines is gathered from the memo in C-level passes (``map``, ``compress``): Python code runs
for the lines built anew (a new command, another run count or answer flag) and for the few
whose tier the rung sets (the newest that worked, the runs told in full under Errors), and
the tiers the previous rung set are put back first. Without a memo a throwaway one is used,
so both paths are this one.

The lines are ``structured._Line`` objects, made by the ``new_line`` it passes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import compress, count, repeat
from operator import attrgetter, is_not, ne, or_

from compactor.lifting.outputs import is_install
from compactor.summarize.failure_lines import code as _code
from compactor.summarize.ladder_memo import LadderMemo
from compactor.tokens import count_text

TIER_COMMAND_OK = 10
TIER_COMMAND_FAILED = 50
TIER_COMMAND_EXPLAINED = 33  # a failed run whose failure line (command, cause, outcome) is under Errors
TIER_COMMAND_RECENT_OK = 46  # one of the newest commands that worked
RECENT_OK_COMMANDS = 4
TIER_OUTPUT_GIST = 45  # what a fetch or query answered (within GIST_SHARE): what the agent learned
GIST_SHARE = 0.1
"""Share of the summary budget for the answers of fetches and queries (``got: ...`` details)."""
GIST_COMMAND_CHARS = 90
TIER_INSTALL = 39  # an install (what it brought in) or a partial fetch (its limit): where the environment stands

_OUTCOME_WORDS = {"ok": "ok", "failed": "failed", "unknown": "no exit status recorded"}
_COMMAND = attrgetter("command")
_TOOL_USE_ID = attrgetter("tool_use_id")
_DETAIL = attrgetter("detail")


def _line(c, n: int, gist: bool, i: int, new_line: Callable) -> object:
    """The line of command ``c`` (``state.commands[i]``), run ``n`` times, with its own tier."""
    command, status = c.command, c.status
    outcome = f"exit {c.exit_code}" if c.exit_code is not None else _OUTCOME_WORDS[status]
    times = f" ×{n}" if n > 1 else ""
    detail = f": {c.detail}" if c.detail else ""
    cmd_text = _code(command, GIST_COMMAND_CHARS if gist else 200)  # (the answer is the point)
    text = f"- #{c.seq} {cmd_text} → {outcome}{times}{detail}"
    # (a cut answer's line under Errors says what it got: its command line is history too)
    tier = (TIER_COMMAND_FAILED if status == "failed"
            else TIER_OUTPUT_GIST if gist
            else TIER_INSTALL if c.detail.startswith("partial") or is_install(command)
            else TIER_COMMAND_OK)  # (an answer past the share: the log has it)
    return new_line(text, tier, c.seq, i, count_text(text) + 1)


def command_lines(commands: list, budget: int | None, explained: set, memo: LadderMemo | None,
                  new_line: Callable) -> list:
    """The lines of the latest run of each distinct command, in order, tiered for this state
    (``explained``: the tool call ids of the failed runs the errors section tells in full).
    ``new_line(text, tier, seq, index, tokens)`` makes a line."""
    latest_by_cmd = dict(zip(map(_COMMAND, commands), count()))  # (the last index of each wins)
    latest_runs = sorted(latest_by_cmd.values())  # the latest run of each distinct command, in order
    counts = Counter(map(_COMMAND, commands)) if len(latest_runs) < len(commands) else None  # (None: each ran once)
    # the newest distinct commands that worked are how the agent got where it is: kept longer
    recent_ok: set[int] = set()
    for i in reversed(latest_runs):
        if len(recent_ok) == RECENT_OK_COMMANDS:
            break
        if commands[i].status != "failed":
            recent_ok.add(i)
    # what fetches and queries answered (a status, the documents and items that came back, code a
    # response printed): what the agent learned and acted on, within a share
    gist_room = None if budget is None else int(budget * GIST_SHARE)
    gists: set[int] = set()
    runs = list(map(commands.__getitem__, latest_runs))
    answers = [(count_text(c.command[:GIST_COMMAND_CHARS] + c.detail) + 4, -i)
               for i in compress(latest_runs, map(_DETAIL, runs))  # (a run with a detail: few)
               if (c := commands[i]).status == "ok" and "got" in c.detail[:40]]
    for cost, neg in sorted(answers):  # the shortest answers first (a status, a title), then the newest
        if gist_room is not None and cost > gist_room:
            continue
        gists.add(-neg)
        gist_room = None if gist_room is None else gist_room - cost

    if memo is None:
        memo = LadderMemo()  # (a throwaway: every line is built)
    if len(memo.cmd_items) < len(commands):
        memo.grow_commands(len(commands))
    items, keys, kept, own = memo.cmd_items, memo.cmd_keys, memo.cmd_lines, memo.cmd_tiers
    # A line is kept when the same item at the same place has the same key (2 x its run count +
    # its answer flag). The ones to look at: another item or key than a one-run, no-answer line's,
    # and the answers.
    if counts is None:
        look = set(compress(latest_runs, map(or_, map(is_not, map(items.__getitem__, latest_runs), runs),
                                             map(ne, map(keys.__getitem__, latest_runs), repeat(2)))))
        look |= gists
    else:
        look = latest_runs
    for i in look:
        c = commands[i]
        n = counts[c.command] if counts is not None else 1
        gist = i in gists
        key = 2 * n + gist
        if items[i] is c and keys[i] == key:
            continue
        line = _line(c, n, gist, i, new_line)
        items[i], keys[i], kept[i], own[i] = c, key, line, line.tier
    # the tiers the previous state set go back to the lines' own; then this state's are set
    for i in memo.cmd_ranked:
        if kept[i] is not None:
            kept[i].tier = own[i]
    ranked: list[int] = []
    if explained:  # told in full under Errors
        for i in compress(latest_runs, map(explained.__contains__, map(_TOOL_USE_ID, runs))):
            c = commands[i]
            if c.status == "failed" or c.detail.startswith("partial"):
                kept[i].tier = TIER_COMMAND_EXPLAINED
                ranked.append(i)
    told = set(ranked)
    for i in recent_ok:  # one of the newest that worked
        if i not in told and own[i] != TIER_COMMAND_FAILED:
            kept[i].tier = TIER_COMMAND_RECENT_OK
            ranked.append(i)
    memo.cmd_ranked = ranked
    return list(map(kept.__getitem__, latest_runs))
