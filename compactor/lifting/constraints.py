"""Which parts of a user message can state a rule: not questions, not pasted output.

A user's "What must I fix before submitting?" or a pasted error ("This transaction couldn't
be simulated …") matches the constraint keywords but is not a rule the agent must keep; kept
as a protected constraint it crowds the summary and misleads the reader. These filters are
used by ``compactor.lifting.lift.constraint_sentences``, which both the lifter and the validator
call, so the two always agree on what a constraint is.
"""

from __future__ import annotations

import re

_WH_RE = re.compile(r"^(?:what|why|how|which|who|whom|whose)\b(?!\s+(?:ever|soever)\b)", re.I)
_AUX_RE = re.compile(
    r"^(?:can|could|would|will|should|shall|must|do|does|did|may|might)\s+(?:you|i|we|they|he|she)\b"
    r"|^(?:is|are|was|were)\s+(?:it|this|that|there|they|you|we|i)\b",
    re.I,
)
_OUTPUT_LINE_RES = (
    re.compile(r"^\s*(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\[?\d\d:\d\d:\d\d)"),  # timestamped log
    re.compile(r"^\s*\[(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE|FATAL)\]", re.I),
    re.compile(r"^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b"),  # TypeError: ...
    re.compile(r"^\s*(?:error|warning|fatal|panic|ERROR|WARN|FAIL|FAILED)(?:\[\w+\])?:"),
    re.compile(r"^\s*(?:Error|Warning)\s*[:\[(]|^\s*(?:Caused by|Program log|Program \w+ (?:invoke|consumed|failed))\b"),
    re.compile(r"^\s*at \S+.*[(:]\d+"),  # JS stack frame
    re.compile(r"^\s*File \".*\", line \d+"),  # Python frame
    re.compile(r"^\s*Traceback \(most recent call last\)"),
    re.compile(r"^\s*(?:[{}\[\]],?|\"[^\"]+\"\s*:.*)\s*$"),  # JSON
    re.compile(r"^\s*(?:\$|>>>|PS>|❯|➜)\s"),  # a shell/REPL prompt
    re.compile(r"^\s*(?:import |from \S+ import |def |class |const |let |var |function |fn |pub |use |#include)"),
    re.compile(r"[;{]\s*$|^\s*}"),  # a code line
    re.compile(r"^\s*\d+\s*[|│]"),  # numbered listing
)


def is_question(sentence: str) -> bool:
    """A question, not a rule: ends with '?' or opens like one ("What must I ...")."""
    s = sentence.strip().strip("*_>\"'` ")
    return s.endswith("?") or bool(_WH_RE.match(s) or _AUX_RE.match(s))


def looks_like_output(line: str) -> bool:
    """A line that reads as tool/log/error output or code rather than the user's words."""
    return any(rx.search(line) for rx in _OUTPUT_LINE_RES)


def own_lines(text: str) -> list[str]:
    """The lines of a user message that are the user's own words.

    Dropped: fenced code blocks, lines that look like output, and whole paragraphs that open
    with output or are mostly output (a pasted log's prose lines are still the log's).
    """
    out: list[str] = []
    in_fence = False
    paragraph: list[str] = []

    def flush() -> None:
        if not paragraph:
            return
        flags = [looks_like_output(ln) for ln in paragraph]
        pasted = flags[0] and len(paragraph) > 1 or sum(flags) * 2 > len(paragraph) and len(paragraph) > 2
        if not pasted:
            out.extend(ln for ln, f in zip(paragraph, flags) if not f)
        paragraph.clear()

    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            flush()
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if not line.strip():
            flush()
            continue
        paragraph.append(line)
    flush()
    return out
