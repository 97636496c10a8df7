"""What a function the agent wrote does, in one line: its signature and its key statements.

Blind readers asked "how was randomInRange() implemented", "how are the model and the training
loop implemented", "what does the sound code do and where is it called": a signature list
(``function playTick(progress)``) answers none of them. Per function in a written text (a whole
write or an edit's new lines) this module keeps one line, the signature then the statements
that say what it does, in source order, within ``BODY_CHARS``:

- what it returns, raises or throws;
- the settings and formulas it computes with (a number that is not 0 or 1);
- what it loops over and branches on (``for epoch in range(20)``, ``while (value >= maxValid)``);
- what it assigns from calls and the calls it makes with arguments.

Bare housekeeping calls (``loss.backward()``, ``model.train()``) are left out; when the statements
are longer than the room the least telling go first. An edit's lines that sit outside any function
(a branch added inside a loop) get one line per ``if`` with what each side does.

Every statement is copied from the text (whitespace collapsed, long ones clipped), so names and
values in the summary are the code's own. Plain rules, no model.
"""

from __future__ import annotations

import re

BODY_CHARS = 260
"""Room for a function's statements after its signature."""
STMT_CHARS = 60
"""One statement is clipped to this many characters."""
MIN_STATEMENTS = 2
"""A function with fewer telling statements keeps its plain signature."""
MAX_BRANCH_LINES = 3

_NUMBER = re.compile(r"(?<![\w\[.:])-?(?:\d+\.\d+|[2-9]|\d{2,})(?![\w\]])")
_RETURN = re.compile(r"^(?:return|raise|throw|yield)\b")
_HEADER = re.compile(r"^(?:for|while|if|elif|else if|\}\s*while|switch|case)\b")
_CALL = re.compile(r"[\w$\])]\s*\(")
_HOUSEKEEPING = re.compile(r"^super\(|^[\w$.]+\.(?:connect|start|stop|preventDefault|focus|blur|zero_grad|backward|"
                           r"train|eval|step|close|flush)\(")
_OWN_CALL = re.compile(r"^(?:await\s+)?[A-Za-z_$][\w$]*\(")
_ASSIGN = re.compile(r"^(?:const|let|var|final|auto)?\s*([\w$.\[\], ]+?)\s*(?:[-+*/%|&]?=)(?!=)\s*(.+)$")
_JS_COMMENT = re.compile(r"(?<![:\"'\\])//[^\n]*|/\*.*?\*/", re.S)
_PY_COMMENT = re.compile(r"(?<![\"'])\s#[^\n]*$|^\s*#[^\n]*$", re.M)
_DOCSTRING = re.compile(r'(?s)("""|\'\'\').*?\1')
_NO_ARGS = re.compile(r"^(?:new\s+)?[\w$]+\.[\w$.]+\(\s*\)$")  # a method call without arguments
_TRIVIAL_VALUE = re.compile(r"^(?:\[\]|\{\}|\(\)|0|1|-1|None|null|undefined|true|false|True|False|''|\"\")$")


def _flat(text: str, n: int) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 1].rstrip(" ,;(") + "…"


def _score(stmt: str) -> int:
    """How much one statement tells of what a function does (0: leave it out)."""
    if _RETURN.match(stmt):
        return 5
    if stmt.endswith(("(", "[", "{", ",")) or stmt.startswith("with "):
        return 1  # the head of a statement spread over lines, or a context manager: says little alone
    if _HOUSEKEEPING.search(stmt):
        return 0
    if _NUMBER.search(stmt):
        return 4
    if _HEADER.match(stmt):
        return 3
    m = _ASSIGN.match(stmt)
    if m:
        value = m.group(2).strip().rstrip(";")
        if _TRIVIAL_VALUE.match(value):
            return 0
        if _NO_ARGS.search(value):
            return 1  # ``osc = audioCtx.createOscillator()``: a handle, not a decision
        return 3 if _CALL.search(value) or re.search(r"[-+*/%]", value) else 1
    if _OWN_CALL.match(stmt):
        return 3  # a call of a plain function name (the project's own): how the code is wired
    if _CALL.search(stmt):
        return 0 if _NO_ARGS.match(stmt) else 2
    return 0


def _split_js(line: str) -> list[str]:
    """A JS line split at the ``;`` outside parentheses (a ``for (;;)`` header stays whole)."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(line):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == ";" and depth <= 0:
            out.append(line[start:i])
            start = i + 1
    out.append(line[start:])
    return out


def _statements(body: str, kind: str) -> list[str]:
    """The body's statements, one per line (JS lines split at ``;``), comments and braces gone."""
    # (each substitution only where its pattern can match: a comment mark, a triple quote)
    if kind == "js":
        body = _JS_COMMENT.sub("", body) if "/" in body else body
    else:
        body = _PY_COMMENT.sub("", body) if "#" in body else body
        if '"""' in body or "\'\'\'" in body:
            body = _DOCSTRING.sub("", body)  # docstrings
    out: list[str] = []
    for raw in body.splitlines():
        parts = _split_js(raw) if kind == "js" else [raw]
        for p in parts:
            s = p.strip().strip("{}").strip()
            if kind == "js":
                s = re.sub(r"^(?:const|let|var)\s+", "", s)
                s = re.sub(r"^\}\s*", "", s).rstrip("{").strip()
                if s in ("do", "else", "try", ")", "})", "});", "]", "];"):
                    continue
            else:
                s = s.rstrip(":").strip()
                if s in ("else", "try", "finally", ")", "]", "}"):
                    continue
            if len(s) >= 3:
                out.append(s)
    return out


def _pick(stmts: list[str], room: int) -> list[str]:
    """The most telling statements that fit in ``room`` characters, in source order."""
    scored = [(s, i, _flat(st, STMT_CHARS)) for i, st in enumerate(stmts) if (s := _score(st))]
    seen: set[str] = set()
    uniq = []
    for s, i, st in scored:
        if st not in seen:
            seen.add(st)
            uniq.append((s, i, st))
    keep: list[tuple[int, int, str]] = []
    used = 0
    floor = 0  # once a statement did not fit, nothing less telling takes the room it left
    for s, i, st in sorted(uniq, key=lambda t: (-t[0], t[1])):
        if s < floor:
            break
        if used + len(st) + 2 <= room:
            keep.append((s, i, st))
            used += len(st) + 2
        else:
            floor = s
    return [st for _, _, st in sorted(keep, key=lambda t: t[1])]


def closing(text: str, start: int, quotes: str = "\"'`", comment: str = "", span: int = 20_000) -> int:
    """Index of the bracket that closes the one at ``text[start]`` (strings in ``quotes`` and
    ``comment``-to-end-of-line skipped), -1 when it does not close within ``span`` characters."""
    depth, i, quote = 0, start, ""
    limit = min(len(text), start + span)
    while i < limit:
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in quotes:
            quote = c
        elif comment and c == comment[0] and text.startswith(comment, i):
            nl = text.find("\n", i)
            i = limit if nl < 0 else nl
            continue
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _js_body(text: str, start: int) -> tuple[int, int] | None:
    """(start, end) of the brace-delimited body opening at or after ``start`` (strings skipped)."""
    i = text.find("{", start, start + 200)
    if i < 0 or text[start:i].strip():
        return None  # (an arrow function returning an expression: no block of its own)
    j = closing(text, i, comment="//")  # (an apostrophe in a comment opens no string)
    return (i + 1, j) if j >= 0 else None


def _py_body(text: str, line_start: int, line_end: int) -> tuple[int, int]:
    """(start, end) of the indented block after the ``def`` line spanning ``line_start:line_end``."""
    head = text[line_start:line_end]
    indent = len(head) - len(head.lstrip())
    nl = text.find("\n", line_end)
    if nl < 0:
        return len(text), len(text)
    pos = nl + 1
    end = pos
    for ln in text[pos:].splitlines(keepends=True):
        if ln.strip() and len(ln) - len(ln.lstrip()) <= indent:
            break
        end += len(ln)
    return pos, end


def function_lines(kind: str, text: str, sigs: list[tuple[int, int, str]]) -> dict[int, tuple[str, tuple[int, int]]]:
    """Signature position -> (``sig: stmt; stmt; …``, body span) for each function whose body
    holds at least ``MIN_STATEMENTS`` telling statements. ``sigs``: (start, end, signature)."""
    out: dict[int, tuple[str, tuple[int, int]]] = {}
    for start, end, sig in sigs:
        if sig.lstrip().startswith(("class ", "export class", "interface", "struct", "enum", "trait", "type ")):
            continue
        span = _js_body(text, end) if kind == "js" else _py_body(text, start, end) if kind == "py" else None
        if span is None or span[1] <= span[0]:
            continue
        body = text[span[0]:span[1]]
        if kind == "py" and len(body.splitlines()) < MIN_STATEMENTS:
            continue  # (a Python statement is one line at most: too few lines, too few statements)
        picked = _pick(_statements(body, kind), BODY_CHARS)
        if len(picked) >= MIN_STATEMENTS:
            out[start] = (f"{sig}: " + "; ".join(picked), span)
    return out


_JS_IF = re.compile(r"^[ \t]*(?:\}\s*)?(if\s*\(.{1,80}?\))\s*\{[ \t]*$", re.M)
_ELSE_AT = re.compile(r"\}\s*else\s*\{")


def branch_lines(text: str, taken: list[tuple[int, int]]) -> list[tuple[int, str]]:
    """(position, ``if (cond): stmts … else: stmts``) for the JS branches of an edit's lines that
    lie outside every function body in ``taken``: what the edit wired in where."""
    out: list[tuple[int, str]] = []
    for m in _JS_IF.finditer(text):
        if any(a <= m.start() < b for a, b in taken) or len(out) >= MAX_BRANCH_LINES:
            continue
        span = _js_body(text, m.end() - 1)
        if span is None:
            continue
        then = _pick(_statements(text[span[0]:span[1]], "js"), BODY_CHARS // 2)
        line = f"{m.group(1)}: " + "; ".join(then)
        # span[1] is the closing brace: an ``} else {`` right there is the other side
        em = _ELSE_AT.match(text, span[1])
        other = _js_body(text, em.end() - 1) if em else None
        if other is not None:
            alt = _pick(_statements(text[other[0]:other[1]], "js"), BODY_CHARS // 2)
            if alt:
                line += " · else: " + "; ".join(alt)
        if then:
            out.append((m.start(), line))
    return out
