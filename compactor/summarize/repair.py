"""Repair a summary candidate item by item instead of abandoning it.

The identifier check (DESIGN §7.9) rejects a summary that states a path, URL or id the covered
range does not contain. One bad item (a path mangled from a shell command, a model's slip)
must not cost the whole compaction: the lines that state it are dropped, a note says how many
left (never what they said: the note may reach records and Temporal history), and the
candidate is validated again. Lines of the protected sections (goal, constraints, unknown
outcomes, latest request) quote the log verbatim and are never dropped here.
"""

from __future__ import annotations

from typing import Any, Iterable

from compactor.summarize.structured import PROTECTED_SECTIONS

REPAIR_NOTE = "- ({n} item(s) left out: they named a path or id not found in the covered log)"


def _hits(line: str, idents: Iterable[str]) -> bool:
    return any(i in line for i in idents)


def drop_identifier_lines(summary: str, idents: set[str]) -> tuple[str, int]:
    """``summary`` without the bullet items (with their continuation lines) that state one of
    ``idents``, outside the protected sections; returns the text and how many items went."""
    if not idents:
        return summary, 0
    out: list[str] = []
    section = ""
    dropping = False
    dropped_here = 0
    total = 0

    def close_section() -> None:
        nonlocal dropped_here
        if dropped_here:
            while out and not out[-1].strip():
                out.pop()
            out.append(REPAIR_NOTE.format(n=dropped_here))
            out.append("")
        dropped_here = 0

    for line in summary.split("\n"):
        if line.startswith("## "):
            close_section()
            section = line[3:].strip()
            dropping = False
            out.append(line)
            continue
        if dropping and line.startswith("  ") and not line.startswith("  - "):
            continue  # continuation of a dropped item
        dropping = False
        if line.startswith("- ") and section not in PROTECTED_SECTIONS and _hits(line, idents):
            dropping = True
            dropped_here += 1
            total += 1
            continue
        out.append(line)
    close_section()
    text = "\n".join(out).rstrip("\n")
    return text, total


def drop_identifier_items(sections: dict[str, Any], idents: set[str]) -> dict[str, Any]:
    """The structured ``sections`` (name -> item lines) with the same items dropped."""
    out: dict[str, Any] = {}
    for name, items in sections.items():
        if name in PROTECTED_SECTIONS or not isinstance(items, list):
            out[name] = items
            continue
        out[name] = [i for i in items if not (isinstance(i, str) and _hits(i, idents))]
    return out
