"""What the changed files hold, as detail lines of the structured summary, within a budget share.

Per changed file, newest first: the agent's own note on it and the facts its text defines
(``compactor.lifting.content``), within ``ARTIFACT_SHARE`` of the summary budget. Split out of
``compactor.summarize.structured`` (which renders them under "Files changed") to keep it small.
"""

from __future__ import annotations

from compactor.lifting.state import FileRef
from compactor.tokens import count_text

_SHORT_FACT_TOKENS = 10
"""A fact this short (``uses data/x.csv``) is said again for every file that has it; a longer one
a newer file already says (a copied header, settings) is counted there instead."""
ARTIFACT_SHARE = 0.3
"""Share of the summary budget for what changed files hold (notes and facts), newest files first."""
MIN_ARTIFACT_TOKENS = 80
IMPORTS = "imports: "
READ_SHARE = 0.1
"""Share of the summary budget for what files the agent only read define (a setup.py's extras, a base
class's methods): the facts the work built on, newest files first; changed files come first."""
MIN_READ_TOKENS = 40


def file_details(files: list[FileRef], budget: int | None, share: float = ARTIFACT_SHARE,
                 floor: int = MIN_ARTIFACT_TOKENS, *, notes: bool = True) -> dict[str, str]:
    """Path -> ``  the agent: <its note>`` / ``  holds: <facts>`` lines for changed files, newest first,
    within ``share`` of the budget (everything when ``budget`` is None); ``notes=False``: facts only."""
    left = None if budget is None else max(floor, int(budget * share))
    out: dict[str, str] = {}
    shown_in: dict[str, str] = {}  # fact -> the (newer) file whose line already says it
    local = {f.path.rsplit("/", 1)[-1].split(".", 1)[0] for f in files}  # the project's own modules
    for f in sorted(files, key=lambda x: x.seq, reverse=True):
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
            if fact.startswith(IMPORTS):  # a dependency is what is not the project's own
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
            parts.append("holds: " + " · ".join(facts))
        if parts:
            out[f.path] = "\n".join("  " + p for p in parts)
    return out


def read_details(files: list[FileRef], budget: int | None) -> dict[str, str]:
    """Path -> ``  defines: <facts>`` for files only read, newest first, within ``READ_SHARE``."""
    lines = file_details([f for f in files if f.facts], budget, READ_SHARE, MIN_READ_TOKENS, notes=False)
    return {p: ln.replace("  holds: ", "  defines: ", 1) for p, ln in lines.items()}
