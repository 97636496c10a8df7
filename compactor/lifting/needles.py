"""One search that says whether any of several text families' needles occurs in a message.

Each text family of the lift (decisions and failures, reasons and rules, file names) checks
the lowercased text of an ASCII message for its literal needles before its case-insensitive
alternation runs. Most of an agent's messages in a long session are a short line beside a call
("Checking module 12.") holding none of them, and then each family's own pre-check is one more
failed search of the same text (issue 17). ``any_needle`` compiles the union of the families'
needles into one pattern, written as a trie (one branch per first character, then per next
one), so the search tries one alternative per distinct prefix at each position instead of one
per needle: when it finds nothing, no family can match and none of them is searched.

The pattern matches where one of the needles occurs, exactly: only whether it finds something
(and where the first one starts) is meant to be read, not which needle it found.
"""

from __future__ import annotations

import re
from typing import Iterable


def trie_source(needles: Iterable[str], *patterns: str) -> str:
    """Regex source matching exactly where one of ``needles`` (literals) or of ``patterns`` (regex
    sources, each a branch of its own) occurs.

    A needle that is a prefix of another ends the branch: matching it is enough for a search,
    so the longer ones below it are left out. ``""`` among the needles matches everywhere.
    The patterns sit beside the first characters' branches, not around them: a search then
    skips, by one set look-up, each position whose character starts no branch.
    """
    root: dict[str, dict] = {}
    for needle in needles:
        node = root
        for ch in needle:
            node = node.setdefault(ch, {})
        node[""] = {}
    if "" in root:
        return ""
    alts = [re.escape(ch) + _emit(root[ch]) for ch in sorted(root)] + list(patterns)
    if not alts:
        return "(?!)"  # nothing to find
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


def _emit(node: dict[str, dict]) -> str:
    if "" in node:
        return ""  # a needle ends here
    alts = [re.escape(ch) + _emit(node[ch]) for ch in sorted(node)]
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


def any_needle(needles: Iterable[str], *patterns: str) -> re.Pattern[str]:
    """One compiled search for any of ``needles`` (literals) or of ``patterns`` (regex sources)."""
    return re.compile(trie_source(needles, *patterns))


class Caseless:
    """A case-insensitive pattern searched in an ASCII text as its case-sensitive twin in the text
    lowercased: the same matches at the same positions (lowercasing ASCII keeps every character's
    place and class, and no literal of the pattern is upper case), for a fraction of the cost of
    case-insensitive matching, which compares each character folded (issue 17: the rule words of
    a user's request). Beyond ASCII the pattern itself runs. Read a match's positions, not its
    text (it is lowercased).

    ``low``: the twin's source written by hand, when the pattern's own searches slowly (one opening
    with a word boundary gets no first-character skip); it must match exactly where the pattern
    does in a lowercased ASCII text (``tests/unit/test_lift_family_scan.py`` compares them).
    """

    __slots__ = ("pattern", "_low")

    def __init__(self, pattern: re.Pattern[str], low: str | None = None) -> None:
        src = pattern.pattern
        if not pattern.flags & re.IGNORECASE or re.search(r"(?<!\\)[A-Z]", src.replace("(?i)", "")):
            raise ValueError(f"not a case-insensitive pattern of lower-case literals: {src[:60]!r}")
        self.pattern = pattern
        self._low = re.compile(src.replace("(?i)", "") if low is None else low, pattern.flags & ~re.IGNORECASE)

    def search(self, text: str) -> re.Match[str] | None:
        return self._low.search(text.lower()) if text.isascii() else self.pattern.search(text)
