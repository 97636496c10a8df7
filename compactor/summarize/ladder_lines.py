"""A summary document's lines, and the ladder memo's lines whose text is made when read (issue 17).

The shrink ladder's rungs of a big state hold ~100k-300k command and file-read lines each
(``ladder_memo`` keeps them from rung to rung), of which a rung keeps a few hundred: the rest
are dropped by their sizes (``ladder_count``). A ``LazyLine`` keeps what its text is made from
(its item, already held by the state, and a key) and the text's length, not the text: the text
is made the first time something reads it (a line a rung keeps, or one a piece cut of the rung's
text falls near), and kept from then on. Most of them are not even made (round seventeen): the
memo keeps a line's numbers in columns (``ladder_memo``) and a rung's document holds the item
itself for a line ranked with most of its section, made a ``LazyLine`` only when read. At 300k events the texts were ~30 MB held through the
ladder, and a rung's whole text (~17 MB) was laid out only for ``piece_cut_extra``.

What a line says stays ``structured``'s: a ``LazyLine``'s subclass names the function that makes
its text (``make(item, key)``), the one that made it when the line was built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(slots=True)
class Line:
    """One item line of a summary document (``structured._Doc``)."""

    section: str
    text: str
    tier: int | None  # None: never dropped
    seq: int
    order: int = 0  # the section's rank << 32 | a place within it: sorts as the document does
    tokens: int = 0
    dropped: int = 0  # the ``_Doc.mark`` of the document whose ``_fit`` dropped it (0: none)
    detail: bool = False  # a detail of the line above: dropped silently, never counted as an item


_GET_TEXT = Line.text.__get__  # (the slot itself: ``LazyLine.text`` is a property over it)
_SET_TEXT = Line.text.__set__


class LazyLine(Line):
    """A ladder memo line: its ``text`` slot holds the item it is made from until it is read
    (``make(item, key)``), then the text. ``length``: the text's length (``ladder_count`` lays
    a rung's text out by lengths)."""

    __slots__ = ("key", "length")
    make: ClassVar[Callable[[Any, Any], str]]

    def __init__(self, section: str, item: Any, key: Any, length: int, tier: int | None, seq: int,
                 order: int, tokens: int) -> None:
        _SET_TEXT(self, item)
        self.section, self.tier, self.seq, self.order, self.tokens = section, tier, seq, order, tokens
        self.dropped = 0
        self.detail = False
        self.key = key
        self.length = length

    @property  # type: ignore[override]
    def text(self) -> str:
        text = _GET_TEXT(self)
        if type(text) is not str:
            text = self.make(text, self.key)
            _SET_TEXT(self, text)
        return text

    @text.setter
    def text(self, value: str) -> None:
        _SET_TEXT(self, value)
