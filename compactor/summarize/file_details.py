"""What the changed files hold, as detail lines of the structured summary, within a budget share.

Per changed file, newest first: the agent's own note on it and the facts its text defines
(``compactor.lifting.content``), within ``ARTIFACT_SHARE`` of the summary budget. Split out of
``compactor.summarize.structured`` (which renders them under "Files changed") to keep it small.
"""

from __future__ import annotations

import re
from operator import attrgetter

from compactor.lifting.state import FileRef
from compactor.tokens import count_text

_SHORT_FACT_TOKENS = 10
"""A fact this short (``uses data/x.csv``) is said again for every file that has it; a longer one
a newer file already says (a copied header, settings) is counted there instead."""
ARTIFACT_SHARE = 0.3
"""Share of the summary budget for what changed files hold (notes and facts), newest files first."""
MIN_ARTIFACT_TOKENS = 80
IMPORTS = "imports: "
LONG_FACT_CHARS = 110
"""A fact longer than this (a function and its statements) gets a line of its own."""
FUNCTION_FILES = 3
"""Within a budget, the newest files this many keep their functions' statements; older ones their signatures
(measured: even 150 characters of an older file's statements cost the older reports their place)."""
_CLIPPED_SIG_END = re.compile(r"…: ")  # a long signature clipped at FACT_CHARS
_NUMBER = re.compile(r"(?<![\w\[.:])-?(?:\d+\.\d+|[2-9]|\d{2,})(?![\w\]])")
_SIG_END = re.compile(r"\)(?:\s*(?:->|:)\s*[^:;]{1,40}?)?(?:\s*=>)?: ")


_FUNCTION_LINE = re.compile(r"^(?:(?:export\s+)?(?:async\s+)?(?:def|function\*?|fn|func|pub)\s|(?:export\s+)?(?:const|let)\s+"
                            r"[\w$]+\s*=\s*(?:async\s*)?\(|if\s*\(.{100})")


def signature_of(fact: str) -> str:
    """``def f(x): n = 20; a = g(x); return a`` -> ``def f(x): n = 20``: a function line's signature and
    its statements holding a number; an edit's branch line: ""; other facts as they are."""
    m = _SIG_END.search(fact) or _CLIPPED_SIG_END.search(fact)
    if fact.startswith(("if ", "if(")):
        return ""  # an edit's branch: what it wired in is the newest files' story
    if not m:
        return fact
    # (the settings it computes with stay, as they did as facts of their own before functions had lines)
    numeric = [st for st in fact[m.end():].split("; ") if _NUMBER.search(st)]
    return fact[:m.end() - 2] + (": " + "; ".join(numeric) if numeric else "")


_SEQ = attrgetter("seq")

READ_SHARE = 0.1
"""Share of the summary budget for what files the agent only read define (a setup.py's extras, a base
class's methods): the facts the work built on, newest files first; changed files come first."""
MIN_READ_TOKENS = 40


def file_details(files: list[FileRef], budget: int | None, share: float = ARTIFACT_SHARE,
                 floor: int = MIN_ARTIFACT_TOKENS, function_files: int = FUNCTION_FILES, *,
                 notes: bool = True, ascending: bool = False) -> dict[str, str]:
    """Path -> ``  the agent: <its note>`` / ``  holds: <facts>`` lines for changed files, newest first,
    within ``share`` of the budget (everything when ``budget`` is None); ``notes=False``: facts only.
    ``ascending``: ``files`` are in strictly ascending seq order already (not sorted again)."""
    left = None if budget is None else max(floor, int(budget * share))
    out: dict[str, str] = {}
    shown_in: dict[str, str] = {}  # fact -> the (newer) file whose line already says it
    local: set[str] | None = None  # the project's own modules (made when an import needs them)
    for rank, f in enumerate(reversed(files) if ascending else sorted(files, key=_SEQ, reverse=True)):
        if left is not None and left < 12:
            break
        parts: list[str] = []
        if notes and f.note and f.note not in shown_in:  # one sentence naming two files: said once
            shown_in[f.note] = f.path
            note = f"the agent: {f.note}"
            cost = count_text(note) + 2
            if left is None or cost <= left:
                parts.append(note)
                left = None if left is None else left - cost
        facts: list[str] = []
        same: dict[str, int] = {}  # a newer file already says these (copied settings): named once
        for fact in f.facts:
            if budget is not None and rank >= function_files and _FUNCTION_LINE.match(fact):
                fact = signature_of(fact)  # an older file's functions: their signatures (the reports say more)
                if not fact:
                    continue
            if fact.startswith(IMPORTS):  # a dependency is what is not the project's own
                if local is None:  # (a big session's read files: 100k names nothing asks for, issue 17)
                    local = {g.path.rsplit("/", 1)[-1].split(".", 1)[0] for g in files}
                names = [n for n in fact[len(IMPORTS):].split(", ") if n not in local]
                if not names:
                    continue
                fact = IMPORTS + ", ".join(names)
            cost = count_text(fact) + 1
            if fact in shown_in and cost > _SHORT_FACT_TOKENS:
                same[shown_in[fact]] = same.get(shown_in[fact], 0) + 1
                continue
            if left is not None and cost > left:
                continue  # a shorter fact further on may still fit
            facts.append(fact)
            shown_in[fact] = f.path
            left = None if left is None else left - cost
        for other, n in same.items():
            facts.append(f"{n} more as in {other}")
        if facts:
            # a function said with its statements is a line of its own: a run of ` · ` joins
            # would hide where one ends
            short = [x for x in facts if len(x) <= LONG_FACT_CHARS]
            parts.append("holds: " + " · ".join(short) if short else "holds:")
            parts += ["  " + x for x in facts if len(x) > LONG_FACT_CHARS]
        if parts:
            out[f.path] = "\n".join("  " + p for p in parts)
    return out


def read_details(files: list[FileRef], budget: int | None, with_facts: list[FileRef] | None = None,
                 ascending: bool = False) -> dict[str, str]:
    """Path -> ``  defines: <facts>`` for files only read, newest first, within ``READ_SHARE``.
    ``with_facts``: those of ``files`` that hold facts, when the caller has them (``ascending``:
    in strictly ascending seq order; a ladder's ~50k-300k files read are not sorted per rung)."""
    # (within a budget a read file's functions are their signatures: its share holds more files so)
    if with_facts is None:
        with_facts = [f for f in files if f.facts]
    lines = file_details(with_facts, budget, READ_SHARE, MIN_READ_TOKENS,
                         function_files=0, notes=False, ascending=ascending)
    return {p: ln.replace("  holds: ", "  defines: ", 1) for p, ln in lines.items()}
