"""Identifiers a summary states, and whether the session has them (DESIGN §7.9). Pure.

A summary may name only paths, URLs and tool ids the session holds: the events (covered range
and the tail the view shows), the previous checkpoint's summary and lifted state, or the
state's artifacts. ``summary_identifiers`` finds them in a summary line by line (each line's
answer remembered: the ladder's next candidate and the next compaction restate mostly the same
lines); ``unknown_identifiers`` searches the session for them, a whole word of the previous
checkpoint's text first, then the ``covered_text`` index, then every text. ``invariants``
turns what is left into ``unknown_identifier`` violations.
"""

from __future__ import annotations

import json
import re
import threading
from bisect import bisect_right
from collections import OrderedDict
from typing import Any, Iterable, Iterator, Sequence

from compactor.events import (
    ArtifactRefBlock,
    CompactionBlock,
    Event,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from compactor.records import Checkpoint

_URL_RE = re.compile(r"https?://[^\s<>\"'`)\]}|]+")
_TOOL_ID_RE = re.compile(r"\b(?:toolu|call|fc|tool)_[A-Za-z0-9_-]{6,}\b")
_PATH_RE = re.compile(r"(?<![\w/.:@-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]*[\w@+-]")
_FILE_RE = re.compile(
    r"(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:py|pyi|js|mjs|cjs|ts|tsx|jsx|json|jsonl|md|rst|txt|toml|yaml|"
    r"yml|rs|go|java|kt|c|h|cc|cpp|hpp|cs|rb|php|sh|bash|zsh|html|css|scss|cfg|ini|lock|sql|swift|"
    r"vue|svelte|proto|xml|csv|ipynb|env|gradle|mk)\b"
)
_TRUNC = ("…", "...")
_CJK_TAIL_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+$")
"""Korean, Japanese and Chinese particles written onto a path (``/home/user/tmp에``: "in
/home/user/tmp") are not part of it."""


_EXT_RE = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")


def _actionable_path(tok: str) -> bool:
    """A slash-joined token a reader could act on as a path, not prose.

    Absolute, home- and dot-relative paths count (``/usr/bin/x``, ``~/x``, ``./x``); a bare
    relative token counts only when its last part has a file extension (``src/app.py``).
    Dates (``4/18``), slash-joined words (``analyze/filters``, ``author/state/comments``,
    ``NONE/FIRST_TIME``), slash-joined file names (``a.py/b.py``) and ``read/write``-style
    prose are not identifiers: a summary that writes them invents nothing.
    """
    core = tok.strip("/")
    if "/" not in core:
        return False
    if tok.startswith(("/", "~/", "./", "../")):
        return any(c.isalpha() for c in core)
    parts = core.split("/")
    if all(_EXT_RE.search(p) for p in parts):
        return False  # ``pineconedb.py/upstashdb.py``: file names joined by a slash, "this or that"
    return bool(_EXT_RE.search(parts[-1]))


def identifiers(text: str) -> set[str]:
    """Paths, URLs and tool ids stated in ``text``."""
    return {tok for _, tok in _found(text, 0, len(text))}


def _found(text: str, start: int, stop: int) -> Iterator[tuple[int, str]]:
    """(start, identifier) of each match within ``text[start:stop]`` (the text around them seen)."""
    for rx in (_URL_RE, _TOOL_ID_RE, _PATH_RE, _FILE_RE):
        for m in rx.finditer(text, start, stop):
            tok = _CJK_TAIL_RE.sub("", m.group(0)).rstrip(".,;:!?'\")]}")
            end = m.end()
            if text[end:end + 1] == "…" or text[end:end + 3] == "...":
                continue  # cut short by the renderer: only a prefix is stated
            if len(tok) < 3 or any(t in tok for t in _TRUNC):
                continue
            if rx is _PATH_RE and not _actionable_path(tok):
                continue
            if rx is _PATH_RE and "://" in text[max(0, m.start() - 12):m.start() + 3]:
                continue  # part of a URL, checked as one
            yield m.start(), tok


_LINE_IDS: OrderedDict[tuple[str, str], frozenset[str]] = OrderedDict()
_LINE_IDS_LOCK = threading.Lock()
_LINE_IDS_MAX_CHARS = 4096


def summary_identifiers(text: str) -> set[str]:
    """``identifiers(text)``, line by line, each line's answer remembered (LRU).

    No identifier spans a line (none of the patterns matches a newline), and what decides a
    line's identifiers besides the line itself is at most the 12 characters before it (the
    look-back that drops a path inside a URL): the lookbehinds and word boundaries see the
    newline around the line, and the "cut short" look-ahead stops at it. So each line is keyed
    with those 12 characters and the union of the lines' answers is the whole text's. The
    shrink ladder's candidates, and the next compaction's, restate mostly the same lines of a
    summary that lists every file of the session (issue 17). Lines not remembered are searched
    one by one when they are few, else in one pass over the text (a search per line costs
    twice as much per line as one pass)."""
    lines = text.split("\n")
    starts: list[int] = []
    pos = 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    keys = [(text[max(0, p - 12):p], line) for p, line in zip(starts, lines)]
    with _LINE_IDS_LOCK:
        got: list[frozenset[str] | None] = [_LINE_IDS.get(k) for k in keys]
    cold = [i for i, g in enumerate(got) if g is None]
    if cold:
        if len(cold) * 2 > len(lines):
            per_line: list[set[str]] = [set() for _ in lines]
            for at, tok in _found(text, 0, len(text)):
                per_line[bisect_right(starts, at) - 1].add(tok)
            fresh = {i: frozenset(per_line[i]) for i in cold}
        else:
            fresh = {i: frozenset(tok for _, tok in _found(text, starts[i], starts[i] + len(lines[i])))
                     for i in cold}
        for i, ids in fresh.items():
            got[i] = ids
    with _LINE_IDS_LOCK:
        for i, k in enumerate(keys):
            if k in _LINE_IDS:
                _LINE_IDS.move_to_end(k)
            elif len(k[1]) <= _LINE_IDS_MAX_CHARS:  # (a long quote is searched, not kept)
                _LINE_IDS[k] = got[i]  # type: ignore[assignment]
        while len(_LINE_IDS) > 8192:
            _LINE_IDS.popitem(last=False)
    out: set[str] = set()
    for ids in got:
        out |= ids  # type: ignore[operator]
    return out


def _strings(obj: Any) -> list[str]:
    """Every string value in ``obj`` (JSON data), depth first, in order. Collected into one
    list by a plain recursion: nested generators re-yielded each string once per level, and
    a checkpoint's lifted state is ~14k values deep in dicts and lists after a few
    compactions (issue 17)."""
    out: list[str] = []
    _collect_strings(obj, out)
    return out


def _collect_strings(obj: Any, out: list[str]) -> None:
    if isinstance(obj, str):
        out.append(obj)
    elif isinstance(obj, (dict, list)):
        # (a string value appended here, not by a call of its own: most values of a lifted
        # state are strings, and its walk is a cost of every compaction after the first)
        add = out.append
        for v in (obj.values() if isinstance(obj, dict) else obj):
            if type(v) is str:
                add(v)
            elif isinstance(v, (str, dict, list)):
                _collect_strings(v, out)


_JSON = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps(x, ensure_ascii=False)`` without building an encoder per call."""


def _block_texts(b: Any) -> Iterable[str]:
    """Strings of one block an identifier may be quoted from (tool results: their id only;
    their bodies come from ``_result_texts``)."""
    if isinstance(b, TextBlock):
        yield b.text
    elif isinstance(b, ThinkingBlock):
        yield b.thinking
    elif isinstance(b, CompactionBlock):
        yield b.content
    elif isinstance(b, ToolUseBlock):
        yield b.name
        yield from _strings(b.input)
        yield _JSON.encode(b.input)
        yield b.id
    elif isinstance(b, ToolResultBlock):
        yield b.tool_use_id
    elif isinstance(b, ArtifactRefBlock):
        yield b.uri + " " + b.preview_head + " " + b.preview_tail


def _result_texts(b: ToolResultBlock) -> Iterable[str]:
    for c in b.content:
        if isinstance(c, TextBlock):
            yield c.text
        elif isinstance(c, ArtifactRefBlock):
            yield c.uri + " " + c.preview_head + " " + c.preview_tail


class _PrevText:
    """The previous checkpoint's summary and every string of its lifted state, joined
    (``text``), with the whitespace-separated words of it (``words``) and the answers of the
    substring searches made in it (``contains``); and the same of its summary alone
    (``summary_words``, ``in_summary``). Each made when first asked: the state is walked only
    for an identifier the summary lacks (a summary restates its state, and the next one
    restates it: the walk, which grows with the session, was a cost of every compaction after
    the first, issue 17)."""

    __slots__ = ("_prev", "_text", "_words", "_found", "_summary_words")

    def __init__(self, prev: Checkpoint) -> None:
        self._prev = prev
        self._text: str | None = None
        self._words: frozenset[str] | None = None
        self._found: dict[str, bool] = {}
        self._summary_words: frozenset[str] | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = "\n".join([self._prev.summary, *_strings(self._prev.state)])
        return self._text

    @property
    def words(self) -> frozenset[str]:
        if self._words is None:
            self._words = frozenset(self.text.split())
        return self._words

    @property
    def summary_words(self) -> frozenset[str]:
        """Words of the summary: a subset of ``words`` (the texts are joined by newlines)."""
        if self._summary_words is None:
            self._summary_words = frozenset(self._prev.summary.split())
        return self._summary_words

    def in_summary(self, ident: str) -> bool:
        """``ident`` in the summary: then ``contains(ident)`` (the summary is a part of the text)."""
        return ident in self._prev.summary

    def contains(self, ident: str) -> bool:
        got = self._found.get(ident)
        if got is None:
            got = self._found[ident] = ident in self.text
        return got


_PREV_TEXT: OrderedDict[int, tuple[Checkpoint, _PrevText]] = OrderedDict()
_PREV_TEXT_LOCK = threading.Lock()


def _prev_facts(prev: Checkpoint) -> _PrevText:
    """The previous checkpoint's searchable text (``_PrevText``).

    The state grows with the session (every command and file so far) and each summary
    candidate of a compaction is checked against the same previous checkpoint object, so the
    walk is memoized per object: keyed by identity, with the object held so that the key
    cannot be reused (checkpoints are frozen models).
    """
    with _PREV_TEXT_LOCK:
        hit = _PREV_TEXT.get(id(prev))
        if hit is not None and hit[0] is prev:
            _PREV_TEXT.move_to_end(id(prev))
            return hit[1]
    facts = _PrevText(prev)
    with _PREV_TEXT_LOCK:
        _PREV_TEXT[id(prev)] = (prev, facts)
        while len(_PREV_TEXT) > 16:
            _PREV_TEXT.popitem(last=False)
    return facts


def _prev_text(prev: Checkpoint) -> str:
    """The previous checkpoint's summary and every string of its lifted state, joined."""
    return _prev_facts(prev).text


def unknown_identifiers(
    events: Sequence[Event], ckpt: Checkpoint, prev: Checkpoint | None, index: Any = None
) -> list[str]:
    """The paths, URLs and tool ids the checkpoint's summary states that occur nowhere in the
    session: not in ``events`` (covered range and tail), the previous checkpoint's summary and
    state, nor the state's artifacts (DESIGN §7.9). ``index``: a ``covered_text.CoveredText``
    of ``events`` (the engine's, shared by every candidate of a compaction); same answer,
    without searching every event per candidate."""
    if ckpt.covers.empty or not ckpt.summary:
        return []
    idents = sorted(summary_identifiers(ckpt.summary))
    if index is not None:
        # Known when it occurs in the events, the previous checkpoint's text or the state's
        # artifact list. The summary mostly restates the previous state (every file and
        # command of the session so far), so a whole word of that text is known first, without
        # a search of the events; the searches in it are remembered for the next candidate.
        # None of these holds a newline (``occurs`` answers None for one: the full search), so
        # "in one of the texts" is "in the texts joined with newlines", as before.
        pt = _prev_facts(prev) if prev is not None else None
        arts = "\n".join(_strings(ckpt.state.get("artifacts", [])))
        left = []
        for ident in idents:
            if pt is not None and ident in pt.summary_words:
                continue
            if "\n" in ident:
                left.append(ident)  # (``occurs`` cannot tell) the full search below decides
                continue
            # Known when in any of these texts, so searched cheapest first (issue 17): the
            # events' calls, requests and answers; the previous summary, then its state (walked
            # only here); the artifact list; only then the tool results' bodies, whose words
            # ``occurs`` builds for it (most of the events' text: every later compaction of a
            # growing session built them for a path the previous summary spells inside a word).
            if index.occurs_in_calls(ident) or (pt is not None and (
                    pt.in_summary(ident) or ident in pt.words or pt.contains(ident))) \
                    or ident in arts or index.occurs(ident):
                continue
            left.append(ident)  # the full search below decides
        if not left:
            return []
        idents = left
    # Where an identifier may come from: the session's events (the covered range, and the tail
    # the view shows verbatim: a model that joins a directory listed in the covered range with a
    # file name the agent only spells out whole later states nothing the session never had),
    # the previous summary and state. Tool-result bodies are kept apart and searched last: they are most of the text (a
    # session's whole output) while identifiers are nearly always found in the calls, requests
    # and the previous state. Identifiers hold no whitespace, so none can span two parts and
    # searching the parts one after the other finds exactly what one joined haystack would.
    parts: list[str] = []
    bodies: list[str] = []
    for e in events:
        for b in e.blocks:
            parts.extend(_block_texts(b))
            if isinstance(b, ToolResultBlock):
                bodies.extend(_result_texts(b))
    if prev is not None:
        parts.append(_prev_text(prev))
    parts.extend(_strings(ckpt.state.get("artifacts", [])))
    hay = "\n".join(parts)
    bulk = "\n".join(bodies)
    flat: str | None = None  # whitespace-normalized haystack, built only when needed
    out = []
    for ident in idents:
        # rfind, not ``in``: the same answer, searched from the end, where the summary's
        # identifiers mostly are (the latest work) - ``in`` scanned most of a big session's
        # text for each of them (issue 17)
        if hay.rfind(ident) >= 0 or bulk.rfind(ident) >= 0:
            continue
        if flat is None:
            flat = " ".join(hay.split()) + "\n" + " ".join(bulk.split())
        if " ".join(ident.split()) in flat:
            continue
        out.append(ident)
    return out


__all__ = ["identifiers", "summary_identifiers", "unknown_identifiers"]
