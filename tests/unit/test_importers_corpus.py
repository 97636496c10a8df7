"""Every transcript in ../shared/corpus imports with auto-detection and plausible counts.

The expected counts are computed here, independently of the importers, by the "Counting"
rules of corpus/README.md (raw JSON / text scans of the source file).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from compactor.events import Event, TextBlock, to_anthropic
from compactor.importers import ImportResult, import_file
from compactor.importers._codex import STANDING_PREFIXES
from tests.conftest import corpus_files

pytestmark = pytest.mark.corpus

FILES = corpus_files()


def _raw_lines(path: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """Strictly parsed JSONL objects and the 1-based numbers of lines that do not parse."""
    objs, bad = [], []
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            objs.append(json.loads(line))
        except json.JSONDecodeError:
            bad.append(no)
    return objs, bad


def _user_text_events(events: list[Event]) -> list[Event]:
    return [
        e
        for e in events
        if e.role == "user" and e.kind == "message" and any(isinstance(b, TextBlock) for b in e.blocks)
    ]


def _n_results(events: list[Event]) -> int:
    return sum(len(e.tool_results) for e in events)


# --- per-format independent counts ----------------------------------------------------------


def check_claude_code(path: Path, res: ImportResult) -> None:
    objs, bad = _raw_lines(path)
    tool_ids: set[str] = set()
    user_msgs = results = compactions = 0
    for o in objs:
        msg = o.get("message") if isinstance(o.get("message"), dict) else {}
        content = msg.get("content")
        blocks = content if isinstance(content, list) else []
        if o.get("type") == "assistant":
            tool_ids |= {b["id"] for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"}
        elif o.get("type") == "user":
            if o.get("isCompactSummary"):
                continue
            if isinstance(content, str) or any(b.get("type") == "text" for b in blocks):
                user_msgs += 1
            results += sum(1 for b in blocks if b.get("type") == "tool_result")
        elif o.get("type") == "system" and o.get("subtype") == "compact_boundary":
            compactions += 1
    ev = res.events
    assert res.stats["tool_calls"] == len(tool_ids)
    assert len(_user_text_events(ev)) == user_msgs
    assert _n_results(ev) + res.stats["orphan_results"] == results
    assert res.stats["compactions"] >= compactions
    assert [k.line for k in res.skipped] == bad
    # merged responses: one assistant event per API response (message.id), unless a
    # response was interrupted by the human (then it is split, never merged across)
    assistant_lines = [o for o in objs if o.get("type") == "assistant"]
    n_responses = len({o["message"].get("id") for o in assistant_lines})
    n_assistant = sum(1 for e in ev if e.role == "assistant")
    assert n_responses <= n_assistant <= len(assistant_lines)


def check_codex(path: Path, res: ImportResult) -> None:
    objs, bad = _raw_lines(path)
    items = Counter()
    roles = Counter()
    for o in objs:
        p = o.get("payload") if isinstance(o.get("payload"), dict) else {}
        if o.get("type") == "response_item":
            items[p.get("type")] += 1
            if p.get("type") == "message":
                roles[p.get("role")] += 1
        elif o.get("type") == "compacted":
            items["compacted"] += 1
    ev = res.events
    assert res.stats["tool_calls"] == (
        items["function_call"] + items["custom_tool_call"] + items["web_search_call"]
    )
    users = [
        e
        for e in ev
        if e.role == "user"
        and e.kind in ("message", "pinned")
        and not e.tool_results
        and e.meta.get("source_role") != "developer"
    ]
    assert len(users) == roles["user"]
    assert sum(1 for e in ev if e.meta.get("source_role") == "developer") == roles["developer"]
    assert all(e.injected and e.kind == "pinned" for e in ev if e.meta.get("source_role") == "developer")
    outputs = items["function_call_output"] + items["custom_tool_call_output"]
    synthesized = sum(1 for e in ev if e.meta.get("synthesized_from_status"))
    assert _n_results(ev) == outputs + synthesized
    assert res.stats["compactions"] == items["compacted"]
    has_instructions = any(
        o.get("type") == "session_meta" and (o.get("payload") or {}).get("base_instructions") for o in objs
    )
    standing = sum(1 for e in ev if e.role == "user" and e.kind == "pinned")  # developer + AGENTS.md, environment...
    assert standing >= roles["developer"]
    assert all(e.text.lstrip().startswith(STANDING_PREFIXES) for e in ev
               if e.kind == "pinned" and e.role == "user" and e.meta.get("source_role") != "developer")
    assert res.stats["pinned"] == int(has_instructions) + standing
    assert [k.line for k in res.skipped] == bad
    reported = any(
        o.get("type") == "event_msg"
        and (o.get("payload") or {}).get("type") == "token_count"
        and (o.get("payload") or {}).get("info")
        for o in objs
    )
    assert reported == any(e.usage is not None for e in ev if e.role == "assistant")


def check_aider(path: Path, res: ImportResult) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    calls = sum(1 for x in lines if re.match(r"^> (Applied edit to |Running )", x))
    runs = sum(
        1
        for i, x in enumerate(lines)
        if x.startswith("####") and (i == 0 or not lines[i - 1].startswith("####"))
    )
    assert res.stats["tool_calls"] == calls
    assert res.stats["tool_results"] == calls  # aider records a notice for every call
    assert len(_user_text_events(res.events)) == runs
    assert res.skipped == []


def check_swe_agent(path: Path, res: ImportResult) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    hist = doc["history"]
    n_assistant = sum(1 for h in hist if h["role"] == "assistant")
    assert res.stats["tool_calls"] == n_assistant
    assert res.stats["pinned"] == sum(1 for h in hist if h["role"] == "system")
    assert res.stats["injected"] == sum(1 for h in hist if h.get("is_demo"))
    assert sum(1 for e in res.events if e.role == "assistant") == n_assistant
    # every observation answers the call before it; only the final submit may stay open
    assert res.stats["tool_calls"] - res.stats["unresolved_tool_calls"] == res.stats["tool_results"]
    assert res.stats["unresolved_tool_calls"] <= 1


def check_pi(path: Path, res: ImportResult) -> None:
    objs, bad = _raw_lines(path)
    call_ids: set[str] = set()
    types = Counter()
    n_results = 0
    for o in objs:
        types[o.get("type")] += 1
        m = o.get("message") if isinstance(o.get("message"), dict) else {}
        if m.get("role") == "assistant":
            call_ids |= {b["id"] for b in m.get("content") or [] if b.get("type") == "toolCall"}
        elif m.get("role") == "toolResult":
            n_results += 1
        elif m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str) or any(b.get("type") == "text" for b in content or []):
                types["user"] += 1
    # a broken line is either repaired (and then counted) or skipped, never lost silently
    assert len(res.skipped) + res.stats["repaired_lines"] == len(bad)
    assert res.stats["tool_calls"] >= len(call_ids)
    assert n_results <= res.stats["tool_results"] <= n_results + len(bad)
    assert sum(1 for e in _user_text_events(res.events) if not e.injected) == types["user"]
    assert res.stats["user_messages"] >= 1
    assert res.stats["compactions"] == types["compaction"]
    assert res.stats["injected"] >= sum(
        1 for o in objs if o.get("type") == "custom_message" and o.get("content")
    )
    assert any(e.usage is not None for e in res.events if e.role == "assistant")


CHECKS = {
    "claude-code": check_claude_code,
    "codex": check_codex,
    "aider": check_aider,
    "swe-agent": check_swe_agent,
    "pi": check_pi,
}

EXPECTED_FORMAT = {
    "claude-code": "claude-code",
    "codex": "codex",
    "aider": "aider",
    "swe-agent": "swe-agent",
    "pi-agent": "pi",
}


@pytest.mark.skipif(not FILES, reason="corpus not present")
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_corpus_file_imports_with_plausible_counts(path: Path):
    res = import_file(path)
    expected = EXPECTED_FORMAT.get(path.parent.name)
    if expected is not None:
        assert res.format == expected
    ev = res.events
    assert len(ev) >= 2 and res.stats["messages"] >= 2
    assert res.stats["user_messages"] >= 1
    assert [e.seq for e in ev] == list(range(1, len(ev) + 1))
    assert len({e.id for e in ev}) == len(ev)
    # every tool_result refers to an earlier tool_use (in an earlier event)
    seen: dict[str, int] = {}
    for i, e in enumerate(ev):
        for r in e.tool_results:
            assert seen.get(r.tool_use_id, i) < i, f"seq {e.seq}: result for {r.tool_use_id}"
        for u in e.tool_uses:
            assert u.id not in seen
            seen[u.id] = i
    # the Anthropic shape alternates roles and starts with the user
    _, msgs = to_anthropic(ev)
    assert msgs[0]["role"] == "user"
    assert all(a["role"] != b["role"] for a, b in zip(msgs, msgs[1:]))
    # re-import is deterministic
    assert [e.id for e in import_file(path).events] == [e.id for e in ev]
    check = CHECKS.get(res.format)
    if check is not None:
        check(path, res)
