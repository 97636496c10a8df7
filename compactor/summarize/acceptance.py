"""What a model-written summary says of the lifted state, measured on meaning. Pure.

* ``terms``: an item's distinctive terms: paths, identifiers, numbers of two digits or more,
  words of five letters or more that are not common English, and words of any other script
  (a trailing particle letter dropped, so Korean ``영상들`` matches ``영상``).
* ``named``: an item counts as named when the summary carries enough of its terms (one of one
  or two, two of up to six, three of more), so a paraphrase or a partial quote counts, in
  any language, while decorations of the structured rendering (``#12``, ``exit 0``) do not.
* ``carried``: the share of the lifted state an answer names *by itself*, averaged over the
  state's sections so a session with 80 commands does not drown its goal. An answer below
  ``MIN_CARRIED`` is empty or a placeholder: completing it would show the structured summary
  under the model's name, so it is refused instead.
* ``done_claims``: lines of the answer that report an action as done when the log has no
  result for it (an unknown outcome, or a command that never ran at all, e.g. one an
  instruction planted in a tool output asked the model to claim).

The threshold (``MIN_CARRIED``) comes from ``compactor bench model-path`` on the corpus:
docs/bench-model-path.md gives the measured carried share of every faithful stand-in answer and
of every adversarial one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

from compactor.lifting.lift import LiftedState
from compactor.summarize.structured import FILES_CHANGED, FILES_READ, LATEST, _build, doc_lines

MIN_CARRIED = 0.15
"""Below this share (before completion) an answer is refused as empty or a placeholder."""

ALSO_HEADING = "## Also in the lifted state (what the summary above leaves out or names only in part)"
"""Where completion appends; everything before it is the model's own text."""

_TERM_RE = re.compile(r"[^\W_][\w./:@+#-]*", re.U)
_DECOR_RE = re.compile(r"#\d+|\[tool_use [^\]]+\]|\(from the user, #\d+\)|→|\blast #\d+")
_STOP = frozenset("""
about above after again against agent agents already also another answer asked asking based
because before being below between both build called cannot change changed changes check
checked could create created current doing done during each either every exist exists failed
first found given going having here however into itself later latest least less makes making
might minor more most much must need needed needs never newer next none nothing number only
other others output over please point previous probably quite rather really request requests
result results right running same seems should show shown since some something still such
summary than that their them then there these they thing things this those though three
through today under until update updated used user using very want wants wasn were what when
where whether which while whole will with within without work worked working works would write
written wrong your yours added adding error errors exit status still open resolved
""".split())
_HEDGE_RE = re.compile(
    r"\b(unknown|unconfirmed|not confirmed|unverified|not verified|verify|no result|no recorded|"
    r"pending|may not|might not|did not|didn't|not yet|never|failed|fails|if it)\b", re.I)
_DONE_RE = re.compile(
    r"\b(done|succeeded|succeeds|successful(ly)?|passed|passes|passing|completed?|finished|"
    r"worked|works|fixed|deployed|merged|applied|ran fine|exit(ed)?( code)? 0)\b|✓|✅", re.I)
_PLACEHOLDER_RE = re.compile(r"<[^<>\s]{1,30}>|\.\.\.|…")
_SPAN_RE = re.compile(r"`([^`\n]{3,200})`")
_COMMAND_HEADS = frozenset("""
make npm npx yarn pnpm node python python3 pytest pip pip3 uv poetry cargo go git docker kubectl
helm terraform bash sh zsh curl wget deploy ./deploy.sh rm mv cp chmod sudo apt apt-get brew
gradle mvn dotnet ruby bundle rake rails php composer java javac gcc clang cmake ninja anchor
solana forge hardhat vercel netlify fly heroku aws gcloud az psql mysql redis-cli
""".split())


def _strong(raw: str) -> bool:
    """Paths, identifiers and mixed tokens: distinctive wherever they occur."""
    inner = raw.strip("./:-+@#")
    return (
        any(c in inner for c in "/._")
        or (any(c.isdigit() for c in inner) and any(c.isalpha() for c in inner))
        or any(c.isupper() for c in inner[1:])
    )


def terms(text: str) -> frozenset[str]:
    """The distinctive terms of ``text`` (lower case)."""
    out: set[str] = set()
    for raw in _TERM_RE.findall(_DECOR_RE.sub(" ", text)):
        raw = raw.rstrip(".:-+@#")
        t = raw.lower()
        if not t:
            continue
        if _strong(raw):
            if len(t) >= 3:
                out.add(t)
        elif t.isdigit():
            if len(t) >= 2:
                out.add(t)
        elif t.isascii():
            if len(t) >= 5 and t not in _STOP:
                out.add(t)
        elif len(t) >= 2:
            out.add(t[: max(2, len(t) - 1)])
    return frozenset(out)


def haystack(text: str) -> str:
    """``text`` as ``named`` searches it: lower case, whitespace collapsed."""
    return " ".join(text.split()).lower()


def _found(term: str, hay: str) -> bool:
    if term in hay:
        return True
    if "/" in term:  # a path counts when its file name is there (``src/app.py`` -> ``app.py``)
        base = term.rstrip("/").rsplit("/", 1)[-1]
        return len(base) >= 4 and base in hay
    return False


def needed(n: int) -> int:
    """How many of an item's ``n`` terms a summary must carry for the item to count as named."""
    return 1 if n <= 2 else 2 if n <= 6 else 3


def found_count(item_terms: Iterable[str], hay: str) -> int:
    """How many of ``item_terms`` ``hay`` (a ``haystack``) carries."""
    return sum(1 for t in item_terms if _found(t, hay))


def named(item_terms: Iterable[str], hay: str) -> bool:
    ts = list(item_terms)
    if not ts:
        return False
    return found_count(ts, hay) >= needed(len(ts))


_PATH_SECTIONS = (FILES_CHANGED, FILES_READ)


def item_named(section: str, line: str, hay: str) -> bool:
    """Whether ``hay`` (a ``haystack``) names the structured summary ``line`` of ``section``:
    a file by its path (or file name), anything else by its terms (``named``)."""
    if section in _PATH_SECTIONS:
        body = line[2:] if line.startswith("- ") else line
        path = body.split(" (", 1)[0].strip().lower()
        if path and _found(path, hay):
            return True
    return named(terms(line), hay)


def model_part(text: str) -> str:
    """The model's own text of a (possibly completed) summary."""
    return text.split(ALSO_HEADING, 1)[0]


@dataclass
class Carried:
    """How much of the lifted state an answer names by itself."""

    share: float = 0.0
    named: int = 0
    items: int = 0
    by_section: dict[str, tuple[int, int]] = field(default_factory=dict)

    def describe(self) -> str:
        return (f"it names {self.named} of {self.items} items of the lifted state by itself "
                f"({self.share:.0%} averaged over {len(self.by_section)} sections; at least "
                f"{MIN_CARRIED:.0%} needed)")


def carried(text: str, state: LiftedState) -> Carried:
    """The share of ``state`` that ``text`` names, averaged over the sections with content."""
    hay = haystack(text)
    counts: dict[str, list[int]] = {}
    goal_seq = state.goal.seq if state.goal is not None else None
    latest_is_goal = bool(state.requests) and state.requests[-1].seq == goal_seq
    for ln in doc_lines(_build(state)):  # (inside the ladder's memo: its entries made lines)
        if ln.section == LATEST and latest_is_goal:
            continue
        ts = terms(ln.text)
        if not ts:
            continue
        c = counts.setdefault(ln.section, [0, 0])
        c[1] += 1
        c[0] += item_named(ln.section, ln.text, hay)
    if not counts:
        return Carried(share=1.0)
    share = sum(n / t for n, t in counts.values()) / len(counts)
    return Carried(share=share, named=sum(n for n, _ in counts.values()),
                   items=sum(t for _, t in counts.values()),
                   by_section={s: (n, t) for s, (n, t) in counts.items()})


def is_placeholder(text: str, state: LiftedState) -> Carried | None:
    """The measure, when the answer carries too little of the state to be used; else None."""
    c = carried(model_part(text), state)
    return c if c.share < MIN_CARRIED else None


# --- language ------------------------------------------------------------------------------

_SCRIPTS = (
    ("ko", re.compile(r"[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")),
    ("ja", re.compile(r"[\u3040-\u30ff]")),
    ("zh", re.compile(r"[\u4e00-\u9fff]")),
    ("ru", re.compile(r"[\u0400-\u04ff]")),
    ("ar", re.compile(r"[\u0600-\u06ff]")),
    ("he", re.compile(r"[\u0590-\u05ff]")),
    ("el", re.compile(r"[\u0370-\u03ff]")),
    ("th", re.compile(r"[\u0e00-\u0e7f]")),
    ("hi", re.compile(r"[\u0900-\u097f]")),
)
_LATIN_STOP = {
    "en": set("the and of to is in that it for was with on are this be not as but have you what from".split()),
    "de": set("der die das und ist nicht ein eine zu den mit auf für dem wurde von sich auch es im".split()),
    "fr": set("le la les et est une des du que pas pour dans sur avec qui au il ce sont été".split()),
    "es": set("el la los las y es que una del por con para se no su al lo como está fue".split()),
    "pt": set("o os as e é que um uma do da dos das para com não no na foi está".split()),
    "it": set("il lo gli le e è che una del della per con non sono di da nel alla".split()),
    "nl": set("de het een en is van dat niet op te met voor zijn wordt er ook".split()),
}
_CODEISH_RE = re.compile(r"`[^`]*`|https?://\S+|\S*[/_.=]\S*|\[[^\]]*\]|#\d+")
_WORD_RE = re.compile(r"[^\W\d_]+", re.U)


def language(text: str, min_hits: int = 4) -> str | None:
    """The dominant natural language of ``text`` (code, paths and ids left out), or None when
    there is too little prose to tell: a script's language when 30% of its letters are in it,
    else the Latin language with the most stop words (at least ``min_hits``: 4 for an answer,
    2 for the session's own short requests)."""
    prose = _CODEISH_RE.sub(" ", text)
    letters = [c for c in prose if c.isalpha()]
    if len(letters) < 12:
        return None
    for lang, rx in _SCRIPTS:
        if len(rx.findall(prose)) >= 0.3 * len(letters):
            return lang
    words = [w.lower() for w in _WORD_RE.findall(prose)]
    hits = {lang: sum(1 for w in words if w in stop) for lang, stop in _LATIN_STOP.items()}
    lang, n = max(hits.items(), key=lambda kv: kv[1])
    return lang if n >= min_hits else None


def session_languages(state: LiftedState) -> set[str]:
    """The languages the user wrote the requests in and the agent its reports in."""
    users = "\n".join([*(r.text for r in state.requests), *(c.text for c in state.constraints)])
    agent = "\n".join([*(o.text for o in state.outcomes), *(d.text for d in state.decisions),
                       *(r.text for r in state.reasons)])
    return {lang for lang in (language(users, 2), language(agent, 2)) if lang}


def foreign_language(text: str, state: LiftedState) -> tuple[str, set[str]] | None:
    """(the answer's language, the session's) when the model's text is written in a language
    neither the user nor the agent used; else None."""
    own_text = model_part(text)
    own = language(own_text)
    langs = session_languages(state)
    if own is None or not langs or own in langs:
        return None
    if any(script_share(own_text, lang) >= MIN_SCRIPT_SHARE for lang in langs):
        return None  # the session's script carries the prose; paths, commands and code are Latin
    return own, langs


MIN_SCRIPT_SHARE = 0.1
"""An answer whose prose letters are at least this share in the script of a session language
(Hangul, kana, Cyrillic...) is written in it, however many Latin paths, commands and code
words it quotes (a faithful Korean summary of a coding session was 29.6% Hangul letters, one
syllable block per two or three Latin letters, and was refused as English)."""


def script_share(text: str, lang: str) -> float:
    """Share of the prose letters of ``text`` in ``lang``'s own script (0 for Latin languages)."""
    rx = dict(_SCRIPTS).get(lang)
    if rx is None:
        return 0.0
    prose = _CODEISH_RE.sub(" ", text)
    letters = sum(1 for c in prose if c.isalpha())
    return len(rx.findall(prose)) / letters if letters else 0.0


# --- claims of done ------------------------------------------------------------------------


def _sections_of(text: str) -> list[tuple[str, str]]:
    """(heading, line) for every non-empty line of ``text``."""
    out: list[tuple[str, str]] = []
    heading = ""
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            heading = s.lstrip("#").strip()
            continue
        out.append((heading, s))
    return out


def _looks_like_command(span: str, heads: set[str]) -> bool:
    first = span.split()[0].lower() if span.split() else ""
    return len(span.split()) >= 2 and (first in _COMMAND_HEADS or first in heads)


def done_claims(text: str, state: LiftedState) -> list[tuple[int, str]]:
    """(line number, what) for every line of the model's text that reports as done an action
    with no recorded result: an unknown-outcome action named outside the unknown section, or a
    command in backticks the session never ran (nothing in ``state.commands`` matches it)."""
    own = model_part(text)
    ran = [haystack(c.command) for c in state.commands] + [haystack(t.command) for t in state.tests]
    heads = {c.split()[0] for c in ran if c.split()}
    unknown: list[tuple[str, str, frozenset[str], list[str]]] = []
    for u in state.unknown_actions:
        paths = [p.lower() for p in u.paths if len(p) >= 4] if (
            u.kind in ("write", "edit", "create", "delete") or not u.command) else []
        unknown.append((u.tool_use_id, u.tool_use_id.lower(), terms(u.command or ""), paths))
    out: list[tuple[int, str]] = []
    for n, (heading, line) in enumerate(_sections_of(own), 1):
        if heading.lower().startswith("outcome unknown") or not _DONE_RE.search(line) or _HEDGE_RE.search(line):
            continue
        low = haystack(line)
        hit = next((uid for uid, key, cmd_terms, paths in unknown
                    if key in low or (cmd_terms and named(cmd_terms, low)) or any(p in low for p in paths)), None)
        if hit is not None:
            out.append((n, hit))
            continue
        for span in _SPAN_RE.findall(line):
            if not _looks_like_command(span, heads):
                continue
            # A pattern (`nl -ba <file> | sed -n '<range>'`) counts by what it keeps: its head.
            plain = _PLACEHOLDER_RE.sub(" ", span)
            head = haystack(" ".join(plain.split()[:2]))
            span_terms = terms(plain)
            cmd = haystack(plain)
            if not any(cmd in r or r in cmd or (plain != span and head in r)
                       or (span_terms and named(span_terms, r)) for r in ran if r):
                out.append((n, span))
                break
    return out


__all__ = [
    "ALSO_HEADING",
    "Carried",
    "MIN_CARRIED",
    "carried",
    "done_claims",
    "foreign_language",
    "language",
    "found_count",
    "haystack",
    "is_placeholder",
    "item_named",
    "model_part",
    "named",
    "needed",
    "terms",
]
