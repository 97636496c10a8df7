"""The one sanitizer between stored text and a terminal.

Why: conversation text (messages, tool input and output, file paths) is attacker-controlled: a
tool output can carry ``ESC ] 0 ; title BEL`` (retitle the window), ``ESC [ 2 J`` (clear the
screen), OSC 52 (write the clipboard) or bidi overrides that make a line read differently from
what it is. A human-readable command must show such bytes, not obey them. Every character a
terminal could act on is replaced by a visible escape: C0 controls except newline and tab (so
also ESC, BEL, CR, backspace), DEL, the C1 range (``\\x9b`` is a one-byte CSI), and the Unicode
line/paragraph separators and bidi controls. Everything else, including backslashes, is left
alone, so ordinary text reads as before.

``main`` routes stdout and stderr of every human-readable command through
:class:`TerminalStream`, so no ``print`` can bypass it; ``--json`` output is left unchanged
(JSON escapes C0 controls itself, and machines read it).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_NAMED = {"\r": "\\r", "\x1b": "\\e", "\x07": "\\a", "\x08": "\\b", "\x0b": "\\v", "\x0c": "\\f"}


def _escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    named = _NAMED.get(ch)
    if named:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def sanitize(text: str) -> str:
    """``text`` with every terminal control shown as a visible escape (``\\e``, ``\\x9b``,
    ``\\u202e``); newline and tab kept; a CRLF line end is read as a newline.

    Idempotent: sanitized text holds no control, so a second pass changes nothing.
    """
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_escape, text.replace("\r\n", "\n"))


class TerminalStream:
    """A text stream that sanitizes everything written to it before passing it on."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(sanitize(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, encoding, isatty, fileno, ...
        return getattr(self._inner, name)


@contextmanager
def sanitized_output(*, stdout: bool = True, stderr: bool = True) -> Iterator[None]:
    """Route ``sys.stdout`` / ``sys.stderr`` through :class:`TerminalStream` for the block."""
    saved_out, saved_err = sys.stdout, sys.stderr
    if stdout and not isinstance(sys.stdout, TerminalStream):
        sys.stdout = TerminalStream(sys.stdout)  # type: ignore[assignment]
    if stderr and not isinstance(sys.stderr, TerminalStream):
        sys.stderr = TerminalStream(sys.stderr)  # type: ignore[assignment]
    ours_out, ours_err = sys.stdout, sys.stderr
    try:
        yield
    finally:
        # put back what we wrapped; a stream the block replaced itself (devnull after a
        # broken pipe) stays
        if sys.stdout is ours_out:
            sys.stdout = saved_out
        if sys.stderr is ours_err:
            sys.stderr = saved_err
