"""The agent's own account: its closing report of each user turn and the reasons it gave.

Blind readers of our summaries could not answer questions such as "why do pages go under
src/pages?" or "what did the review score?" although plain truncation could: the newest
messages carried the agent's explanations, and a lifted state of requests, files and commands
drops them. This module keeps them, deterministically:

* **Turn outcomes.** The last assistant text before the next genuine user request is the
  model's own report of that turn: what it did, why, and what is left. One per turn, newest
  wins when a later compaction sees the same turn continue; clipped to whole sentences,
  preferring the ones that say what was done, what is left, and the numbers.
* **Reasons and rules.** Sentences that give a reason (because, so that, instead of, since,
  therefore, in order to ...) or state a formula, threshold or number the agent relied on.
* **Findings.** What the agent concluded from a tool's result, in its own words, inside a turn:
  "the injection did not work", "the file the traceback points at is ...", "the code now
  returns ...". A session that is one long turn (SWE-agent, CTF, research) has one closing
  report and carries its findings here. Only assistant text that follows a tool result counts
  (tool output itself is never an assistant's words); plans ("Let's try ..."), questions and
  sentences already kept as reasons are left out.

Pure and offline like ``compactor.lifting.lift``; it does not import ``lift`` so ``lift`` can fold
it in without an import cycle. Both lists are bounded (newest kept) so the state stays small
across many compactions.
"""

from __future__ import annotations

import re
from operator import attrgetter

from pydantic import BaseModel, ConfigDict, Field

from compactor.tokens import count_text

_SEQ = attrgetter("seq")
MAX_OUTCOMES = 12
"""Turn outcomes kept in the state (newest)."""
MAX_OUTCOME_CHARS = 1_500
"""A closing report is clipped to this many characters (whole sentences) in the state."""
MAX_REASONS = 30
"""Reason and rule sentences kept in the state (newest)."""
MIN_REASON_CHARS = 20
MAX_REASON_CHARS = 400
MAX_FINDINGS = 24
"""Findings kept in the state (newest)."""
MAX_FINDING_CHARS = 240
"""A finding is clipped to this many characters (at a word)."""
ELLIPSIS = "…"


class TurnOutcome(BaseModel):
    """The agent's closing message of one user turn, clipped to its most telling sentences."""

    model_config = ConfigDict(frozen=True)

    seq: int = Field(description="Seq of the assistant message that closed the turn.")
    request_seq: int = Field(default=0, description="Seq of the user request it answers (0: none).")
    text: str = Field(description="The report, whole sentences; ' … ' marks left-out sentences.")
    clipped: bool = Field(default=False, description="True when sentences were left out.")


class Reason(BaseModel):
    """A sentence in which the agent gave a reason or stated a rule, formula or number."""

    model_config = ConfigDict(frozen=True)

    seq: int
    text: str


class Finding(BaseModel):
    """The agent's own conclusion after a tool result: a result or a cause it stated."""

    model_config = ConfigDict(frozen=True)

    seq: int = Field(description="Seq of the assistant message that stated it.")
    text: str = Field(description="One or two sentences, verbatim, clipped at a word.")


# --- sentences --------------------------------------------------------------------------------

# A sentence end, or one glued to the next ("returns a static message.Next, I'll check": some
# importers join a message's lines); an identifier such as pydantic.BaseModel is not one.
_GAP_RE = re.compile(r"(?<=[.!?])[ \t]+(?=[\"'(\[`*_A-Z0-9])")
_GLUED_GAP_RE = re.compile(r"(?<=[.!?])[ \t]+(?=[\"'(\[`*_A-Z0-9])|(?<=[a-z]{2}[.!?])(?=[A-Z][a-z]+[\s,'\u2019])")
# One search per message (most have no glued sentence); it starts at the rare [.!?]: 3x faster.
_GLUED_RE = re.compile(r"[.!?](?<=[a-z]{2}[.!?])[A-Z][a-z]+[\s,'\u2019]")
_ABBREV_RE = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|approx|incl|Mr|Mrs|Dr|No)\.|\b[A-Z]\.)$")
_MARKER_RE = re.compile(r"^\s*(?:[-*+•]\s+|\d{1,3}[.)]\s+|>\s*)+")
_HEADING_RE = re.compile(r"^\s*#{1,6}\s+")
_TABLE_RULE_RE = re.compile(r"^\s*\|?[\s:|-]+\|[\s:|-]*$")
_HRULE_RE = re.compile(r"^\s*(?:[-*_]\s*){3,}$")
_EMPHASIS_ONLY_RE = re.compile(r"^\*\*[^*]+\*\*:?$")
# Bold markers only around words with no slash, so a glob such as src/**/*.py stays intact.
_BOLD_RE = re.compile(r"(?<![\w/*])\*\*([^*/\n]+?)\*\*(?![\w/*])")
_WORDISH_RE = re.compile(r"\w{3}")


def report_units(text: str) -> list[str]:
    """Sentences and list items of an assistant message, markdown markers stripped.

    Code blocks, bare headings and table rules are left out: they are long or say nothing
    on their own. Text is otherwise verbatim, so every path stays whole.
    """
    out: list[str] = []
    in_code = False
    gap_re = _GLUED_GAP_RE if _GLUED_RE.search(text) else _GAP_RE
    for raw in text.splitlines():
        if raw.lstrip().startswith("```"):
            in_code = not in_code
            continue
        # (each pattern only where it can match: a rule holds a ``|`` or starts with ``-*_``,
        # a heading with ``#``, a list marker with ``-*+•>`` or a digit, bold holds ``**``)
        head = raw.lstrip()[:1]
        if in_code or not head or "|" in raw and _TABLE_RULE_RE.match(raw) or (
                head in "-*_" and _HRULE_RE.match(raw)):
            continue
        if head == "#" and _HEADING_RE.match(raw):
            continue  # a heading is a label, not a statement
        line = (_MARKER_RE.sub("", raw) if head in "-*+•>" or head.isdigit() else raw).strip()
        if not line or line.startswith("**") and _EMPHASIS_ONLY_RE.match(line):
            continue
        line = _BOLD_RE.sub(r"\1", line) if "**" in line else line
        if line.startswith("|"):
            out.append(line.strip("| "))  # a table row is one statement
            continue
        start = 0
        for cut in [m.start() for m in gap_re.finditer(line)] + [len(line)]:
            piece = line[start:cut].strip()
            if cut != len(line) and (_ABBREV_RE.search(piece) or not _WORDISH_RE.search(piece)):
                continue  # "e.g. X" or "2. X": not a sentence end
            if piece:
                out.append(piece)
            start = cut
    return out


_DONE_RE = re.compile(
    r"\b(done|fixed|added|implemented|created|updated|changed|removed|replaced|renamed|moved|"
    r"wrote|written|refactored|pass(?:es|ed)?|fail(?:s|ed)?|works|verified|confirmed|"
    r"installed|deployed|committed|built|ran|result|scored?|summary|complete[d]?|finished)\b",
    re.IGNORECASE,
)
_LEFT_RE = re.compile(
    r"\b(remaining|left|todo|to do|next|still|pending|not yet|need(?:s)? to|should|blocked|"
    r"follow-?up|missing|open question|would you like|want me to|unresolved|known issue)\b",
    re.IGNORECASE,
)
_DIGIT_RE = re.compile(r"\d")


_FILLER_RE = re.compile(
    r"^(?:now,? )?(?:i have|i've got|we have) (?:everything|all) (?:i|we) need\b|^(?:that's it|great|perfect|"
    r"alright|ok(?:ay)?|got it|let me (?:compile|put together|summari[sz]e) (?:this|that|everything))[.!:]?$",
    re.IGNORECASE)


_YOU_RE = re.compile(r"\b(?:you|your)\b", re.I)  # "you're", "you've" match by their "you"
_NONE_RE = re.compile(r"\b(?:none|neither)\b|\bno \w+ (?:\w+ )?(?:has|have|had|was|were|is|are)\b", re.I)


def _score(unit: str, first: bool) -> int:
    probe = unit.replace("\u2019", "'")
    if _FILLER_RE.match(probe.strip()):
        return -5  # "That's it." / "Now I have everything I need.": last, whatever its place
    score = 3 if first else 0
    if _DONE_RE.search(probe):
        score += 2
    if _LEFT_RE.search(probe) or (probe.rstrip().endswith("?") and _YOU_RE.search(probe)):
        score += 3  # (a question to the user is what is still open: "What's your background?")
    if _DIGIT_RE.search(probe):
        score += 1
    if is_reason(probe):
        score += 1
    if _NONE_RE.search(probe):
        score += 1  # what the agent ruled out ("none reached the accelerator", "no project won"): a verdict
    return score


def cut_words(text: str, max_chars: int) -> str:
    """``text`` cut at a word boundary to at most ``max_chars`` (ellipsis included).

    The ellipsis follows the last whole word, so an identifier is never stated half: the
    identifier checker ignores a token directly followed by one.
    """
    if len(text) <= max_chars:
        return text
    head = text[: max(0, max_chars - 1)]
    space = head.rfind(" ")
    if space > max_chars // 3:
        head = head[:space]
    return head.rstrip(" ,;:") + ELLIPSIS


_BOILERPLATE_RE = re.compile(
    r"^(?:here (?:is|are) the (?:\*?search/replace\*? blocks?|updated|changes)\b[^.]*[:.]?$"
    r"|please confirm if you would like to proceed\b|let me know if you (?:would like|want|need)\b"
    r"|would you like me to proceed with (?:these|this) changes?\b)", re.IGNORECASE)
_PATH_ONLY_RE = re.compile(r"^(?:`?[\w.~-]*[/.][\w./~-]*`?\s*)+$")


def _says_something(unit: str) -> bool:
    """False for a tool's boilerplate ("Here are the *SEARCH/REPLACE* blocks:", "Please confirm
    if you would like to proceed with these changes.") and a line of bare paths (the file names
    aider prints above its edit blocks): a report clipped to its telling sentences skips them."""
    u = unit.strip().replace("*", "")
    return not (_BOILERPLATE_RE.match(u) or _PATH_ONLY_RE.match(u))


def _ranked(text: str) -> tuple[list[str], list[int]]:
    """``text``'s units and their indexes, most telling first (independent of any length)."""
    units = report_units(text)
    telling = [u for u in units if _says_something(u)]
    units = telling or units
    return units, sorted(range(len(units)), key=lambda i: (-_score(units[i], i == 0), i))


def clip_report(text: str, max_chars: int, ranked: tuple[list[str], list[int]] | None = None
                ) -> tuple[str, bool]:
    """The most telling whole sentences of ``text`` within ``max_chars``, in their order.

    The first sentence (usually the headline) and sentences saying what was done, what is
    left, a number or a reason are preferred; ' … ' marks where sentences were left out.
    Returns the text and whether anything was left out. ``ranked``: ``_ranked(text)``, when
    the caller clips the same text to several lengths.
    """
    units, order = ranked if ranked is not None else _ranked(text)
    joined = " ".join(units)
    if len(joined) <= max_chars:
        return joined, False
    chosen: set[int] = set()
    used = 0
    for i in order:
        cost = len(units[i]) + 3
        if _score(units[i], i == 0) < 0:
            break  # filler: never worth the room when something had to be left out
        if used + cost <= max_chars:
            chosen.add(i)
            used += cost
    if not chosen:
        return cut_words(units[order[0]], max_chars), True
    parts: list[str] = []
    last = -1
    for i in sorted(chosen):
        if parts and i != last + 1:
            parts.append(ELLIPSIS)
        parts.append(units[i])
        last = i
    if last != len(units) - 1:
        parts.append(ELLIPSIS)
    return " ".join(parts), True


# --- reasons ----------------------------------------------------------------------------------

_REASON_RE = re.compile(
    r"\b(because|so that|instead of|rather than|since|therefore|thus|hence|decided|the reason|"
    r"in order to|due to|which means|this means|that means|otherwise|as a result|that's why|"
    r"to avoid|to ensure|to keep|so we|so I|so it|so the|not \w+(?: \w+)?, but)\b"
    r"|,\s*so\b",
    re.IGNORECASE,
)
_RULE_RE = re.compile(
    r"[=≤≥×%]|<=|>=|\b\d+(?:\.\d+)?\s*/\s*\d+\b|\b\d+\s*x\b"
    r"|\b(threshold|limit|budget|ratio|rate|score[ds]?|max(?:imum)?|min(?:imum)?|at most|"
    r"at least|formula|per|tokens?|ms|seconds?|minutes?|[KMG]i?B|percent|total|out of|"
    r"version|v\d)\b",
    re.IGNORECASE,
)


# Every match of _REASON_RE (of _RULE_RE) holds one of these, lowercased: an ASCII sentence
# holding none cannot match, and the substring checks cost a fraction of the case-insensitive
# searches of the alternations (issue 17)
_REASON_NEEDLES = (",", "because", "so that", "instead of", "rather than", "since", "therefore", "thus",
                   "hence", "decided", "the reason", "in order to", "due to", "means", "otherwise",
                   "as a result", "that's why", "to avoid", "to ensure", "to keep", "so we", "so i", "so it",
                   "so the")
_RULE_NEEDLES = ("=", "%", "/", "x", "threshold", "limit", "budget", "ratio", "rate", "score", "max", "min",
                 "at most", "at least", "formula", "per", "token", "ms", "second", "minute", "kb", "mb", "gb",
                 "kib", "mib", "gib", "percent", "total", "out of", "version", "v")
_REASON_PRE = re.compile("|".join(map(re.escape, _REASON_NEEDLES)))  # (one search of the literals)
_RULE_PRE = re.compile("|".join(map(re.escape, _RULE_NEEDLES)))


def is_reason(sentence: str) -> bool:
    """True when ``sentence`` gives a reason or states a rule/number the agent relies on."""
    probe = sentence.replace("\u2019", "'")
    if not probe.isascii():  # (beyond ASCII a case-insensitive match need not survive str.lower)
        if _REASON_RE.search(probe):
            return True
        return bool(_DIGIT_RE.search(probe) and _RULE_RE.search(probe))
    low = probe.lower()
    if _REASON_PRE.search(low) and _REASON_RE.search(probe):
        return True
    return bool(_DIGIT_RE.search(probe) and _RULE_PRE.search(low) and _RULE_RE.search(probe))


_SHORT_TEXT = 200
"""A message this short is searched whole before it is split (``_may_hold_reasons``)."""


def _may_hold_reasons(text: str) -> bool:
    """False only when no unit of ``text`` can be a reason sentence, so it need not be split (issue
    17: most of an agent's messages are a short line beside a call). A unit is at least
    ``MIN_REASON_CHARS`` long, and in an ASCII text without ``**`` every unit is a piece of the text
    whose edges are word boundaries there too (cut at whitespace, a line end, a list marker or a
    table's ``|``), so a reason or rule match in a unit is one in the text. Longer texts are split
    without the whole-text search: they mostly hold a reason anyway."""
    if len(text) < MIN_REASON_CHARS:
        return False
    if len(text) > _SHORT_TEXT or not text.isascii() or "**" in text:
        return True
    low = text.lower()
    if _REASON_PRE.search(low) and _REASON_RE.search(text):
        return True
    return bool(_DIGIT_RE.search(text) and _RULE_PRE.search(low) and _RULE_RE.search(text))


def reason_sentences(text: str, units: list[str] | None = None) -> list[str]:
    """The reason and rule sentences of an assistant message, verbatim, questions left out.

    ``units``: ``report_units(text)`` when the caller has them already."""
    out: list[str] = []
    for s in report_units(text) if units is None else units:
        if not MIN_REASON_CHARS <= len(s) <= MAX_REASON_CHARS or s.endswith("?"):
            continue
        if is_reason(s):
            out.append(s)
    return out


# --- findings ---------------------------------------------------------------------------------

# A result or a cause the agent states: what a command showed, what failed or works, where an
# error comes from, what the code now does. One search per message first (most messages of a
# long session are plans or code): the per-sentence search runs only on messages that hit.
_FINDING_RE = re.compile(
    r"\b(?:shows?|showed|shown|returns?|returned|fail(?:s|ed|ing)?|did not|didn['\u2019]t|does not|"
    r"doesn['\u2019]t|do not|don['\u2019]t|is not|isn['\u2019]t|are not|aren['\u2019]t|was not|"
    r"wasn['\u2019]t|were not|cannot|can['\u2019]t|no longer|works?|worked|confirm(?:s|ed)?|found|because|"
    r"means|appears?|seems?|empty|points? (?:to|at)|pointed|indicat(?:es|ed|ing)|suggest(?:s|ed|ing)|"
    r"yield(?:s|ed)?|turns? out|succe(?:eded|ssful(?:ly)?)|exists?|truncated|declined|denied|rejected|"
    r"caused|the (?:cause|problem|issue|bug) is|reproduc(?:es|ed)|rais(?:es|ed)|now (?:handles|returns|"
    r"raises|accepts|uses|checks|includes|skips|only|passes|prints)|only (?:if|when))\b",
)  # searched in lowercased text: a case-insensitive search of this alternation costs 2.5x
# A plan or an announcement, not a conclusion: "Let's try ...", "I will now run ...".
_PLAN_RE = re.compile(
    r"^(?:(?:now|next|first|then|so|ok(?:ay)?|great|finally)[,!]?\s+)*(?:let me|let's|lets|i'll|i will|"
    r"i need to|i am going to|i'm going to|we will|we'll|we need to|we should|we can|to (?:test|check|"
    r"verify|see|fix|find|confirm)|before|in order to|the next step)\b", re.IGNORECASE)
_FOLLOWER_RE = re.compile(r"^(?:this|that|it|which)\b", re.IGNORECASE)
MIN_FINDING_CHARS = 25
MAX_FINDINGS_PER_MESSAGE = 4
"""A long message (a research answer, a review) is a report: its first findings stand for it."""


def finding_sentences(units: list[str]) -> list[str]:
    """The findings among an assistant message's units (``report_units``), verbatim.

    A unit that says a result or cause and is not a plan, a question or a reason (reasons are
    kept as such). A short follow-up ("This confirms the issue described.") keeps the sentence
    before it, so it still says what was confirmed. Each is clipped to ``MAX_FINDING_CHARS``.
    """
    out: list[str] = []
    for i, u in enumerate(units):
        if len(out) >= MAX_FINDINGS_PER_MESSAGE:
            break
        follows = bool(i and len(u) < 80 and _FOLLOWER_RE.match(u))
        if (len(u) < MIN_FINDING_CHARS and not follows) or u.endswith(("?", ":")) \
                or not _FINDING_RE.search(u.lower()):
            continue
        probe = u.replace("\u2019", "'")
        if _PLAN_RE.match(probe) or is_reason(probe) or not _says_something(u):
            continue
        u = u.split("```", 1)[0].rstrip()  # code glued onto the sentence is not its words
        if len(u) < MIN_FINDING_CHARS and not follows:
            continue
        text = u
        if follows and len(units[i - 1]) + len(u) < MAX_FINDING_CHARS:
            text = f"{units[i - 1]} {u}"
            if out and out[-1] == units[i - 1]:
                out.pop()  # the previous sentence was a finding too: said once, with its follower
        out.append(cut_words(text, MAX_FINDING_CHARS))
    return out


def norm(text: str) -> str:
    """Whitespace- and case-insensitive key for deduplication."""
    return " ".join(text.replace(ELLIPSIS, " ").split()).lower()


# --- accumulation -----------------------------------------------------------------------------


class NarrativeAcc:
    """Folds events' assistant texts and user requests, on top of a previous state's lists.

    ``current_request`` is the seq of the request the first new event belongs to (the
    previous state's latest request), so a turn that a compaction cut in two still gets one
    outcome: the later closing message replaces the earlier one. ``after_result``: the previous
    state ended on a call whose result came, so the first text here is read for findings.
    """

    def __init__(self, outcomes: list[TurnOutcome], reasons: list[Reason],
                 current_request: int = 0, findings: list[Finding] | None = None,
                 after_result: bool = False) -> None:
        self.outcomes = {o.request_seq: o for o in outcomes}
        self.reasons = list(reasons)
        self._reason_keys = {norm(r.text) for r in reasons}
        self.findings = list(findings or ())
        self._finding_keys = {norm(f.text) for f in self.findings}
        self.current_request = current_request
        self._closing: tuple[int, str] | None = None
        self._after_result = after_result

    def on_results(self) -> None:
        """A tool's result arrived: the agent's next words may say what it showed."""
        self._after_result = True

    def on_call(self) -> None:
        """The agent made a call: its words after this are about the next result."""
        self._after_result = False

    def on_request(self, seq: int) -> None:
        self._flush()
        self.current_request = seq

    def on_assistant_text(self, seq: int, text: str, reasons: bool = True) -> None:
        """Fold an assistant message. ``reasons``: False when the caller found no needle of a reason
        or rule in ``text`` (lowercased, ASCII, without ``**``), so none of its units is one."""
        if not text.strip():
            return
        self._closing = (seq, text)
        units = report_units(text) if reasons and _may_hold_reasons(text) else None
        for s in reason_sentences(text, units) if units else ():
            key = norm(s)
            if key not in self._reason_keys:
                self._reason_keys.add(key)
                self.reasons.append(Reason(seq=seq, text=s))
        if self._after_result and len(text) >= MIN_FINDING_CHARS and _FINDING_RE.search(text.lower()):
            for s in finding_sentences(report_units(text) if units is None else units):
                key = norm(s)
                if key not in self._finding_keys:
                    self._finding_keys.add(key)
                    self.findings.append(Finding(seq=seq, text=s))
        self._after_result = False  # the first words after a result say what it showed

    def _flush(self) -> None:
        if self._closing is None:
            return
        seq, text = self._closing
        self._closing = None
        clipped, cut = clip_report(text, MAX_OUTCOME_CHARS)
        if clipped:
            self.outcomes[self.current_request] = TurnOutcome(
                seq=seq, request_seq=self.current_request, text=clipped, clipped=cut)

    def build(self) -> tuple[list[TurnOutcome], list[Reason]]:
        """Outcomes oldest first and reasons in order, each list cut to its newest items."""
        self._flush()
        outcomes = sorted(self.outcomes.values(), key=_SEQ)[-MAX_OUTCOMES:]  # (once a rung: no Python key call)
        return outcomes, self.reasons[-MAX_REASONS:]

    def built_findings(self) -> list[Finding]:
        """Findings in order, cut to the newest ``MAX_FINDINGS``."""
        return self.findings[-MAX_FINDINGS:]


# --- budget shares (used by the renderer) -------------------------------------------------------

REPORT_SHARE = 0.2
"""Share of the summary budget the agent's reports may use (newest first)."""
REASON_SHARE = 0.1
"""Share of the summary budget the reason and rule sentences may use (newest first)."""
MIN_REPORT_TOKENS = 60
"""Even a tiny budget gives the newest report this much room: it is the turn's own summary."""
MIN_ITEM_TOKENS = 40
"""A further report is only shown when at least this much of the share is left for it."""
_CHARS_PER_TOKEN = 3.6


def fit_report(text: str, max_tokens: int) -> str:
    """``text`` (a stored report) clipped to whole sentences within ``max_tokens``."""
    if count_text(text) <= max_tokens:
        return text
    chars = int(max_tokens * _CHARS_PER_TOKEN)
    ranked = _ranked(text)  # the ranking does not depend on the length: once, not per step
    while chars > 20:
        out, _ = clip_report(text, chars, ranked)
        if count_text(out) <= max_tokens:
            return out
        chars = int(chars * 0.85)
    return cut_words(text, 20)


def select_reports(outcomes: list[TurnOutcome], budget_tokens: int | None,
                   share: float = REPORT_SHARE) -> list[tuple[TurnOutcome, str]]:
    """Newest-first reports with their text clipped to fit the reports' share of the budget.

    The newest report always gets room (clipped, never dropped here); older ones follow while
    the share lasts, each clipped to what is left. ``None`` budget: everything, unclipped.
    ``share``: of ``budget_tokens`` (the renderer adds what the files' detail lines leave unused).
    """
    newest_first = sorted(outcomes, key=lambda o: o.seq, reverse=True)
    if budget_tokens is None:
        return [(o, o.text) for o in newest_first]
    left = max(MIN_REPORT_TOKENS, int(budget_tokens * share))
    out: list[tuple[TurnOutcome, str]] = []
    for o in newest_first:
        if out and left < MIN_ITEM_TOKENS:
            break
        text = fit_report(o.text, left)
        out.append((o, text))
        left -= count_text(text) + 8  # the line's prefix and newline
    return out


_NEGATIVE_RE = re.compile(
    r"\b(?:not|no|never|didn't|doesn't|don't|isn't|aren't|wasn't|can't|cannot|fail(?:s|ed|ing)?|because|"
    r"means|points? (?:to|at)|the (?:cause|problem|issue|bug) is|empty|truncated|declined|denied|rejected|"
    r"caused|only (?:if|when))\b", re.IGNORECASE)
_SPECIFIC_RE = re.compile(r"[`'\"/\d]|\w\.\w|\w_\w")


def finding_weight(text: str) -> int:
    """2 for a result that rules something out or a cause (what not to try again, where an error
    comes from), plus 1 when it names something specific (code, a path, a number, a quote)."""
    probe = text.replace("\u2019", "'")
    return (2 if _NEGATIVE_RE.search(probe) else 0) + (1 if _SPECIFIC_RE.search(probe) else 0)


FINDING_SHARE = 0.12
"""Share of the summary budget the agent's findings may use (newest first)."""


def select_findings(findings: list[Finding], budget_tokens: int | None, shown: list[str],
                    skip_seqs: set[int]) -> list[tuple[Finding, bool]]:
    """Findings not said already, most telling first (``finding_weight``, then newest), each
    with whether it fits the findings' share of the budget (the rest may fill space the lists
    of lesser value leave: the renderer gives them a low tier).

    Said already: the text is inside one of ``shown`` (normalized texts of reports, reasons and
    failures the summary carries), or it comes from a message in ``skip_seqs`` (a report shown).
    """
    left = None if budget_tokens is None else max(MIN_REPORT_TOKENS, int(budget_tokens * FINDING_SHARE))
    out: list[tuple[Finding, bool]] = []
    for f in sorted(findings, key=lambda x: (-finding_weight(x.text), -x.seq)):
        if f.seq in skip_seqs:
            continue
        key = norm(f.text)
        if any(key in h or (len(h) > 40 and h in key) for h in shown):
            continue
        fits = True
        if left is not None:
            cost = count_text(f.text) + 8
            fits = cost <= left
            if fits:
                left -= cost
        out.append((f, fits))
    return out


def select_reasons(reasons: list[Reason], budget_tokens: int | None,
                   shown: list[str]) -> list[Reason]:
    """Newest-first reasons within their share, leaving out those already in ``shown`` texts."""
    hay = [norm(t) for t in shown]
    left = None if budget_tokens is None else max(MIN_ITEM_TOKENS, int(budget_tokens * REASON_SHARE))
    out: list[Reason] = []
    for r in sorted(reasons, key=lambda x: x.seq, reverse=True):
        key = norm(r.text)
        if any(key in h for h in hay):
            continue
        if left is not None:
            cost = count_text(r.text) + 6
            if cost > left:
                if out:
                    break
                continue  # the newest may be a long one: try a shorter one before giving up
            left -= cost
        out.append(r)
    return out
