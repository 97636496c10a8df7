"""Short deterministic digests of what a tool call put into a file.

A reader of a summary that lists ``src/lib.rs (edit ×3)`` cannot tell what changed; one line
per file does: for a write its size and the top-level names it defines (functions, classes,
exports, config keys, Dockerfile base images), for an edit the replaced -> new text (clipped)
or line counts plus the names it added and removed. Everything is computed from the tool
input (Write/Edit/MultiEdit, str_replace_editor, apply_patch hunks, SWE-agent edits, pi
write/edit, heredoc/printf/echo bodies) by plain rules; the same input gives the same digest.

Every name a digest states is copied from the input text, so the summary's identifier check
finds it in the covered range.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

DIGEST_CHARS = 240
"""A digest is cut to this many characters."""
QUOTE_CHARS = 56
CONTENT_CHARS = 200
SMALL_WRITE_CHARS = 200
"""A write this small is quoted whole (placeholder ids, seed values, one-line configs)."""
"""Changed lines quoted (flattened) when they define no names."""
"""Each side of an ``old → new`` pair is cut to this many characters."""
MAX_NAMES = 6

_CONTENT_KEYS = ("content", "file_text", "contents", "new_content", "text", "code")
_PAIRS = (("old_string", "new_string"), ("old_str", "new_str"), ("oldText", "newText"),
          ("old_text", "new_text"), ("search", "replace"), ("old", "new"))

# --- names ------------------------------------------------------------------------------------

_PY_TOP = re.compile(r"^(?:async\s+def|def|class)\s+([A-Za-z_]\w*)|^([A-Z][A-Z0-9_]{2,})\s*[:=]", re.M)
_PY_ANY = re.compile(r"^\s*(?:async\s+def|def|class)\s+([A-Za-z_]\w*)", re.M)
_JS = re.compile(
    r"^\s*(?:export\s+(?:default\s+)?)?(?:async\s+)?(?:function\*?|class|interface|type|enum|const|let|var)"
    r"\s+([A-Za-z_$][\w$]*)", re.M)
_JS_TOP = re.compile(
    r"^(?:export\s+(?:default\s+)?)?(?:async\s+)?(?:function\*?|class|interface|type|enum|const|let|var)"
    r"\s+([A-Za-z_$][\w$]*)", re.M)
_RS = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:fn|struct|enum|trait|mod|const|static|type)"
                 r"\s+([A-Za-z_]\w*)|declare_id!\(\"(\w+)\"\)", re.M)
_GO = re.compile(r"^func\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)|^type\s+([A-Za-z_]\w*)", re.M)
_SH = re.compile(r"^\s*(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\)\s*\{", re.M)
_MD = re.compile(r"^#{1,2}\s+(.{1,40}?)\s*#*\s*$", re.M)
_DOCKER = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.M | re.I)
_TOML_TABLE = re.compile(r"^\s*\[\[?([^\]\n]+)\]\]?\s*$", re.M)
_CONF_KEY = re.compile(r"^\s*\"?([A-Za-z0-9_@][\w@/.-]*)\"?\s*[:=]", re.M)
_YAML_TOP = re.compile(r"^([A-Za-z_][\w.-]*):", re.M)
_TOML_TOP = re.compile(r"^([A-Za-z_][\w.-]*)\s*=", re.M)
_HTML_ID = re.compile(r"<(?:title)>([^<]{1,40})</title>|\bid=\"([\w-]+)\"")

_CODE_EXT = {
    "py": "py", "pyi": "py", "js": "js", "mjs": "js", "cjs": "js", "jsx": "js", "ts": "js",
    "tsx": "js", "rs": "rs", "go": "go", "sh": "sh", "bash": "sh", "zsh": "sh", "md": "md",
    "json": "json", "toml": "toml", "yaml": "yaml", "yml": "yaml", "html": "html", "htm": "html",
}


_DATA_KINDS = {"json", "toml", "yaml", ""}
"""Kinds whose small writes are quoted whole even when they name keys: the values matter."""


def _kind(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    if base.lower().startswith(("dockerfile", "containerfile")):
        return "docker"
    return _CODE_EXT.get(base.rsplit(".", 1)[-1].lower(), "") if "." in base else ""


def _found(rx: re.Pattern[str], text: str) -> list[str]:
    out: list[str] = []
    for m in rx.finditer(text):
        name = next((g for g in m.groups() if g), None) if m.groups() else m.group(0)
        if name and name not in out:
            out.append(name.strip())
    return out


def _json_names(path: str, text: str) -> list[str]:
    try:
        data = json.loads(text)
    except ValueError:
        return _found(_CONF_KEY, text)
    if not isinstance(data, dict):
        return []
    names = [k for k in data if isinstance(k, str)]
    if path.rsplit("/", 1)[-1] == "package.json":
        for key in ("dependencies", "devDependencies", "peerDependencies"):
            deps = data.get(key)
            if isinstance(deps, dict):
                names += [k for k in deps if isinstance(k, str)]
    return names


def top_names(path: str, text: str) -> list[str]:
    """The top-level names a whole file defines, by its extension."""
    kind = _kind(path)
    if kind == "py":
        return _found(_PY_TOP, text)
    if kind == "js":
        return _found(_JS_TOP, text)
    if kind == "rs":
        return [n for n in _found(_RS, text)]
    if kind == "go":
        return _found(_GO, text)
    if kind == "sh":
        return _found(_SH, text)
    if kind == "md":
        return _found(_MD, text)
    if kind == "json":
        return _json_names(path, text)
    if kind == "toml":
        return _found(_TOML_TOP, text.split("\n[", 1)[0]) + _found(_TOML_TABLE, text)
    if kind == "yaml":
        return _found(_YAML_TOP, text)
    if kind == "docker":
        return _found(_DOCKER, text)
    if kind == "html":
        return _found(_HTML_ID, text)
    return []


def fragment_names(path: str, text: str) -> list[str]:
    """Names defined anywhere in a fragment (an edit's lines), indentation ignored."""
    kind = _kind(path)
    if kind == "py":
        return _found(_PY_ANY, text)
    if kind == "js":
        return _found(_JS, text)
    if kind in ("json", "toml", "yaml"):
        return _found(_CONF_KEY, text) + (_found(_TOML_TABLE, text) if kind == "toml" else [])
    return top_names(path, text)


# --- rendering ----------------------------------------------------------------------------------


def _flat(text: str, n: int) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 1].rstrip() + "…"


def _names(label: str, names: list[str]) -> str:
    if not names:
        return ""
    more = f" (+{len(names) - MAX_NAMES})" if len(names) > MAX_NAMES else ""
    return f"{label} " + ", ".join(names[:MAX_NAMES]) + more


def _size(text: str) -> str:
    n_lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    n_bytes = len(text.encode("utf-8", "replace"))
    size = f"{n_bytes} B" if n_bytes < 1024 else f"{n_bytes / 1024:.1f} KB"
    return f"{n_lines} line{'s' if n_lines != 1 else ''}, {size}"


def write_digest(path: str, text: str, append: bool = False) -> str:
    """``42 lines, 1.3 KB; defines main, Config`` for a whole-file write (or an append)."""
    names = (fragment_names if append else top_names)(path, text)
    head = ("appended " if append else "wrote ") + _size(text)
    quote = len(text) <= SMALL_WRITE_CHARS and text.strip() and (not names or _kind(path) in _DATA_KINDS)
    small = f"\"{_flat(text, CONTENT_CHARS)}\"" if quote else ""
    return _flat("; ".join(p for p in (head, _names("defines", names), small) if p), DIGEST_CHARS)


def _changed_lines(old: str, new: str) -> tuple[list[str], list[str]]:
    a, b = old.splitlines(), new.splitlines()
    removed: list[str] = []
    added: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            removed += a[i1:i2]
        if tag in ("replace", "insert"):
            added += b[j1:j2]
    return [x for x in removed if x.strip()], [x for x in added if x.strip()]


def lines_digest(path: str, removed: list[str], added: list[str], prefix: str = "") -> str:
    """Digest of changed lines: one ``old → new`` pair, or counts and the names it touched."""
    if len(removed) <= 1 and len(added) <= 1:
        old = _flat(removed[0], QUOTE_CHARS) if removed else ""
        new = _flat(added[0], QUOTE_CHARS) if added else ""
        if old and new:
            body = f"\"{old}\" → \"{new}\""
        elif new:
            body = f"added \"{new}\""
        elif old:
            body = f"removed \"{old}\""
        else:
            body = "whitespace only"
        return _flat(prefix + body, DIGEST_CHARS)
    gained = fragment_names(path, "\n".join(added))
    lost = fragment_names(path, "\n".join(removed))
    parts = [f"+{len(added)} -{len(removed)} lines",
             _names("adds", [n for n in gained if n not in lost]),
             _names("removes", [n for n in lost if n not in gained])]
    if not parts[1] and not parts[2]:
        # no names to cite: what the new lines say (the values, the condition, the call)
        lines = added or removed
        body = " ⏎ ".join(" ".join(x.split()) for x in lines)
        parts.append(("new: " if added else "removed: ") + f"\"{_flat(body, CONTENT_CHARS)}\"")
    return _flat(prefix + "; ".join(p for p in parts if p), DIGEST_CHARS)


def edit_digest(path: str, old: str, new: str) -> str:
    removed, added = _changed_lines(old, new)
    if not removed and not added and old != new:
        removed, added = [old], [new]  # a change inside one line
    return lines_digest(path, removed, added)


# --- tool inputs ----------------------------------------------------------------------------


def _pair_of(d: dict[str, Any]) -> tuple[str, str] | None:
    for a, b in _PAIRS:
        if isinstance(d.get(a), str) or isinstance(d.get(b), str):
            return str(d.get(a) or ""), str(d.get(b) or "")
    return None


def input_digest(path: str, op: str, inp: dict[str, Any]) -> str:
    """Digest of a file tool call (Write/Edit/MultiEdit/str_replace_editor/pi/SWE-agent)."""
    edits = inp.get("edits")
    if isinstance(edits, list) and edits:
        removed: list[str] = []
        added: list[str] = []
        for e in edits:
            pair = _pair_of(e) if isinstance(e, dict) else None
            if pair:
                r, a = _changed_lines(*pair)
                removed += r or ([pair[0]] if pair[0] != pair[1] and not a else [])
                added += a or ([pair[1]] if pair[0] != pair[1] and not r else [])
        prefix = f"{len(edits)} edits: " if len(edits) > 1 else ""
        return lines_digest(path, removed, added, prefix)
    pair = _pair_of(inp)
    if pair is not None:
        return edit_digest(path, *pair)
    for key in _CONTENT_KEYS:
        v = inp.get(key)
        if isinstance(v, str):
            if op in ("insert", "append") or key == "text" and op != "create":
                return lines_digest(path, [], [x for x in v.splitlines() if x.strip()], "inserted: ")
            return write_digest(path, v)
    return ""


# --- patches ----------------------------------------------------------------------------------


@dataclass
class PatchFile:
    path: str
    op: str  # "add", "update", "delete", "move"
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def digest(self) -> str:
        if self.op == "delete":
            return "deleted"
        if self.op == "add":
            return write_digest(self.path, "\n".join(self.added) + ("\n" if self.added else ""))
        return lines_digest(self.path, [x for x in self.removed if x.strip()],
                            [x for x in self.added if x.strip()])


_PATCH_HEAD_RE = re.compile(r"^\*\*\* (Update|Add|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$")


def parse_patch(text: str) -> list[PatchFile]:
    """Files of a Codex ``*** Begin Patch`` envelope with their +/- lines, in order.

    Only real lines are read: a header must start its line, so a patch stored with literal
    ``\\n`` separators (one long line) yields nothing rather than a mangled path.
    """
    out: list[PatchFile] = []
    cur: PatchFile | None = None
    for line in text.splitlines():
        m = _PATCH_HEAD_RE.match(line)
        if m:
            if m.group(3):
                out.append(PatchFile(path=m.group(3), op="move"))
                continue
            cur = PatchFile(path=m.group(2), op=m.group(1).lower())
            out.append(cur)
            continue
        if line.startswith("*** "):
            cur = None if line.startswith("*** End Patch") else cur
            continue
        if cur is None:
            continue
        if line.startswith("+"):
            cur.added.append(line[1:])
        elif line.startswith("-"):
            cur.removed.append(line[1:])
    return out


# --- aider ------------------------------------------------------------------------------------

_AIDER_BLOCK_RE = re.compile(
    r"^(?P<path>[^\n`<>=]{1,300}?)\s*\n```[^\n]*\n<<<<<<< SEARCH\n(?P<old>.*?)^=======\n(?P<new>.*?)^>>>>>>> REPLACE",
    re.S | re.M,
)


def aider_blocks(text: str) -> dict[str, tuple[str, str]]:
    """Path -> (search, replace) of the SEARCH/REPLACE blocks in an aider reply (the last
    block per path wins; an empty SEARCH is a new file)."""
    out: dict[str, tuple[str, str]] = {}
    for m in _AIDER_BLOCK_RE.finditer(text):
        out[m.group("path").strip().strip("`*")] = (m.group("old"), m.group("new"))
    return out


def aider_digests(text: str, blocks: dict[str, tuple[str, str]] | None = None) -> dict[str, str]:
    """Path -> digest of the SEARCH/REPLACE blocks in an aider reply (``aider_blocks``)."""
    return {path: write_digest(path, new) if not old.strip() else edit_digest(path, old, new)
            for path, (old, new) in (aider_blocks(text) if blocks is None else blocks).items()}
