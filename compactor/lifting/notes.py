"""The agent's own one-line explanation of each file it changed.

"Created `src/train.py`: trains the MLP for 20 epochs and writes results/results.json" says
what the file is for in the agent's words, which no digest of the file's text can. Per file
the lifter keeps the most explanatory sentence of the agent's text that names it (by path or
file name): a sentence that says what the file does or holds counts, one that only announces
a read ("Let me check src/app.py"), asks, or is a tool's boilerplate does not; the latest that
counts wins. Plain rules, no model.
"""

from __future__ import annotations

import re

from compactor.lifting.narrative import cut_words, report_units
from compactor.lifting.state import FileNote, FileRef

NOTE_CHARS = 220
"""A note is clipped to this many characters (at a word boundary)."""
MIN_WORDS = 5
MIN_SCORE = 2
"""A sentence counts when it says what the file does or holds (an explaining verb), net of penalties."""

_PATH_TOKEN = re.compile(r"(?<![\w./-])(?:[\w.-]+/)*[\w-]+\.[A-Za-z]\w{0,7}\b")  # tried at word starts only
_DOT_LETTER = re.compile(r"\.[A-Za-z]")  # what every _PATH_TOKEN match holds: searched first, for less


def _names_file(text: str) -> bool:
    return _DOT_LETTER.search(text) is not None and _PATH_TOKEN.search(text) is not None
_EXPLAINS = re.compile(
    r"\b(?:creat|add|implement|defin|load|comput|calculat|handl|stor|return|contain|hold|generat|"
    r"train|display|render|draw|fetch|pars|validat|configur|export|expos|provid|wrap|read|write|"
    r"writ|sav|print|split|convert|call|check|decid|scor|map|build|serv|rout|track|list)\w*\b", re.I)
_DESCRIBES = re.compile(r"\b(?:that|which|so that|to|with|for|by|using|now)\b|[:—–-] ", re.I)
_LOOKS = re.compile(r"^(?:now,?\s+)?(?:let me|let's|i'll|i will|i need to|first,?\s+i'll)\s+"
                    r"(?:check|look|read|view|see|open|examine|inspect|run|verify|test|search|find)\b", re.I)


_BOILERPLATE = re.compile(r"SEARCH/REPLACE|I will provide the necessary|Here (?:is|are) the (?:updated|new)", re.I)


def _score(unit: str) -> int:
    score = 0
    if _EXPLAINS.search(unit):
        score += 2
    if _DESCRIBES.search(unit):
        score += 1
    if _LOOKS.search(unit):
        score -= 3
    if unit.rstrip().endswith(("?", ":")):
        score -= 3  # a question, or the lead-in of a list: not what the file is
    if _BOILERPLATE.search(unit):
        score -= 3
    return score


INTENT_KEY = ""
"""``FileNote.key`` of the agent's last words when they name no file (carried for its next write)."""
INTENT_CHARS = 160
INTENT_MIN_CHARS = 25
_SENTENCE_END = re.compile(r"(?<=[.!?。])\s+")


def _intent(text: str, names_file: bool | None = None) -> str:
    """What the agent says it is about to do, when its message names no file: the message itself
    when short, else its last sentence; "" for a question, a look-around, or a message naming a file.

    ``names_file``: ``_names_file(text)`` when the caller has it (the same answer as for the text
    with its whitespace collapsed: a path token holds no whitespace and is delimited alike by any)."""
    if len(text) < INTENT_MIN_CHARS:
        return ""  # (its words, collapsed, are shorter still: the common short line beside a call)
    flat = " ".join(text.split())
    if not flat or (_names_file(flat) if names_file is None else names_file) or "```" in text:
        return ""
    last = flat if len(flat) <= INTENT_CHARS else _SENTENCE_END.split(flat)[-1]
    if len(last) < INTENT_MIN_CHARS or len(last) > INTENT_CHARS or last.endswith(("?", ":")) or _LOOKS.search(last):
        return ""
    tail = _SENTENCE_END.split(last)[-1]
    if last.isascii() and (_score(tail) < MIN_SCORE or len(tail) < INTENT_MIN_CHARS):
        return ""  # English that says what it does ("Let's fix that" does not); other scripts as written
    return last


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


class NoteAcc:
    """Collects the agent's sentences that name files; ``annotate`` gives each changed file its note.

    A file's note is the latest sentence naming it that explains something (``MIN_SCORE``), from
    the agent's last message before the file was first changed onwards. That rule folds: a
    later compaction that starts from a checkpoint's state reaches the same notes as one pass
    over all events, given the checkpoint's notes and the mentions of its last agent message
    (``carry``, kept in the state).
    """

    def __init__(self, previous: dict[str, str] | None = None, carry: list[FileNote] | None = None) -> None:
        self.previous = dict(previous or {})
        self.latest: dict[str, tuple[int, str]] = {}  # file name or path -> (seq, sentence)
        self.window: dict[str, int] = {}  # path first changed in this pass -> earliest mention seq
        self.last_text_seq = 0
        self.last_mentions: list[FileNote] = []
        self.last_intent: tuple[int, str] | None = None  # the agent's words beside its next write
        for m in carry or []:
            if m.key == INTENT_KEY:
                self.last_intent = (m.seq, m.text)
            else:
                self.latest[m.key] = (m.seq, m.text)
            self.last_text_seq = max(self.last_text_seq, m.seq)
        self.last_mentions = list(carry or [])

    def on_text(self, seq: int, text: str, names: bool | None = None) -> None:
        """Fold an agent's message. ``names``: ``_names_file(text)`` when the caller knows it."""
        self.last_text_seq = seq
        self.last_mentions = []
        if names is None:
            names = _names_file(text)
        intent = _intent(text, names)
        self.last_intent = (seq, intent) if intent else None
        if intent:
            self.last_mentions.append(FileNote(key=INTENT_KEY, seq=seq, text=intent))
        if not names:
            return  # no file named: the common case, one search
        for unit in report_units(text):
            if "." not in unit:
                continue
            tokens = {m.group(0) for m in _PATH_TOKEN.finditer(unit)}
            if not tokens or len(unit.split()) < MIN_WORDS + len(tokens) - 1:
                continue
            if _score(unit) - (len(tokens) - 1) < MIN_SCORE:  # naming several files says less of each
                continue
            note = cut_words(" ".join(unit.split()), NOTE_CHARS)
            for key in sorted({k for tok in tokens for k in (tok, _base(tok))}):
                self.latest[key] = (seq, note)
                self.last_mentions.append(FileNote(key=key, seq=seq, text=note))

    def on_new_file(self, path: str) -> None:
        """``path`` is changed for the first time: mentions from the agent's last message count.

        When that message names no file, its own words (a short message, or its last sentence:
        "Batch-extracting the transcripts of all 50 videos.") are the file's note until a
        sentence naming the file says more."""
        self.window.setdefault(path, self.last_text_seq)
        if self.last_intent is not None and self.last_intent[0] == self.last_text_seq and not any(
                self.latest.get(k, (-1, ""))[0] >= self.last_text_seq for k in (path, _base(path))):
            self.latest[path] = self.last_intent

    def note_for(self, path: str) -> str:
        start = self.window.get(path, 0)
        cands = [c for c in (self.latest.get(path), self.latest.get(_base(path)))
                 if c is not None and c[0] >= start]
        if not cands:
            return self.previous.get(path, "")
        return max(cands)[1]

    def annotate(self, files: list[FileRef]) -> list[FileRef]:
        out = []
        for f in files:
            note = self.note_for(f.path)
            out.append(f.model_copy(update={"note": note}) if note != f.note else f)
        return out
