"""What a file the agent wrote holds, for an agent that continues the work without reading it.

Blind readers of structured summaries could not answer "what does module X decide", "how is
score Y computed", "which data files does the app load" or "which constants did the agent
set": the summary named the files and the functions, not what they say. Per written text
(a whole write, or the new lines of an edit) this module keeps short facts, in file order:

- ``about``: the file's own one-line explanation (a module docstring or a header comment);
- constants and their values (``MAX_RETRIES = 5``, ``const API_URL = "..."``, ``EPOCHS: int = 20``);
- function/class signatures (``def score(row, weights) -> float``);
- top-level config keys with scalar values (JSON, YAML, TOML, ``.env``, INI);
- data files the code names in string literals (``data/iot_data.csv``) and ids it declares
  (``declare_id!("...")``, UUIDs).

Every fact is copied from the text (whitespace collapsed, long values clipped at a word
boundary with an ellipsis), so names and values in the summary are the file's own. Plain
rules, no model: the same text always gives the same facts.
"""

from __future__ import annotations

import ast
import html
import json
import re
import sys

from compactor.lifting import behaviour as _behaviour

MAX_FACTS = 12
"""Facts kept per file (the newest write's first, then older ones not redefined)."""
FACT_CHARS = 90
VALUE_CHARS = 48

_PY_DOC = re.compile(r"\A(?:#![^\n]*\n)?(?:#[^\n]*coding[^\n]*\n)?\s*(?:[rRuU])?(\"\"\"|''')\s*([^\n]+)")
_HEAD_COMMENT = re.compile(r"\A(?:#![^\n]*\n)?\s*(?://+|#+|--|/\*+|<!--)\s*([^\n]{12,})")
_SIGS: dict[str, re.Pattern[str]] = {
    "py": re.compile(r"^[ \t]*((?:async\s+)?def\s+[A-Za-z_]\w*\s*\([^)]*\)(?:\s*->\s*[^:\n]+)?|class\s+[A-Za-z_]\w*"
                     r"(?:\([^)]*\))?)\s*:", re.M),
    "js": re.compile(r"^[ \t]*((?:export\s+(?:default\s+)?)?(?:async\s+)?function\*?\s+[A-Za-z_$][\w$]*\s*\([^)]*\)"
                     r"(?:\s*:\s*[^{\n]+)?|(?:export\s+)?(?:const|let)\s+[A-Za-z_$][\w$]*\s*=\s*(?:async\s+)?"
                     r"\([^)]*\)\s*(?::\s*[^=\n]+)?=>|(?:export\s+)?(?:abstract\s+)?class\s+[A-Za-z_$][\w$]*"
                     r"(?:\s+extends\s+[\w$.]+)?|(?:export\s+)?interface\s+[A-Za-z_$][\w$]*)", re.M),
    "rs": re.compile(r"^[ \t]*((?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?fn\s+[A-Za-z_]\w*\s*(?:<[^>]*>)?\s*\([^)]*\)"
                     r"(?:\s*->\s*[^{\n]+)?|(?:pub\s+)?(?:struct|enum|trait)\s+[A-Za-z_]\w*)", re.M),
    "go": re.compile(r"^(func\s+(?:\([^)]*\)\s*)?[A-Za-z_]\w*\s*\([^)]*\)[^{\n]*|type\s+[A-Za-z_]\w*\s+\w+)", re.M),
    "sh": re.compile(r"^[ \t]*((?:function\s+)?[A-Za-z_][\w-]*\s*\(\))\s*\{", re.M),
}
_BARE_SIG = re.compile(r"\bdef\s+__\w+__\s*\(\s*self\s*\)|\bdef\s+\w+\s*\(\s*self\s*(?:,\s*\w+\s*)?\)\s*$|\bconstructor\s*\(\s*\)")
_CONSTS: dict[str, re.Pattern[str]] = {
    "py": re.compile(r"^([A-Z][A-Z0-9_]{1,}(?:\[[^\]\n]{1,30}\])?)\s*(?::\s*[^=\n]+)?=\s*([^\n]+)$", re.M),
    "js": re.compile(r"^(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*(?::\s*[^=\n]+)?=\s*"
                     r"((?:-?\d[\d_.]*(?:e-?\d+)?|\"[^\"\n]*\"|'[^'\n]*'|`[^`\n]*`|true|false|\[[^\]\n]*\]|"
                     r"\{[^}\n]*\})\s*;?)\s*(?://.*)?$", re.M),
    "rs": re.compile(r"^[ \t]*(?:pub\s+)?(?:const|static)\s+([A-Z][A-Z0-9_]*)\s*:\s*[^=\n]+=\s*([^;\n]+);", re.M),
    "go": re.compile(r"^[ \t]*([A-Z][A-Za-z0-9_]*|[a-z]\w*)\s*(?:[A-Za-z.\[\]]+\s*)?=\s*((?:-?\d[\d_.]*|\"[^\"\n]*\"|"
                     r"true|false))\s*$", re.M),
    "sh": re.compile(r"^(?:export\s+)?([A-Z][A-Z0-9_]+)=([^\n]+)$", re.M),
}
# settings written inside functions (``num_epochs = 20``, ``let threshold = 0.8;``): literal values only
_LOCAL_LITERALS: dict[str, re.Pattern[str]] = {
    "py": re.compile(r"^[ \t]+([a-z_][a-z0-9_]{2,})\s*(?::\s*\w+\s*)?=\s*(-?\d[\d_]*\.?\d*(?:e-?\d+)?|"
                     r"\"[^\"\n]{1,60}\"|'[^'\n]{1,60}')\s*(?:#.*)?$", re.M),
    "js": re.compile(r"^[ \t]+(?:const|let|var)\s+([A-Za-z_$][\w$]{2,})\s*=\s*(-?\d[\d_]*\.?\d*|\"[^\"\n]{1,60}\"|"
                     r"'[^'\n]{1,60}')\s*;?\s*(?://.*)?$", re.M),
}
# settings passed or looped over: ``lr=0.001``, ``for epoch in range(20)``
# an assignment whose value holds a number: the settings and formulas the code computes with
# (``optimizer = optim.Adam(model.parameters(), lr=0.001)``, ``score = 0.7 * a + 0.3 * b``)
_PY_NUMERIC_SET = re.compile(r"^[ \t]*([A-Za-z_][\w.]*(?:\[[^\]\n]{1,20}\])?)\s*=\s*([^=\n][^\n]{0,240})$", re.M)
FORMULA_CHARS = 130
"""A numeric assignment (a setting or a formula: ``target = 0.5 * t + 0.3 * h + noise``) is
clipped to this many characters: the whole formula is what "how is X computed" asks."""
_NUMBER = re.compile(r"(?<![\w\[.:])-?(?:\d+\.\d+|[2-9]|\d{2,})(?![\w\]])")  # not 0/1, no index or slice
# in an edit's new lines, a branch and what it does (``if 'PixelData' in ds: required.append(...)``):
# the decision a fix made, which a signature or constant list does not show
_PY_BRANCH = re.compile(r"^[ \t]*((?:if|elif)\s+[^\n]{3,80}?):[ \t]*(?:#[^\n]*)?\n[ \t]+([^\n#]{3,80}?)[ \t]*$", re.M)
MAX_BRANCHES = 3
_PY_RANGE = re.compile(r"^[ \t]*for\s+(\w+)\s+in\s+range\(([^()\n]{1,30})\)", re.M)
_TRIVIAL = frozenset({"0", "1", "-1", "0.0", "1.0", "''", '""', "[]", "{}"})
_CONF_PAIR: dict[str, re.Pattern[str]] = {
    "yaml": re.compile(r"^([A-Za-z_][\w.-]*):[ \t]+([^\n#]+?)\s*(?:#.*)?$", re.M),
    "toml": re.compile(r"^([A-Za-z_][\w.-]*)\s*=\s*([^\n#]+?)\s*(?:#.*)?$", re.M),
    "env": re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=([^\n]*)$", re.M),
}
_DATA_FILE = re.compile(
    r"[\"'`]((?:~?/)?(?:[\w.-]+/)*[\w.-]+\.(?:csv|tsv|json|jsonl|ndjson|parquet|txt|db|sqlite3?|ya?ml|toml|xlsx?|npy|npz|"
    r"pt|pth|pkl|pickle|h5|hdf5|html|md|wav|mp3|mp4|png|jpe?g|svg|pdf|zip|gz))[\"'`]")
_IDS = re.compile(r"declare_id!\(\s*\"(\w+)\"\s*\)|\b([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")

# what the code reads from or talks to, by name: one fact per kind, its names joined
# (``localStorage: random-min, random-max``, ``env: API_KEY``, ``routes: POST /login``)
_STORAGE = re.compile(r"\b(localStorage|sessionStorage)\.(?:getItem|setItem|removeItem)\(\s*[\"'`]([^\"'`\n]{1,40})[\"'`]")
_ENV_READ = re.compile(r"\bos\.environ(?:\.get)?[\[(]\s*[\"']([A-Za-z_]\w*)[\"']|\bos\.getenv\(\s*[\"']([A-Za-z_]\w*)[\"']"
                       r"|\bprocess\.env\.([A-Za-z_]\w*)|\bprocess\.env\[\s*[\"']([A-Za-z_]\w*)[\"']"
                       r"|\benv::var\(\s*\"([A-Za-z_]\w*)\"|\bos\.Getenv\(\s*\"([A-Za-z_]\w*)\"")
_ROUTE = re.compile(r"(?:@|\b)(?:app|router|bp|api|blueprint|server)\.(get|post|put|patch|delete|route)\(\s*"
                    r"[\"'`](/[^\"'`\s]{0,60})[\"'`]", re.I)
_FETCH = re.compile(r"\b(?:fetch|axios\.(?:get|post|put|delete)|requests\.(?:get|post|put|delete))\(\s*[fr]?"
                    r"[\"'`]((?:https?://|/)[^\"'`\s]{1,80})[\"'`]")
_TITLE = re.compile(r"<title>([^<\n]{1,60})</title>", re.I)


# substrings every match of each pattern holds (one of them), checked before the search
_USED_NEEDLES = ((_STORAGE, ("Storage.",)), (_ENV_READ, ("env",)), (_ROUTE, ("\"/", "'/", "`/")),
                 (_FETCH, ("fetch(", "axios.", "requests.")))


_USED_ANY = re.compile(r"Storage\.|env|[\"'`]/|fetch\(|axios\.|requests\.")  # every needle above


def _used(text: str) -> list[tuple[int, str]]:
    """(position, fact) for the storage keys, env variables, routes and URLs the text uses."""
    found: dict[str, tuple[int, list[str]]] = {}  # label -> (first position, names)
    if ("env" not in text and "Storage." not in text and "fetch(" not in text and "axios." not in text
            and "requests." not in text and '"/' not in text and "'/" not in text and "`/" not in text):
        return []  # (no needle of any pattern (``_USED_ANY``'s literals): substring checks, no search)
    for rx, needles in _USED_NEEDLES:
        if not any(n in text for n in needles):
            continue  # (a substring every match holds is missing: no match, for less than a search)
        for m in rx.finditer(text):
            if rx is _STORAGE:
                label, name = m.group(1), m.group(2)
            elif rx is _ROUTE:
                label, name = "routes", f"{m.group(1).upper()} {m.group(2)}"
            else:
                label, name = ("env" if rx is _ENV_READ else "fetches"), next(g for g in m.groups() if g)
            pos, names = found.setdefault(label, (m.start(), []))
            if name not in names:
                names.append(name)
    return [(pos, f"{label}: " + _flat(", ".join(names), FACT_CHARS)) for label, (pos, names) in found.items()]


_KINDS = {
    "py": "py", "pyi": "py", "js": "js", "mjs": "js", "cjs": "js", "jsx": "js", "ts": "js", "tsx": "js",
    "rs": "rs", "go": "go", "sh": "sh", "bash": "sh", "zsh": "sh", "json": "json", "yaml": "yaml",
    "yml": "yaml", "toml": "toml", "ini": "toml", "cfg": "toml", "conf": "toml", "env": "env",
    "html": "js", "htm": "js", "vue": "js", "svelte": "js",  # their scripts
}


def kind_of(path: str) -> str:
    """The kind of file ``path`` names, from its file name (lowercased): ``.env*`` and ``*.env``
    files are "env", else its extension's entry in ``_KINDS`` ("" for none).

    Only the extension and the name's first four characters are lowercased, and each only when
    needed (issue 17: no copy of the name; lowering a piece alone gives the same ASCII letters
    ``_KINDS`` and ``.env`` hold; every value of ``_KINDS`` is a non-empty string)."""
    _, dot, ext = path.rpartition(".")
    if not dot or "/" in ext:
        return ""  # (no dot in the name: no extension, no ".env")
    # (a name opening with ".env" holds ".e" or ".E": only then is the name looked at, issue 17)
    if (".e" in path or ".E" in path) and path[path.rfind("/") + 1:][:4].lower() == ".env":
        return "env"  # (a name ending in ".env" has the extension "env", whose kind is "env" too)
    return _KINDS.get(ext) or _KINDS.get(ext.lower(), "")  # (an extension in lower case: no copy)


def _flat(text: str, n: int = FACT_CHARS) -> str:
    t = " ".join(text.split())
    if len(t) <= n:
        return t
    head = t[: n - 1]
    space = head.rfind(" ")
    return (head[:space] if space > n // 2 else head).rstrip(" ,;:") + "…"


def _value(v: str) -> str:
    return _flat(v.strip().rstrip(";,"), VALUE_CHARS)


def _json_pairs(text: str) -> list[str]:
    try:
        data = json.loads(text)
    except ValueError:
        return []
    if not isinstance(data, dict):
        return []
    out = []
    for k, v in data.items():
        if isinstance(v, (str, int, float, bool)):
            out.append(f"{k}: {_value(json.dumps(v, ensure_ascii=False))}")
        elif isinstance(v, dict):
            scal = [f"{k2}={json.dumps(v2, ensure_ascii=False)}" for k2, v2 in v.items()
                    if isinstance(v2, (str, int, float, bool))][:4]
            if scal:
                out.append(f"{k}: {_flat(', '.join(scal), VALUE_CHARS + 20)}")
    return out


# The words a signature match opens with (after ``[ \t]*``, on its first line), per kind
_SIG_WORDS = {"py": ("def", "class", "async"), "js": ("export", "async", "function", "const", "let", "abstract",
                                                     "class", "interface"),
              "rs": ("pub", "async", "fn", "struct", "enum", "trait"), "go": ("func", "type")}
_SIG_LINES = {kind: re.compile(r"\n(?=[ \t]*(?:" + "|".join(words) + "))") for kind, words in _SIG_WORDS.items()}
"""A line break before a line that opens, after spaces, with one of the kind's words (its literal
``\n`` first: the search skips from break to break instead of trying a pattern at every position)."""


def _sig_items(kind: str, sig: re.Pattern[str], text: str) -> list[tuple[int, int, str]]:
    """(start, end, signature flattened) of each match of ``sig.finditer(text)``, tried only where
    a match can start (issue 17: the scan tries ``^[ \t]*`` and the alternatives at every position,
    ~13k instructions for a two-line file, ~2 ms for a 37k-character module). Every match starts
    at a line start whose line opens, after spaces, with one of the kind's words: the first line
    or one after a break ``_SIG_LINES`` finds, so those line starts, in order, from the end of the
    last match on, give the same matches. (The items built here: no list of matches between.)"""
    breaks = _SIG_LINES.get(kind)
    if breaks is None:
        return [(m.start(), m.end(), _flat(m.group(1))) for m in sig.finditer(text)]
    m = sig.match(text)
    end = 0 if m is None else m.end()
    out: list[tuple[int, int, str]] = [] if m is None else [(m.start(), end, _flat(m.group(1)))]
    for b in breaks.finditer(text):
        p = b.end()  # (the line start after the break)
        if p >= end and (m := sig.match(text, p)) is not None:
            end = m.end()
            out.append((m.start(), end, _flat(m.group(1))))
    return out


def _py_bodies_possible(text: str) -> bool:
    """False when no Python function in ``text`` can have a body of ``MIN_STATEMENTS`` lines, so
    ``function_lines`` would say nothing: a body is lines after its ``def`` line's newline, so it
    has at most ``len(text.splitlines()) - 1`` of them (issue 17: most files read are short)."""
    if text.count("\n") > _behaviour.MIN_STATEMENTS:
        return True  # (so many line breaks: at least that many lines)
    return len(text.splitlines()) - 1 >= _behaviour.MIN_STATEMENTS


_PY_MORE = re.compile(r""""|'|`|=|#|/|-|import|range\(|env|Storage\.|fetch\(|axios\.|requests\.""")
"""Every match of ``_more_facts``' patterns in a whole Python text holds one of these: a quote, ``=``,
a comment's ``#``, ``/`` or ``-`` (a uuid's too), or a word the imports, ``range`` loops and ``_used``
need (issue 17: without any, a text's facts are its signatures', and the ~17 checks and scans of
``_more_facts`` are one search; each alternative a literal, so the search skips to their first
characters instead of trying every position)."""


_PY_FIRST_ONLY = re.compile(_SIG_LINES["py"].pattern.replace("(?=", "(?:", 1) + "|" + _PY_MORE.pattern)
"""A line break before a ``def``/``class``/``async`` line (``_SIG_LINES``) or a needle of ``_PY_MORE``,
in one search. A whole Python text without any, whose functions cannot have a body of
``MIN_STATEMENTS`` lines, has one fact at most: the signature its first line opens with (no other
line starts one, ``_more_facts`` finds nothing, ``function_lines`` says nothing): ``content_facts``
returns it without the general path's checks and scans (issue 17: a short module read whole)."""


def _more_facts(path: str, kind: str, text: str, whole: bool) -> list[tuple[int, int, str]]:
    """``content_facts``' (priority, position, fact) items other than the signatures: the file's own
    line, constants, settings, config pairs, data files, what it uses, imports and writes, a page's
    title and sections, ids."""
    found: list[tuple[int, int, str]] = []
    # (substring pre-checks: each pattern's matches hold one of these, issue 17)
    quoted = '"' in text or "'" in text or "`" in text
    assigns = "=" in text
    m = _PY_DOC.match(text) if kind == "py" and whole and ('"""' in text or "'''" in text) else None
    m = m or (_HEAD_COMMENT.match(text) if whole and ("/" in text or "#" in text or "--" in text) else None)
    if m and m.group(m.lastindex or 1):
        about = m.group(m.lastindex or 1).strip().rstrip("*/->").strip().strip("\"'").strip()
        if len(about) >= 12 and not about.lower().startswith(("!", "eslint", "type:", "noqa", "pylint", "-*-")):
            found.append((0, -1, "about: " + _flat(about)))
    const = _CONSTS.get(kind) if assigns else None
    if const is not None:
        for m in const.finditer(text):
            value = m.group(2)
            if kind == "py" and value.strip().startswith(("(", "[", "{")) and not value.rstrip().endswith((")", "]", "}")):
                # a multi-line literal: its entries in short (``{"tests": [3 items], ...}``, ``[(...), … 49 items]``)
                found.append((1, m.start(), f"{m.group(1)} = {literal_digest(text, m.start(2))}"))
                continue
            # (a keyed constant, ``EXTRAS["dev"] = EXTRAS["tests"] + ["tox"]``, is usually an expression)
            found.append((1, m.start(), f"{m.group(1)} = " + (_flat(value.strip().rstrip(";,"), FORMULA_CHARS)
                                                              if "[" in m.group(1) else _value(value))))
    local = _LOCAL_LITERALS.get(kind) if kind != "py" and assigns else None  # py: the numeric settings below
    if local is not None:
        found += [(4, m.start(), f"{m.group(1)} = {_value(m.group(2))}") for m in local.finditer(text)
                  if m.group(2) not in _TRIVIAL]
    if kind == "py":
        # (each comprehension only where its pattern can match: an empty one still costs a call)
        if assigns:
            found += [(4, m.start(), f"{m.group(1)} = {_flat(m.group(2).split('  #')[0], FORMULA_CHARS)}")
                      for m in _PY_NUMERIC_SET.finditer(text)
                      if _NUMBER.search(m.group(2)) and m.group(2).strip() not in _TRIVIAL
                      and not m.group(1).isupper()]  # constants are said above
        if "range(" in text:
            found += [(4, m.start(), f"for {m.group(1)} in range({_flat(m.group(2), 30)})")
                      for m in _PY_RANGE.finditer(text)]
        if not whole:
            found += [(4, m.start(), _flat(f"{m.group(1)}: {m.group(2).strip()}", FORMULA_CHARS))
                      for m in [b for b in _PY_BRANCH.finditer(text) if "__name__" not in b.group(1)][:MAX_BRANCHES]]
    if kind == "json":
        found += [(1, i, p) for i, p in enumerate(_json_pairs(text))]
    elif kind in _CONF_PAIR:
        found += [(1, m.start(), f"{m.group(1)}: {_value(m.group(2))}" if kind != "toml"
                   else f"{m.group(1)} = {_value(m.group(2))}")
                  for m in _CONF_PAIR[kind].finditer(text) if m.group(2).strip()]
    if kind not in ("json", "yaml", "toml", "env", "") and quoted:
        for m in _DATA_FILE.finditer(text):
            found.append((3, m.start(), "uses " + m.group(1)))
    if kind in ("py", "js", "rs", "go", "sh") and (used := _used(text)):
        found += [(3, pos, fact) for pos, fact in used]
    if kind in ("py", "js"):
        found += io_facts(kind, text)
    page = path.lower().endswith((".html", ".htm"))
    title = _TITLE.search(text) if whole and page else None
    if title and title.group(1).strip():
        found.append((0, -1, "title: " + _flat(title.group(1).strip())))
    if page:
        found += [f for f in html_facts(text)  # (a page whose one heading is its title: said once)
                  if not (title and f[2] == "sections: " + _flat(title.group(1).strip(), SECTION_CHARS))]
    for m in (_IDS.finditer(text) if "-" in text or "declare_id!(" in text else ()):
        found.append((1, m.start(), "id " + (m.group(1) or m.group(2))))
    return found


def content_facts(path: str, text: str, whole: bool = True, *, kind: str | None = None,
                  lines: int | None = None) -> list[str]:
    """Short facts about what ``text`` (written to ``path``) defines, in file order.

    ``whole``: the text is the whole file (a write), not an edit's new lines; only then is its
    opening docstring or comment the file's own explanation. ``kind``: ``kind_of(path)``, when
    the caller has it; ``lines``: ``len(text.splitlines())``, when the caller has it.
    """
    if not text or text.isspace():  # (no stripped copy of the text to see it is blank)
        return []
    if kind is None:
        kind = kind_of(path)
    if kind == "py" and whole and (lines <= _behaviour.MIN_STATEMENTS if lines is not None
                                   else not _py_bodies_possible(text)) and _PY_FIRST_ONLY.search(text) is None:
        m = _SIGS["py"].match(text)  # (a short module of signatures alone: its first line's, issue 17)
        return [] if m is None else [_flat(m.group(1))]
    found: list[tuple[int, int, str]] = []  # (priority, position, fact)
    sig = _SIGS.get(kind)
    bodies: list[tuple[int, int, str]] = []  # functions said with their statements (span, line)
    if sig is not None:
        # (a kind's signatures open with one of its words: a text without any has none, no scan)
        sigs = _sig_items(kind, sig, text) if (
            kind not in _SIG_WORDS or any(map(text.__contains__, _SIG_WORDS[kind]))) else []
        said = _behaviour.function_lines(kind, text, sigs) if kind == "js" or kind == "py" and sigs and (
            lines > _behaviour.MIN_STATEMENTS if lines is not None else _py_bodies_possible(text)) else {}
        if said:
            bodies = [(a, b, line) for line, (a, b) in said.values()]
        # a signature that says nothing a reader asks for (``def __init__(self)``) goes last
        if sigs:
            found += [(2, start, said[start][0]) if start in said else
                      (5 if ("self" in s or "constructor" in s) and _BARE_SIG.search(s) else 2, start, s)
                      for start, _, s in sigs]
        if kind == "js" and not whole:
            found += [(2, pos, line) for pos, line in _behaviour.branch_lines(text, [(a, b) for a, b, _ in bodies])]
    # (a page, ``.html``, is never "py": kind_of(path) is "js" for it)
    if kind != "py" or not whole or _PY_MORE.search(text) is not None:
        found += _more_facts(path, kind, text, whole)  # (the signatures' is all a plain one has)
        if bodies:  # a setting a function's line already says whole is not said twice
            found = [f for f in found if f[0] != 4 or not any(a <= f[1] < b and f[2] in line for a, b, line in bodies)]

    # the most telling first (the file's own line, constants, config, ids, signatures, data
    # files, then settings) up to MAX_FACTS, shown in file order
    if len(found) <= 1:
        return [found[0][2]] if found else []  # (one fact: kept whatever its priority, nothing to order)
    if any(p < 5 for p, _, _ in found):
        found = [f for f in found if f[0] < 5]  # a bare ``def __init__(self)`` only when nothing else is said
    written = {f[2][len("writes "):] for f in found if f[2].startswith("writes ")}
    found = [f for f in found if not (f[2].startswith("uses ") and f[2][len("uses "):] in written)]
    seen: set[str] = set()
    picked: list[tuple[int, int, str]] = []
    for item in sorted(found):
        if item[2] not in seen and len(picked) < MAX_FACTS:
            seen.add(item[2])
            picked.append(item)
    return [fact for _, _, fact in sorted(picked, key=lambda t: t[1])]


_HEADING = re.compile(r"<h([1-3])\b[^>]*>(.*?)</h\1>", re.I | re.S)
_TAG = re.compile(r"<[^>]+>")
_DATA_SCRIPT = re.compile(r"<script\b[^>]*type=[\"']application/(?:ld\+)?json[\"'][^>]*>(.*?)</script>", re.I | re.S)
_ID_ATTR = re.compile(r"\bid=[\"']([\w-]+)[\"']")
SECTION_CHARS = 160


def html_facts(text: str) -> list[tuple[int, int, str]]:
    """A page's structure: its headings in order, and data embedded as JSON (where the page's data lives)."""
    out: list[tuple[int, int, str]] = []
    heads = []
    for m in _HEADING.finditer(text):
        h = " ".join(html.unescape(_TAG.sub("", m.group(2))).split())
        if h and h not in heads:
            heads.append(h)
    if heads:
        out.append((1, _HEADING.search(text).start(), "sections: " + _flat(" | ".join(heads), SECTION_CHARS)))  # type: ignore[union-attr]
    for m in _DATA_SCRIPT.finditer(text):
        ident = _ID_ATTR.search(m.group(0)[:200])
        where = f'<script id="{ident.group(1)}">' if ident else "<script> JSON"
        try:
            data = json.loads(m.group(1))
        except ValueError:
            data = None
        size = f" ({len(data)} items)" if isinstance(data, (list, dict)) else ""
        keys = ""
        if isinstance(data, list) and data and isinstance(data[0], dict):
            keys = "; item keys: " + ", ".join(list(data[0])[:8])
        out.append((1, m.start(), _flat(f"data embedded as JSON in {where}{size}{keys}", FORMULA_CHARS)))
    return out


def fact_key(fact: str) -> str:
    """What a fact is about (a name), so a later write of the same name replaces it."""
    head = fact.split("(", 1)[0].split(" = ", 1)[0].split(": ", 1)[0]
    return head.strip()


def merge_facts(new: list[str], old: list[str], limit: int = MAX_FACTS) -> list[str]:
    """The newest write's facts first, then the older ones it did not redefine, cut to ``limit``."""
    keys = {fact_key(f) for f in new}
    if new:
        keys.add("about")  # the file's old header may be gone: only the newest text's own is sure
    return (list(new) + [f for f in old if fact_key(f) not in keys])[:limit]


_CONTENT_KEYS = ("content", "file_text", "contents", "new_content", "text", "code")
_NEW_KEYS = ("new_string", "new_str", "newText", "new_text", "replace", "new")


def written_text(inp: dict) -> str:
    """The text a file tool call puts into its file: the whole content of a write, or the new
    side of each edit (joined), "" when the input names none."""
    edits = inp.get("edits")
    if isinstance(edits, list):
        return "\n".join(str(e.get(k)) for e in edits if isinstance(e, dict)
                         for k in _NEW_KEYS if isinstance(e.get(k), str))
    for key in _NEW_KEYS + _CONTENT_KEYS:
        v = inp.get(key)
        if isinstance(v, str):
            return v
    return ""


# --- what the code pulls in and where it writes ----------------------------------------------------
# "which extra dependency does module X introduce", "where does script X write its output": the
# third-party imports (the standard library is not a dependency) and the paths written to.
_PY_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)[\w.]*[ \t]+import\b|import[ \t]+([A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*))", re.M)
_JS_IMPORT = re.compile(r"""(?:\bfrom\s+|\brequire\(\s*|^\s*import\s+)["'`]((?:@[\w.-]+/)?[\w.-]+)[^"'`]*["'`]""", re.M)
_JS_BUILTIN = frozenset({"fs", "path", "os", "http", "https", "url", "util", "crypto", "child_process", "events",
                         "stream", "zlib", "readline", "net", "assert", "buffer", "process", "node"})
_PATH_ARG = r"""[fr]?["'`]((?:~?/|\./)?[^"'`\s{}]{2,120})["'`]"""
_PY_WRITES = re.compile(r"\bopen\(\s*" + _PATH_ARG + r"""\s*,\s*["'][wax]b?\+?["']"""
                        r"|\.(?:to_csv|to_json|to_parquet|to_excel|to_pickle|savefig|write_text|write_bytes)\(\s*" + _PATH_ARG
                        + r"|\bPath\(\s*" + _PATH_ARG + r"\s*\)\.(?:write_text|write_bytes|open\(\s*[\"'][wa])"
                        + r"|\b(?:torch\.save|np\.save(?:txt|z)?|joblib\.dump|pickle\.dump)\([^,\n]*,\s*" + _PATH_ARG
                        + r"|\bos\.makedirs\(\s*" + _PATH_ARG)
_JS_WRITES = re.compile(r"\b(?:writeFileSync|writeFile|appendFileSync|createWriteStream|mkdirSync)\(\s*" + _PATH_ARG)
# the name every match of _PY_WRITES (_JS_WRITES) holds, one of these: checked before the scan
_PY_WRITE_NEEDLES = ("open(", "to_csv", "to_json", "to_parquet", "to_excel", "to_pickle", "savefig", "write_text",
                     "write_bytes", "Path(", "torch.save", "np.save", "joblib.dump", "pickle.dump", "os.makedirs(")
_JS_WRITE_NEEDLES = ("writeFile", "appendFileSync", "createWriteStream", "mkdirSync")
_KW_CALL = re.compile(r"^[ \t]*([a-z_][\w.]*)\s*=\s*([A-Z]\w*(?:\.\w+)*\([^()\n]*\b[a-z_]\w*=[^()\n]*\))[ \t]*(?:#.*)?$", re.M)
_ATTR_LITERAL = re.compile(r"^[ \t]*([A-Za-z_]\w*(?:\.\w+)+)\s*=\s*([\[{(])[ \t]*$", re.M)
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"__future__"}


def io_facts(kind: str, text: str) -> list[tuple[int, int, str]]:
    """(priority, position, fact): ``imports: requests, pandas``, ``writes out/x.json``, and an object built
    with keyword settings (``ytt = YouTubeTranscriptApi(http_client=session)``: how two libraries are wired)."""
    out: list[tuple[int, int, str]] = []
    mods: list[str] = []
    first = -1
    rx = _PY_IMPORT if kind == "py" else _JS_IMPORT
    has = "import" in text or kind != "py" and ("from" in text or "require(" in text)
    for m in (rx.finditer(text) if has else ()):
        if kind == "py":
            names = [m.group(1)] if m.group(1) else [n.strip().split(".")[0].split()[0] for n in m.group(2).split(",")]
            names = [n for n in names if n not in _STDLIB]
        else:
            names = [m.group(1)] if not m.group(1).startswith(".") and m.group(1) not in _JS_BUILTIN else []
        for n in names:
            if n and n not in mods:
                mods.append(n)
                first = m.start() if first < 0 else first
    if mods:
        out.append((1, first, "imports: " + _flat(", ".join(mods), FACT_CHARS)))
    # (every write pattern holds a call's parenthesis and a quoted path)
    writes = "(" in text and ('"' in text or "'" in text or "`" in text) and any(
        n in text for n in (_PY_WRITE_NEEDLES if kind == "py" else _JS_WRITE_NEEDLES))  # (a call's name: no scan)
    for m in ((_PY_WRITES if kind == "py" else _JS_WRITES).finditer(text) if writes else ()):
        path = next(g for g in m.groups() if g)
        out.append((1, m.start(), ("creates dir " if "makedirs" in m.group(0) or "mkdirSync" in m.group(0)
                                   else "writes ") + path))
    if kind == "py" and "=" in text:  # (both patterns are assignments)
        out += [(4, m.start(), f"{m.group(1)} = {_flat(m.group(2), FORMULA_CHARS)}") for m in _KW_CALL.finditer(text)]
        # an attribute set to a multi-line literal (``session.proxies = {...}``): how an object is configured
        out += [(4, m.start(), f"{m.group(1)} = {literal_digest(text, m.start(2))}") for m in _ATTR_LITERAL.finditer(text)]
    return out


_OPEN_CLOSE = {"[": "]", "(": ")", "{": "}"}
LITERAL_CHARS = 200
NAMES_CHARS = 90
"""A nested list of up to 6 scalars this short is shown whole (``"lint": ["mypy==0.910", ...]``)."""


def _short(v: object, depth: int = 0) -> str:
    """A literal value in short: scalars as written (clipped), nested collections as their size."""
    if isinstance(v, str):
        return json.dumps(v if len(v) <= 40 else v[:39] + "…", ensure_ascii=False)
    if isinstance(v, (int, float, bool)) or v is None:
        return repr(v)
    if isinstance(v, (list, tuple, set)):
        if depth >= 1:
            if len(v) <= 6 and all(isinstance(x, (str, int, float, bool)) for x in v):  # a record: inline
                inner = ", ".join(_short(x, depth + 1) for x in v)
                # (a short list of names, such as an extra's pinned packages, is the value asked for)
                if isinstance(v, tuple) and len(v) <= 4 or len(inner) <= NAMES_CHARS:
                    return f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
            return f"[{len(v)} items]"
        body = ", ".join(_short(x, depth + 1) for x in list(v)[:3])
        return ("(" if isinstance(v, tuple) else "[") + body + ("" if len(v) <= 3 else ", …") + (
            ")" if isinstance(v, tuple) else "]")
    if isinstance(v, dict):
        if depth >= 1:
            return f"{{{len(v)} keys}}"
        return "{" + ", ".join(f"{_short(k, 1)}: {_short(x, 1)}" for k, x in v.items()) + "}"
    return "…"


def literal_digest(text: str, start: int) -> str:
    """A multi-line literal opening at ``text[start]`` in short, with its entry count:
    ``{"tests": [3 items], "lint": [4 items]}``, ``[("Pxt1xpiyabU", "GPT 5.6 SOL…", "3way"), … (49 items)]``."""
    opener = text[start]
    end = _behaviour.closing(text, start, "\"'", "#", 60_000)
    if end < 0:
        return opener + "…"
    try:
        value = ast.literal_eval(text[start:end + 1])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        n = sum(1 for ln in text[start + 1:end].splitlines() if ln.strip() and not ln.strip().startswith("#"))
        return f"{opener}… {n} lines{_OPEN_CLOSE[opener]}"
    short = _short(value)
    n = len(value) if isinstance(value, (list, tuple, dict, set)) else 0
    if len(short) > LITERAL_CHARS:
        short = _flat(short, LITERAL_CHARS)
    return short + (f" ({n} items)" if isinstance(value, (list, tuple, set)) and n > 3 else "")


_NUMBERED = re.compile(r"^[ \t]*(\d{1,6})(?:[:\t|│]|  )[ \t]?", re.M)
_READ_CHARS = 40_000
"""A read result longer than this is judged by its head (what a file defines is mostly there)."""


def read_facts(path: str, text: str) -> list[str]:
    """``content_facts`` of a file the agent read, from the tool's listing (line numbers, a
    ``[File: ...]`` header and ``(N more lines ...)`` markers dropped). The opening docstring
    counts only when the listing starts at line 1."""
    kind = kind_of(path)
    if not kind or not text:
        return []
    text = text[:_READ_CHARS]
    lines = text.splitlines()
    # (a listing needs 3 numbered lines: a shorter text is not matched line by line)
    numbered = [m for m in (_NUMBERED.match(ln) for ln in lines) if m] if len(lines) >= 3 else []
    if numbered and len(numbered) >= max(3, len(lines) // 2):
        first = int(numbered[0].group(1))
        body = "\n".join(ln[m.end():] for ln in lines if (m := _NUMBERED.match(ln)))
        facts = content_facts(path, body, whole=first == 1, kind=kind)
        return [f for f in facts if not f.startswith(("if ", "elif "))]  # (a branch is what an edit added)
    return content_facts(path, text, whole=True, kind=kind, lines=len(lines))
