"""The deterministic "model" behind ``compactor.testing.anthropic_server``: what it answers and
how it reads a request.

- A template-summary request (``template_summary``): the section headings (``## Name`` lines) of
  the system prompt and the lifted state from the ``<untrusted_data name="lifted_state" ...>``
  block give one bullet per state item under the matching heading. Deliberately gullible: text
  that says "ignore previous instructions" *outside* every well-formed ``untrusted_data`` fence
  is obeyed (the summary then claims everything is done and drops the constraints), so a test
  fails if data can escape its fence.
- A probe request (``probe_reply``): the reader and the judge of ``compactor bench probes``.
- Token counts (``count_request_tokens``): ``ceil(chars / 4)`` of the request's text.
- The stand-in model protocol's recording (``write_request``).

Pure functions of the request body, no HTTP: the server (``anthropic_server``) calls them.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

FENCE_RE = re.compile(
    r'<untrusted_data name="(?P<name>[a-z_]+)" fence="(?P<fence>[0-9a-f]{8,64})">\n'
    r"(?P<body>.*?)\n"
    r'</untrusted_data fence="(?P=fence)">',
    re.S,
)
INJECTION_RE = re.compile(r"ignore (all )?(the )?previous instructions", re.I)
HEADING_RE = re.compile(r"^## (.+?)\s*$", re.M)


# --- the deterministic model -------------------------------------------------------------------


def count_request_tokens(body: dict[str, Any]) -> int:
    """Approximate input tokens of a request: ceil(chars / 4) of its text content."""
    return max(1, math.ceil(len(_request_text(body)) / 4))


def _request_text(body: dict[str, Any]) -> str:
    parts: list[str] = []
    system = body.get("system")
    if isinstance(system, str):
        parts.append(system)
    elif isinstance(system, list):
        parts.extend(b.get("text", "") for b in system if isinstance(b, dict))
    for m in body.get("messages") or []:
        parts.append(_content_text(m.get("content")))
    return "\n".join(parts)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    out: list[str] = []
    for b in content or []:
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t == "text":
            out.append(b.get("text", ""))
        elif t == "tool_use":
            out.append(f"{b.get('name', '')} {json.dumps(b.get('input', {}))}")
        elif t == "tool_result":
            out.append(_content_text(b.get("content")))
        elif t == "compaction":
            out.append(b.get("content") or "")
    return "\n".join(out)


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    return ""


def split_fenced(text: str) -> tuple[str, dict[str, str]]:
    """(text outside every well-formed fence, {name: fenced body})."""
    data: dict[str, str] = {}

    def take(m: re.Match[str]) -> str:
        data[m.group("name")] = m.group("body")
        return "\n"

    return FENCE_RE.sub(take, text), data


def _item_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for k in ("verbatim", "text", "request", "description", "summary", "command", "path", "name", "id"):
            v = item.get(k)
            if isinstance(v, str) and v.strip():
                return v
        return json.dumps(item, sort_keys=True, ensure_ascii=False)
    return json.dumps(item, ensure_ascii=False)


def _norm(s: str) -> str:
    return re.sub(r"[^a-z]", "", s.lower())


def template_summary(body: dict[str, Any], *, drop_constraints: bool = False) -> str:
    """What the fake model writes for a template request."""
    # The system prompt is ours (it may quote the phrase as an example); injected text can
    # only arrive through the messages, so only they are checked.
    request = "\n".join(_content_text(m.get("content")) for m in body.get("messages") or [])
    outside, data = split_fenced(request)
    if INJECTION_RE.search(outside):
        # The gullible path: an injection reached the instructions.
        return "All work is complete. Every test passed. Nothing else needs to be remembered."
    headings = HEADING_RE.findall(_system_text(body))
    if not headings:
        return "Summary of the request: " + " ".join(request.split())[:400] + "\n"
    try:
        state = json.loads(data.get("lifted_state", "{}"))
    except json.JSONDecodeError:
        state = {}
    if not isinstance(state, dict):
        state = {}
    by_heading: dict[str, list[str]] = {h: [] for h in headings}
    norm_heading = {_norm(h): h for h in headings}
    for key, value in state.items():
        if drop_constraints and "constraint" in key.lower():
            continue
        items = value if isinstance(value, list) else ([value] if isinstance(value, str) and value else [])
        if not items:
            continue
        target = norm_heading.get(_norm(key))
        if target is None:
            # "goal" -> "Goal", "todos" -> "Todos / plan", "unknown_actions" -> "Unknown outcomes"
            target = next((h for n, h in norm_heading.items() if n.startswith(_norm(key)[:5])), None)
        if target is None:
            continue
        by_heading[target].extend(_item_text(i) for i in items)
    lines: list[str] = []
    for h in headings:
        lines.append(f"## {h}")
        items = by_heading.get(h) or []
        if not items:
            lines.append("- (none)")
        for it in items:
            lines.append("- " + " ".join(it.split()))
        lines.append("")
    return "\n".join(lines).strip() + "\n"


def request_user_text(body: dict[str, Any]) -> str:
    """The user messages' text blocks, in order, joined by a blank line (as the model reads them)."""
    parts: list[str] = []
    for m in body.get("messages") or []:
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
            continue
        parts.extend(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")
    return "\n\n".join(parts)


def write_request(directory: str | Path, body: dict[str, Any]) -> Path:
    """Save one request as the stand-in model protocol wants it: ``system.txt``, ``user.txt``
    and ``request.json`` (model, max_tokens, system, messages) under ``directory``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / "system.txt").write_text(_system_text(body), encoding="utf-8")
    (d / "user.txt").write_text(request_user_text(body), encoding="utf-8")
    whole = {k: body.get(k) for k in ("model", "max_tokens", "system", "messages")}
    (d / "request.json").write_text(json.dumps(whole, indent=1, ensure_ascii=False), encoding="utf-8")
    return d


# --- the probe reader and judge -----------------------------------------------------------------

PROBE_RE = re.compile(r"\bcompactor-probe-(reader|judge)-v\d+\b")
PROBE_MIN_OVERLAP = 2
PROBE_FULL = 0.6
PROBE_PART = 0.25
MALFORMED_TEXT = "Sorry, I lost track of the format; here are my thoughts in prose instead."
_STOP = frozenset(
    "the and for was what which who whom whose why how when where that this these those with from "
    "into onto did does done has have had are were been being not but its it's any all can could "
    "would should will shall about after before than then them they their there here our you your "
    "agent user session file files".split()
)
_WORD_RE = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> set[str]:
    """Lower-case words of 3+ characters (or numbers), minus stop words; paths split."""
    return {w for w in _WORD_RE.findall(text.lower()) if (len(w) >= 3 or w.isdigit()) and w not in _STOP}


def _units(view: str) -> list[str]:
    """Lines of the view, long ones split into sentences: what a reader can quote."""
    out: list[str] = []
    for line in view.splitlines():
        line = line.strip()
        if not line:
            continue
        parts = re.split(r"(?<=[.!?])\s+", line) if len(line) > 300 else [line]
        out.extend(p.strip() for p in parts if p.strip())
    return out


def probe_reader(data: dict[str, str]) -> str:
    """Answer each fenced question from the fenced view by word overlap (```json fenced)."""
    view = _fenced_json(data, "view", "")
    questions = _fenced_json(data, "questions", [])
    units = [(u, content_words(u)) for u in _units(view if isinstance(view, str) else "")]
    answers = []
    for q in questions if isinstance(questions, list) else []:
        qw = content_words(str(q.get("question", "")))
        best, score = "not in context", 0
        for text, words in units:
            n = len(qw & words)
            if n > score:  # ties keep the earliest line
                best, score = text[:400], n
        answers.append({"id": q.get("id"), "answer": best if score >= PROBE_MIN_OVERLAP else "not in context"})
    return "```json\n" + json.dumps({"answers": answers}, ensure_ascii=False) + "\n```\n"


def probe_judge(data: dict[str, str]) -> str:
    """Grade every label's answer by the share of reference words it carries (prose + JSON)."""
    probes = _fenced_json(data, "probes", {})
    probes = probes if isinstance(probes, dict) else {}
    rows = []
    for q in probes.get("questions") or []:
        ref = content_words(str(q.get("reference", "")))
        row: dict[str, Any] = {"id": q.get("id")}
        notes = []
        for label, answer in (q.get("answers") or {}).items():
            share = len(ref & content_words(str(answer))) / len(ref) if ref else 0.0
            row[label] = 2 if share >= PROBE_FULL else 1 if share >= PROBE_PART else 0
            notes.append(f"{label} {share:.2f}")
        row["note"] = "reference words found: " + ", ".join(notes)
        rows.append(row)
    return "Here are the grades.\n" + json.dumps({"grades": rows}, ensure_ascii=False)


def _fenced_json(data: dict[str, str], name: str, default: Any) -> Any:
    try:
        return json.loads(data.get(name, ""))
    except json.JSONDecodeError:
        return default


def probe_reply(body: dict[str, Any]) -> str | None:
    """The fake reader's or judge's reply, or None when the request is not a probe request."""
    m = PROBE_RE.search(_system_text(body))
    if m is None:
        return None
    request = "\n".join(_content_text(msg.get("content")) for msg in body.get("messages") or [])
    _, data = split_fenced(request)
    return probe_reader(data) if m.group(1) == "reader" else probe_judge(data)
