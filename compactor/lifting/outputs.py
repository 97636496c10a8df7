"""What a tool's output said, beside whether it failed: an install's packages, a fetch's own word
that its answer is cut, and the gist of a JSON answer or of code a response printed.

Split out of ``compactor.lifting.failures`` (which re-exports these names) by responsibility: the
failures module says why a call failed and what came of it; this one reads outputs that worked.
Plain rules, no model.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

HARNESS_NOTE_RE = re.compile(r"^\s*(?:\[(?:Showing|Output|Truncated)|\(Open file|\(Current directory|bash-\$)", re.I)


def clip(text: str, n: int) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 1].rstrip() + "…"



# What an install brought in ("which extra dependency had to be installed", "did `pip install -e
# .[dev]` hit a problem"): an install that worked is how the environment got where it is.
_INSTALL_RE = re.compile(r"(?:^|[;&|(]\s*|\bsudo\s+)(?:python3?\s+-m\s+)?(?:pip3?|uv\s+pip|uv|npm|pnpm|yarn|bun|"
                         r"apt(?:-get)?|brew|cargo|gem|poetry|conda)\s+(?:\S+\s+)*?(?:install|add|i)\b", re.M)
_INSTALLED_RE = re.compile(r"^\s*(?:Successfully installed .+|added \d+ packages?.*|Setting up \S+.*|"
                           r"Requirement already satisfied: \S+)$", re.M)
_INSTALL_PROBLEM_RE = re.compile(r"^\s*(?:ERROR|WARNING|npm (?:ERR!|WARN)|E:|error)\b[:\s].*$", re.M)
INSTALL_DETAIL_CHARS = 160


def is_install(command: str) -> bool:
    # (memo for short commands that name an installer: the lift asks once per command, and each
    # ladder candidate's render once more; a long script is searched each time rather than kept
    # alive in the memo, and a command naming none, most of them, is answered by one search)
    if _INSTALLERS_PRE.search(command) is None:
        return False
    return _is_install_short(command) if len(command) <= 512 else bool(_INSTALL_RE.search(command))


_INSTALLERS = ("pip", "uv", "npm", "yarn", "bun", "apt", "brew", "cargo", "gem", "poetry", "conda")
"""Every match of ``_INSTALL_RE`` names one of these (checked before the search)."""
_INSTALLERS_PRE = re.compile("|".join(_INSTALLERS))  # (one search of the literals)


@lru_cache(maxsize=1 << 16)
def _is_install_short(command: str) -> bool:
    return bool(_INSTALL_RE.search(command))  # (is_install has seen an installer's name in it)


def install_outcome(text: str) -> str:
    """What an install reported: the packages it installed (its last such line) and its first
    warning or error line, `` · ``-joined; "" when it said neither."""
    parts = []
    done = _INSTALLED_RE.findall(text)
    if done:
        parts.append(clip(done[-1], INSTALL_DETAIL_CHARS // 2 if len(done) > 1 else INSTALL_DETAIL_CHARS))
    problem = _INSTALL_PROBLEM_RE.search(text)
    if problem:
        parts.append(clip(problem.group(0), INSTALL_DETAIL_CHARS // 2))
    return " · ".join(parts)


# A fetch that worked but returned part of what was asked ("restricted":true, "hasMore":true,
# "truncated": true): the limitation the next agent meets again, in the response's own fields.
_PARTIAL_FLAG_RE = re.compile(r'"(?:restricted|truncated|partial|hasMore|has_more|is_truncated)"\s*:\s*true')
_JSON_SCALARS_RE = re.compile(r'(?:"\w+"\s*:\s*(?:true|false|null|-?\d+(?:\.\d+)?)\s*,?\s*){2,}')
PARTIAL_TAIL_CHARS = 600
PARTIAL_CHARS = 120
"""A cut answer's fields, clipped as a failure's cause line is (``failures.CAUSE_LINE_CHARS``)."""
_SIZE_CAP_RE = re.compile(r'"(?:maxChars|max_chars|maxBytes|max_bytes|maxTokens|max_tokens|totalChars|total_chars)"')


def partial_result(text: str) -> str:
    """``partial: "restricted":true,"maxChars":8000,"totalChars":20526,...`` when a result's closing
    fields say it holds only part of the answer; "" otherwise."""
    tail = text[-PARTIAL_TAIL_CHARS:]
    if "true" not in tail:
        return ""  # (every flag match holds it: no search)
    flag = _PARTIAL_FLAG_RE.search(tail)
    if flag is None:
        return ""
    around = next((m.group(0) for m in _JSON_SCALARS_RE.finditer(tail) if m.start() <= flag.start() < m.end()), "")
    if "more" in flag.group(0).lower() and not _SIZE_CAP_RE.search(around):
        return ""  # more search results to page through: not a cut answer
    return "partial: " + clip((around or flag.group(0)).strip().rstrip(","), PARTIAL_CHARS)


_FIELD_RE = re.compile(r'"(\w+)"\s*:\s*(true|false|null|-?\d+(?:\.\d+)?)')
_CUT_FLAGS = ("restricted", "truncated", "partial", "is_truncated")
_GOT_KEYS = ("maxChars", "max_chars", "maxBytes", "max_bytes", "maxTokens", "max_tokens")
_TOTAL_KEYS = ("totalChars", "total_chars", "totalBytes", "total_bytes", "totalTokens", "total_tokens")
TITLE_CHARS = 60


def partial_fields(partial: str) -> str:
    """``restricted, 8000 of 20526 chars`` from ``partial_result``'s fields (its raw text when they
    say nothing more readable)."""
    fields = dict(_FIELD_RE.findall(partial))
    parts = [k for k in _CUT_FLAGS if fields.get(k) == "true"]
    got = next((fields[k] for k in _GOT_KEYS if k in fields), "")
    total = next((fields[k] for k in _TOTAL_KEYS if k in fields), "")
    if got and total:
        unit = next(k for k in _TOTAL_KEYS if k in fields).lower().replace("total", "").strip("_")
        parts.append(f"{got} of {total} {unit}")
    return ", ".join(parts) or partial.removeprefix("partial: ")


def answer_title(text: str) -> str:
    """The ``title`` (or ``name``) a JSON answer gives itself and its ``source``, or ""."""
    body = text.lstrip()
    if body[:1] != "{":
        return ""
    try:
        data, _ = json.JSONDecoder().raw_decode(body)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    title = next((data[k] for k in ("title", "name") if isinstance(data.get(k), str)), "")
    source = next((data[k] for k in ("source", "publisher", "site") if isinstance(data.get(k), str)), "")
    return clip(title, TITLE_CHARS) + (f" ({clip(source, 30)})" if title and source else "")


# What an output the agent read said ("what did the /status check return", "which documents were
# fetched and what did each cover", "what is the leaked upload code"): a command that worked and
# answered with JSON or with source code is how the agent learned it. One short line per output:
# a JSON answer's scalar fields and the names/titles of its items; code lines a response printed.
GIST_CHARS = 240
_GIST_KEYS = ("title", "name", "status", "ok", "authenticated", "scope", "expiresAt", "error", "message",
              "author", "publishedAt", "source", "count", "total", "id", "documentId", "slug", "version")
# what a search answered for: the filters and query it says it applied ("filtersApplied": {"acceleratorOnly":
# true}): two searches whose commands read alike (clipped) read apart by their answers
_ECHO_KEY_RE = re.compile(r"(?i)filter|^query$|^q$|^params$|^criteria$")
_ITEM_NAME_KEYS = ("name", "title", "slug", "id")
_HTTP_CODE_RE = re.compile(r"\A\s*([1-5]\d\d)\s*\Z")
_BR_RE = re.compile(r"<br\s*/?>", re.I)
_CODE_LINE_RE = re.compile(r"^\s*(?:if|elsif|elif|unless|while|for|foreach|my|our|def|sub|return|open|system|exec|"
                           r"eval|function|const|let|var|import|require|print)\b.{3,}$|^\s*\$\w+\s*=\s*.{3,}$")
_TAG_RE = re.compile(r"</?[A-Za-z!]")
_CODE_NOISE_RE = re.compile(r"^\s*(?:use\s+(?:strict|warnings)\b|my \$\w+\s*=\s*\w+->new\b|print\s+(?:\$\w+->header|<<|'</))")
MAX_GIST_ITEMS = 5


def _scalar(v: object) -> str:
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v
    return clip(s, 48)


def _json_gist(data: object, counted: bool = False) -> str:
    """``counted``: the caller says how many items there are (``results (8): ...``)."""
    if isinstance(data, list):
        items = [x for x in data if isinstance(x, dict)]
        names = [str(next((x[k] for k in _ITEM_NAME_KEYS if isinstance(x.get(k), (str, int))), "")) for x in items]
        names = [clip(n, 50) for n in names if n]
        if not names:
            return ""
        more = "" if len(data) <= MAX_GIST_ITEMS else ", …" if counted else f", … ({len(data)} items)"
        return ", ".join(names[:MAX_GIST_ITEMS]) + more
    if not isinstance(data, dict):
        return ""
    parts = [f"{k}={_scalar(data[k])}" for k in _GIST_KEYS
             if k in data and isinstance(data[k], (str, int, float, bool)) and data[k] != ""]
    echo = [f"{k}={_scalar(v)}" for key, val in data.items() if _ECHO_KEY_RE.search(key) for k, v in _leaves(val)]
    if echo:
        parts.append("for " + ", ".join(echo[:4]))
    for k, v in data.items():  # a list of records (results, projects, documents): what came back
        if isinstance(v, list) and v and isinstance(v[0], dict):
            inner = _json_gist(v, counted=True)
            if inner:
                parts.append(f"{k} ({len(v)}): {inner}")
                break
    return "; ".join(parts[:8])


def _leaves(v: object, depth: int = 3) -> list[tuple[str, object]]:
    """(key, scalar) pairs of a small nested dict (a search's applied filters), depth-first."""
    if not isinstance(v, dict) or depth == 0:
        return []
    out: list[tuple[str, object]] = []
    for k, x in v.items():
        if isinstance(x, (str, int, float, bool)) and x != "":
            out.append((str(k), x))
        else:
            out += _leaves(x, depth - 1)
    return out


PRINTED_CHARS = 60
_NO_OUTPUT_RE = re.compile(r"(?i)did not produce any output|no output|successfully")


def output_gist(text: str) -> str:
    """``got: authenticated=true; scope=...; HTTP 200`` for a JSON answer, ``got code: if (...) { · my $file = ...``
    for source code a response printed, ``printed: 344`` for a one-line output of ``PRINTED_CHARS`` at most;
    "" for anything else."""
    body = "\n".join(ln for ln in text.splitlines()
                     if not HARNESS_NOTE_RE.match(ln) and "PROCESS-DONE" not in ln).strip()
    if body[:1] in "{[":
        try:
            data, end = json.JSONDecoder().raw_decode(body)
        except ValueError:
            return ""
        gist = _json_gist(data)
        code = _HTTP_CODE_RE.match(body[end:])
        if code:
            gist += ("; " if gist else "") + f"HTTP {code.group(1)}"
        return "got: " + clip(gist, GIST_CHARS) if gist else ""
    if body and "\n" not in body and len(body) <= PRINTED_CHARS and not _NO_OUTPUT_RE.search(body):
        return f"printed: {body}"  # a run's whole answer ("344"): what a reproduction showed
    if "$" not in body and "(" not in body:
        return ""
    lines = [ln.strip() for ln in _BR_RE.sub("\n", body).splitlines()]
    code = [ln for ln in lines if _CODE_LINE_RE.match(ln) and not _CODE_NOISE_RE.match(ln) and not _TAG_RE.search(ln)]
    if len(code) < 3:
        return ""
    return "got code: " + clip(" · ".join(code[:6]), GIST_CHARS)
