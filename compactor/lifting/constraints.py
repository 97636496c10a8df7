"""User-authored rules only: which sentences of a user message are constraints.

A constraint is quoted verbatim in every summary and the next model is told to obey it, so a
false one misleads: a pasted error ("This transaction couldn't be simulated, only signers can
call it"), a linter line, an API error body, a question ("What must I fix?"), a sentence that
describes the code ("Currently it only supports text") or the fragment of a hard-wrapped line
("It's never used for") is not a rule the agent must keep. ``constraint_sentences`` keeps a
sentence when

- it is the user's own words: not in a fenced block, not a line that reads as output (logs,
  compiler/linter/CI lines, stack frames, JSON, prompts, code), not in a paragraph that is
  mostly output or that a line such as "I get this error:" introduces;
- it names a rule (never, don't, only, always, must, make sure, ...), not inside a quotation;
- it is phrased as a rule: an order (an imperative, possibly after "please"/"again," or a
  leading "when ...," clause), a modal (must, should, need to, it's important, not allowed),
  or "you/we" + never/only/can't...; not a question, not a hedge ("I don't think ...").

Sentences are whole: a line wrapped in the middle of a sentence is joined to the next one
before splitting, so one sentence is never cut into two constraints. Both the lifter and the
validator call this function, so they always agree on what a constraint is.

Cost: one keyword search over the whole message decides most messages (no keyword, no
constraint); every pattern is compiled once, and the output-line rules are one alternation.
"""

from __future__ import annotations

import re

from compactor.events import Event
from compactor.lifting.needles import Caseless

MAX_CONSTRAINT_CHARS = 1_500

# --- injected text ------------------------------------------------------------------------------

_INJECTED_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<system-reminder>",
    "Caveat: The messages below were generated",
)


def looks_injected(text: str) -> bool:
    """Harness-written text that some importers still mark as a user message."""
    return text.lstrip().startswith(_INJECTED_PREFIXES)


def is_genuine_request(e: Event) -> bool:
    """A message the human typed (not a tool result, not harness-injected text)."""
    if e.kind != "message" or e.role != "user":
        return False  # cheap checks first: most events are not user messages
    return e.is_user_request and not looks_injected(e.text)


# --- sentences ------------------------------------------------------------------------------------

_SENTENCE_GAP_RE = re.compile(r"(?<=[.!?])[ \t]+(?=\S)")
# The same cuts, found from the sentence ends: each match is the end's character, whose match end is
# where a gap match starts (a gap holds no sentence end, so each end before a gap opens one), and a
# pattern that opens with a character set lets the search skip to the ends (issue 17)
_SENTENCE_END_RE = re.compile(r"[.!?](?=[ \t]+\S)")
# Whether a line has a sentence gap: the same answer, found by a pattern that opens with a character
# set, so the search skips to the sentence ends instead of trying the lookbehind everywhere (issue 17)
_SENTENCE_GAP_PRE = re.compile(r"[.!?][ \t]+\S")
# "as we wish.This means": a full stop with no space before a word that opens sentences (never
# "torch.Tensor" or "os.Path": only these openers count)
_GLUED_PRE_RE = re.compile(r"[.!?](?<=[a-z].)[A-Z]")  # ([a-z][.!?][A-Z], searched from the stops)
_GLUED_RE = re.compile(r"(?<=[a-z]{3}[.!?])(?=(?:This|That|The|These|Those|Let's|Let|We|It|So|Now|Next|Another|"
                       r"However|But|And|Then|There|Which|Since|If|Our|Unfortunately|Finally|First|Also)\b)")
# Either of the two above (a gap, or a glued sentence's full stop), in one search of the whole text:
# no gap spans lines ([ \t] and \S hold no line break), so none found means none in any line
_ANY_CUT_PRE = re.compile(r"[.!?](?:[ \t]+\S|(?<=[a-z].)[A-Z])")
_LIST_ITEM_RE = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)]|#{1,6})\s*")
_WRAP_END = (".", "!", "?", ":", ";", ")", "]", "}", ",", "`", "\"", "'")


def split_sentences(text: str) -> list[str]:
    """Sentences and lines of ``text``, each stripped, otherwise verbatim.

    A split right after an abbreviation ("e.g.", "i.e.", "etc.") is undone, so a rule is not
    cut in the middle.
    """
    if _ANY_CUT_PRE.search(text) is None:  # no line with a sentence end inside: each line is a piece
        lines = text.splitlines()
        if len(lines) == 1:  # (one line: no comprehension, issue 17)
            piece = lines[0].strip()
            return [piece] if piece else []
        return [piece for line in lines if (piece := line.strip())]
    out: list[str] = []
    if "." in text and _GLUED_PRE_RE.search(text) and _GLUED_RE.search(text):
        text = _GLUED_RE.sub(" ", text)  # the space the writer left out; pieces stay verbatim
    for line in text.splitlines():
        if "." not in line and "!" not in line and "?" not in line or _SENTENCE_GAP_PRE.search(line) is None:
            piece = line.strip()  # no sentence end inside (none followed by a space): the line is one piece
            if piece:
                out.append(piece)
            continue
        start = 0
        cuts = [m.end() for m in _SENTENCE_END_RE.finditer(line)] + [len(line)]
        for cut in cuts:
            piece = line[start:cut].strip()
            if piece and not _abbrev_end(piece) or cut == len(line):
                if piece:
                    out.append(piece)
                start = cut
    return out


_ABBREVS = frozenset({"e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "incl.", "Mr.", "Mrs.", "Dr.", "No."})


def _abbrev_end(piece: str) -> bool:
    """``piece`` ends with an abbreviation ("e.g.", "etc.", "Dr.", "J."): no sentence end there."""
    if not piece.endswith("."):
        return False
    last = piece[piece.rfind(" ") + 1:].lstrip("([\"'")
    return last in _ABBREVS or len(last) == 2 and last[0].isupper()


_CONTINUES_RE = re.compile(
    r"\b(?:a|an|the|of|for|to|and|or|but|with|in|on|at|by|from|into|is|are|was|were|be|that|which|"
    r"who|than|as|if|when|not|no|its|their|our|your|my|this|these|those)$", re.I)


def join_wrapped(lines: list[str]) -> list[str]:
    """One paragraph's lines with hard-wrapped sentences joined, so a sentence is never cut.

    A line continues on the next when it has no closing punctuation, the next starts in lower
    case and is no list item, and either it ends on a word no sentence ends with ("for",
    "the", "and") or the paragraph is wrapped at a width (its lines but the last are all
    long and of about the same length: a terminal or an editor cut them).
    """
    if len(lines) < 2:
        return lines
    widths = [len(x.rstrip()) for x in lines[:-1]]
    wrapped = min(widths) >= 60 and min(widths) >= 0.75 * max(widths)
    out: list[str] = []
    for line in lines:
        if out:
            prev = out[-1].rstrip()
            nxt = line.strip()
            if (not prev.endswith(_WRAP_END) and nxt[:1].islower() and not _LIST_ITEM_RE.match(line)
                    and (wrapped or _CONTINUES_RE.search(prev))):
                out[-1] = prev + " " + nxt
                continue
        out.append(line)
    return out


# --- what is the user's own words ------------------------------------------------------------------

_OUTPUT_START_RE = re.compile(r"\s*(?:" + "|".join((  # used with .match: tried at the line start only
    r"(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\[?\d\d:\d\d:\d\d)",  # timestamped log
    r"\[(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE|FATAL)\]",
    r"(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE|FATAL|CRITICAL)\b(?!\s+[a-z])",  # log level
    r"(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b",  # TypeError: ...
    r"(?:error|warning|fatal|panic|note|help|hint|ERROR|WARN|FAIL|FAILED)(?:\[\w+\])?:",
    r"(?:Error|Warning)\s*[:\[(]|(?:Caused by|Program log|Program \w+ (?:invoke|consumed|failed))\b",
    r"(?:Exception in thread|During handling of the above|goroutine \d+ \[|npm (?:ERR!|WARN)|"
    r"yarn run v|##\[|Traceback \(most recent call last\)|\*{5,} Module)",
    r"at \S+.*[(:]\d+",  # JS/Java stack frame
    r"File \".*\", line \d+",  # Python frame
    r"(?:[{}\[\]],?\s*$|\"[^\"]+\"\s*:|\{\s*\"|\[\s*\{)",  # JSON
    r"(?:\$|>>>|PS>|❯|➜|%)\s",  # a shell/REPL prompt
    r"(?:import |from \S+ import |def |class |const |let |var |function |fn |pub |use |#include)",
    r"}",  # a code line
    r"\d+\s*[|│]",  # numbered listing
    r"(?:[\w./\\-]+\.[A-Za-z]\w{0,5}|[\w./-]+/[\w.-]+)[:(]\d+",  # path:line (compilers, linters)
    r"\d+:\d+\s+(?:error|warning|warn)\b",  # eslint's 'line:col  error'
    r"(?:[✖✘×✗✔✓●›]|-->|=\s*(?:note|help):|\|\s|\^)",  # runner marks, compiler gutters
    r"(?:Normal|Warning)\s{2,}\w",  # kubectl events
    r"(?:HTTP/\d|(?:GET|POST|PUT|DELETE|PATCH) /|status(?: code)?:?\s*[45]\d\d\b|[45]\d\d "
    r"(?:Bad Request|Unauthorized|Forbidden|Not Found|Too Many Requests|Internal Server Error))",
)) + ")")
_PASTE_INTRO_RE = re.compile(
    r"(?i)\b(?:error|errors|says?|said|shows?|showing|output|log|logs|message|messages|popup|"
    r"pop-up|toast|alert|dialog|got|getting|returns?|returned|response|prints?|printed|"
    r"complains?|trace|traceback|console)\b[^.!?]{0,40}:\s*$"
)
_PASTE_INLINE_RE = Caseless(re.compile(
    r"(?i)\b(?:says?|said|shows?(?: this)?|showing|error(?: message)?|message|popup|pop-up|toast|"
    r"alert|dialog|output|returns?|returned|response|prints?|printed|got|getting)\s*(:)\s+\S"))
# The words of _PASTE_INLINE_RE, lowercased: in a match, one of them ends where the text before its
# colon ends, its spaces stripped (the pattern has only ``\s*`` between them)
_PASTE_INLINE_WORDS = ("say", "says", "said", "show", "shows", "show this", "shows this", "showing", "error", "error message",
                       "message", "popup", "pop-up", "toast", "alert", "dialog", "output", "return", "returns",
                       "returned", "response", "print", "prints", "printed", "got", "getting")


def _may_say_inline(line: str) -> bool:
    """False when ``_PASTE_INLINE_RE`` cannot match ``line``, an ASCII line: no colon has one of its
    words right before it (issue 17: "Task 3: fix ...": a look before each colon, not the pattern's
    word alternation tried at every position). Beyond ASCII, where a case-insensitive match need
    not survive ``str.lower``, True."""
    if not line.isascii():
        return True
    i = line.find(":")
    while i >= 0:
        if line[:i].rstrip().lower().endswith(_PASTE_INLINE_WORDS):
            return True
        i = line.find(":", i + 1)
    return False


def _intro(line: str) -> bool:
    """A line that introduces a paste: "I get this error:", "the wallet says:"."""
    return line.rstrip().endswith(":") and _PASTE_INTRO_RE.search(line) is not None


def looks_like_output(line: str) -> bool:
    """A line that reads as tool/log/error output or code rather than the user's words."""
    if line.rstrip().endswith((";", "{")):
        return True  # a code line
    return _OUTPUT_START_RE.match(line) is not None


def own_lines(text: str) -> list[str]:
    """The lines of a user message that are the user's own words, wrapped sentences joined.

    Dropped: fenced code blocks, lines that look like output, whole paragraphs that open with
    output or are mostly output (a pasted log's prose lines are still the log's), and a
    paragraph that a line like "I get this error:" or "the wallet says:" introduces.
    """
    out: list[str] = []
    in_fence = False
    paragraph: list[str] = []
    quoted_next = False  # the previous paragraph ended by introducing a paste

    def flush() -> None:
        nonlocal quoted_next
        if not paragraph:
            return
        flags = [looks_like_output(ln) for ln in paragraph]
        n_out = sum(flags)
        if quoted_next or flags[0] and len(paragraph) > 1:
            mine: list[str] = []  # a paste from its first line on
        elif n_out * 2 > len(paragraph) and len(paragraph) > 2:
            # mostly output: the user's words before the paste and after it, if any
            first = flags.index(True)
            last = len(flags) - 1 - flags[::-1].index(True)
            head = paragraph[:first]
            mine = head + (paragraph[last + 1:] if not (head and _intro(head[-1])) else [])
        else:
            mine = [ln for ln, f in zip(paragraph, flags) if not f]
        kept: list[str] = []
        for ln in mine:
            m = _PASTE_INLINE_RE.search(ln) if ": " in ln and _may_say_inline(ln) else None
            if m:  # "the wallet says: <paste>": the words before the colon only, then nothing
                kept.append(ln[:m.start(1)])
                break
            kept.append(ln)
            if _intro(ln):
                break  # the lines after "... this error:" are the paste
        out.extend(join_wrapped(kept))
        quoted_next = _intro(paragraph[-1]) and not flags[-1]
        paragraph.clear()

    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            flush()
            in_fence = not in_fence
            quoted_next = False
            continue
        if in_fence:
            continue
        if not line.strip():
            flush()
            continue
        paragraph.append(line)
    flush()
    return out


# --- what is a rule -------------------------------------------------------------------------------

_CONSTRAINT_WORDS = (
    ("n", ("never", "no longer", "not allowed", "no more than")),
    ("d", ("don['’]?t", "do not", "does not")),
    ("m", ("must not", "mustn['’]?t", "must", "make sure")),
    ("s", ("should not", "shouldn['’]?t")),
    ("c", ("can['’]?t", "cannot")),
    ("a", ("avoid", "always", "at most", "at least", "as-is")),
    ("o", ("only",)), ("w", ("without",)), ("e", ("ensure",)),
    ("i", ("instead of", "important", "intact")),
    ("r", ("required?",)), ("p", ("prefer",)), ("u", ("unchanged", "untouched")),
)
"""The rule words, by first letter (regex sources): one alternation, then whole words only."""
_CONSTRAINT_OTHER = r"|,\s?not\s|절대|무조건|반드시|하지\s?마|금지"


def _by_first_letter(table: tuple[tuple[str, tuple[str, ...]], ...]) -> str:
    r"""The lowercased twin (``needles.Caseless(low=)``) of ``\b(?:word|...)\b`` whose words ``table``
    lists by first letter, each letter's in the pattern's order: each branch opens with its first
    letter, so a search skips each position whose character opens none, where the pattern's own
    ``\b`` was tried at every one; ``(?<!\w.)`` after that letter is ``\b`` before it (issue 17: ~2.5x
    faster on a short request). At one position only one letter's words can match, in their order."""
    return "|".join(first + r"(?<!\w.)(?:" + "|".join(w[1:] for w in words) + r")\b" for first, words in table)


_CONSTRAINT_RE = Caseless(re.compile(
    r"\b(?:" + "|".join(w for _, words in _CONSTRAINT_WORDS for w in words) + r")\b" + _CONSTRAINT_OTHER,
    re.IGNORECASE,
), low=_by_first_letter(_CONSTRAINT_WORDS) + _CONSTRAINT_OTHER)
_QUOTED_RE = re.compile(r"\"[^\"\n]{3,}\"|“[^”\n]{3,}”|«[^»\n]{3,}»")
_WH_RE = re.compile(r"^(?:what|why|how|which|who|whom|whose)\b(?!\s+(?:ever|soever)\b)", re.I)
_AUX_RE = re.compile(
    r"^(?:can|could|would|will|should|shall|must|do|does|did|may|might)\s+(?:you|i|we|they|he|she)\b"
    r"|^(?:is|are|was|were)\s+(?:it|this|that|there|they|you|we|i)\b",
    re.I,
)
_HEDGE_RE = Caseless(re.compile(
    r"\b(?:i don'?t think|i think|i guess|i wonder|wonder(?:ing)? (?:if|whether)|not sure|maybe|"
    r"perhaps|any idea|is it possible|do you think|do you know|curious)\b", re.I), low=_by_first_letter((
        ("i", ("i don'?t think", "i think", "i guess", "i wonder", "is it possible")),
        ("w", ("wonder(?:ing)? (?:if|whether)",)), ("n", ("not sure",)), ("m", ("maybe",)), ("p", ("perhaps",)),
        ("a", ("any idea",)), ("d", ("do you think", "do you know")), ("c", ("curious",)))))
_MODAL_RE = Caseless(re.compile(
    r"\b(?:must|mustn'?t|should|shouldn'?t|shall|needs? to|have to|has to|required|requirement|"
    r"important|not allowed|make sure|ensure|please|^\W*remember|prefer|(?:we|i) recommend|"
    r"(?:i|we) (?:don'?t|do not|never) want|i want|i'?d like|i would like|i need)\b"
    r"|절대|무조건|반드시|하지\s?마|금지",
    re.I,
), low=_by_first_letter((  # (the words by first letter: ``_by_first_letter``, issue 17: once per request sentence)
    ("m", ("must", "mustn'?t", "make sure")), ("s", ("should", "shouldn'?t", "shall")),
    ("n", ("needs? to", "not allowed")), ("h", ("have to", "has to")),
    # (``\b^\W*remember``: ``\b`` at the text's start is a word character there, so ``\W*`` is empty)
    ("r", ("required", "requirement", "r(?<=^r)emember")),
    ("i", ("important", "i recommend", "i (?:don'?t|do not|never) want", "i want", "i'?d like", "i would like",
           "i need")),
    ("e", ("ensure",)), ("p", ("please", "prefer")), ("w", ("we recommend", "we (?:don'?t|do not|never) want")),
)) + "|절대|무조건|반드시|하지\\s?마|금지")
_YOU_RULE_RE = re.compile(
    r"\b(?:you|we)\s+(?:can'?t|cannot|can not|can only|may not|are not|aren'?t|won'?t|will not|do not|"
    r"don'?t|never|only|always|no longer)\b", re.I)
_ORDER_WORDS = frozenset("""
never don't dont do avoid always only no keep use stop prefer ensure make leave skip put write run
add remove delete rename move fix change update create return stick limit try check test build
deploy install implement refactor print log set call read edit include exclude follow ask tell
show list commit push merge save store send wait let replace handle treat ignore respect preserve
maintain reuse copy paste start finish open close load generate convert split join format sort
apply pin mark name display render hide place wrap validate verify give get take select pick
""".split())
_LEAD_RE = re.compile(r"^(?:[(*_>\"'`\s-]|please\b|again\b|also\b|and\b|but\b|so\b|just\b|"
                      r"from now on\b|going forward\b|in future\b|in the future\b|for now\b|"
                      r"remember\b|note\b|important\b|ok(?:ay)?\b|[,:;])+", re.I)
_CLAUSE_ORDER_RE = re.compile(
    r"(?:^|[,;:(]|\band\b|\bbut\b)\s*(?:please\s+|just\s+)?(?:never|don'?t|do not|always|avoid|"
    r"make sure|ensure|keep|use only|stop)\b", re.I)
_WORD_RE = re.compile(r"[^\W\d_][\w'’-]*")


def is_question(sentence: str) -> bool:
    """A question, not a rule: ends with '?' or opens like one ("What must I ...")."""
    s = sentence.strip().strip("*_>\"'` ")
    return s.endswith("?") or bool(_WH_RE.match(s) or _AUX_RE.match(s))


def _first_word(s: str) -> str:
    """The first token after fillers, lower case; "" when it is code-like (``a.b(c)``)."""
    parts = _LEAD_RE.sub("", s).split(None, 1)
    tok = parts[0].rstrip(",:;.!").replace("\u2019", "'").lower() if parts else ""
    return tok if _WORD_RE.fullmatch(tok) else ""


def is_rule(sentence: str) -> bool:
    """A sentence (already known to hold a rule keyword) phrased as a rule, not a statement.

    Orders ("Use only numpy.", "Again, keep it simple and don't use libraries."), modals ("The
    output must be JSON.", "it's important ..."), "you cannot ..." and "we never ..." are rules;
    "Currently it only supports text", "we usually use X, but it does not remember" and hedges
    ("i don't think we need a Dockerfile") are not.
    """
    if _HEDGE_RE.search(sentence):
        return False
    if _MODAL_RE.search(sentence) or _YOU_RULE_RE.search(sentence):
        return True
    if _first_word(sentence) in _ORDER_WORDS:
        return True
    return bool(_CLAUSE_ORDER_RE.search(sentence))


def _mask_quotes(line: str) -> str:
    """``line`` with the inside of each quotation blanked (same length): quoted words are
    someone else's, and a quoted sentence's full stop is no sentence end of the user's."""
    if "\"" not in line and "“" not in line and "«" not in line:
        return line
    return _QUOTED_RE.sub(lambda m: m.group(0)[0] + "_" * (len(m.group(0)) - 2) + m.group(0)[-1], line)


def constraint_sentences(text: str) -> list[str]:
    """Sentences of a user request that state a rule: negations, 'only', 'always', 'must'...

    Questions, hedges, statements, quotations and pasted output (logs, errors, code, fenced
    blocks) state no rule and are skipped; a list item's marker is not part of its rule. The
    validator recomputes constraints with this same function.
    """
    if not _CONSTRAINT_RE.search(text):
        return []  # the common case: one search decides
    out: list[str] = []
    for line in own_lines(text):
        masked = _mask_quotes(line)
        if masked != text and not _CONSTRAINT_RE.search(masked):
            continue  # (the message itself, one line without a quotation, was searched above)
        for start, end in _sentence_spans(masked):
            probe = masked[start:end].replace("\u2019", "'").replace("\u2018", "'")
            if (len(probe) > MAX_CONSTRAINT_CHARS or not _CONSTRAINT_RE.search(probe)
                    or is_question(probe)):
                continue
            if probe.rstrip().endswith(":") and len(probe) < 60:
                continue  # a heading ("IMPORTANT TIPS:"), not a rule
            if is_rule(probe):
                sentence = line[start:end]
                marker = _LIST_MARK_RE.match(sentence)
                out.append(sentence[marker.end():] if marker else sentence)
    return out


_LIST_MARK_RE = re.compile(r"^(?:[-*+•]|\d{1,3}[.)])\s+")


def _sentence_spans(line: str) -> list[tuple[int, int]]:
    """(start, end) of the sentences of one line, stripped; as ``split_sentences`` cuts them."""
    out: list[tuple[int, int]] = []
    start = 0
    for cut in [m.end() for m in _SENTENCE_END_RE.finditer(line)] + [len(line)]:
        piece = line[start:cut].strip()
        if piece and not _abbrev_end(piece) or cut == len(line):
            if piece:
                lead = len(line[start:cut]) - len(line[start:cut].lstrip())
                out.append((start + lead, start + lead + len(piece)))
            start = cut
    return out


_URL_RE = re.compile(r"https?://[^\s<>\"'`)\]}]+")


def user_urls(text: str) -> list[str]:
    """The http(s) URLs in a user message, trailing punctuation stripped."""
    if "http" not in text:
        return []
    return [u.rstrip(".,;:!?'\"") for u in _URL_RE.findall(text)]
