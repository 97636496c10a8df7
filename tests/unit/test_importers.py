"""Importers on our own small fixtures (tests/fixtures/<format>/): exact counts, pairing,
injected/pinned/compaction marking, skipped-line reporting, detection and typed errors."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from compactor.errors import EmptyInput, ParseError, UnknownFormat
from compactor.events import (
    CompactionBlock,
    Event,
    ImageBlock,
    ThinkingBlock,
    ToolUseBlock,
    to_anthropic,
)
from compactor.importers import FORMATS, ImportResult, detect_format, import_bytes, import_file
from tests.conftest import FIXTURES

FIXTURE_FILES = {
    "claude-code/session.jsonl": "claude-code",
    "codex/rollout.jsonl": "codex",
    "aider/.aider.chat.history.md": "aider",
    "swe-agent/function_calling.traj": "swe-agent",
    "swe-agent/fenced_actions.traj": "swe-agent",
    "pi/session.jsonl": "pi",
    "gemini-chat/session.json": "gemini-chat",
    "gemini-stream/transcript.jsonl": "gemini-stream",
    "opencode/export.json": "opencode",
    "anthropic-messages/messages.json": "anthropic-messages",
    "openai-messages/messages.json": "openai-messages",
}


def load(rel: str) -> ImportResult:
    return import_file(FIXTURES / rel)


def assert_pairing(events: list[Event]) -> None:
    """Each tool_use id is unique; each tool_result follows its tool_use in a later event."""
    where: dict[str, int] = {}
    for i, e in enumerate(events):
        for u in e.tool_uses:
            assert u.id not in where, f"duplicate tool_use id {u.id}"
            where[u.id] = i
        for r in e.tool_results:
            assert r.tool_use_id in where, f"result for unknown call {r.tool_use_id}"
            assert where[r.tool_use_id] < i
            assert e.role == "user"


# --- every format -------------------------------------------------------------------------


def test_every_format_has_a_fixture():
    assert sorted(set(FIXTURE_FILES.values())) == sorted(FORMATS)


@pytest.mark.parametrize("rel,fmt", sorted(FIXTURE_FILES.items()))
def test_detects_each_format(rel, fmt):
    assert detect_format(FIXTURES / rel) == fmt


@pytest.mark.parametrize("rel", sorted(FIXTURE_FILES))
def test_common_guarantees(rel):
    res = load(rel)
    events = res.events
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len({e.id for e in events}) == len(events)
    assert all(e.tokens is None and e.source == res.format for e in events)
    assert_pairing(events)
    # re-import gives the same ids and the same events
    assert load(rel).events == events
    # the Anthropic shape alternates roles starting with a user turn
    _, msgs = to_anthropic(events)
    assert msgs and msgs[0]["role"] == "user"
    assert all(a["role"] != b["role"] for a, b in zip(msgs, msgs[1:]))
    # stats agree with the events
    assert res.stats["events"] == len(events)
    assert res.stats["tool_calls"] == len({u.id for e in events for u in e.tool_uses})


# --- Claude Code --------------------------------------------------------------------------


def test_claude_code_merges_one_response_and_pairs_results():
    res = load("claude-code/session.jsonl")
    s = res.stats
    assert (s["events"], s["messages"], s["user_messages"]) == (16, 15, 3)
    assert (s["tool_calls"], s["tool_results"], s["compactions"], s["injected"]) == (4, 4, 1, 3)
    assert [(k.line, k.reason.startswith("invalid JSON")) for k in res.skipped] == [(12, True)]
    ev = res.events
    first = ev[1]  # four lines of msg_01DryRunA -> one assistant event
    assert first.role == "assistant" and first.id == "c1000000-0000-4000-8000-000000000002"
    assert [b.type for b in first.blocks] == ["thinking", "text", "tool_use", "tool_use"]
    assert first.usage is not None and first.usage.cache_creation_input_tokens == 350  # last line's
    assert first.usage.output_tokens == 96
    results = ev[2]
    assert [r.tool_use_id for r in results.tool_results] == ["toolu_01Read", "toolu_01Git"]
    assert results.tool_results[1].is_error
    assert str(first.at) == "2026-03-04 10:00:04+00:00"


def test_claude_code_marks_injected_and_keeps_compaction():
    ev = load("claude-code/session.jsonl").events
    by_text = {e.text[:22]: e for e in ev if e.role == "user" and e.text}
    assert by_text["<local-command-caveat>"].injected  # isMeta
    assert by_text["<local-command-stdout>"].injected
    slash = next(e for e in ev if e.meta.get("slash_command") == "/compact")
    assert not slash.injected and slash.is_user_request
    comp = next(e for e in ev if e.kind == "compaction")
    assert comp.role == "user" and isinstance(comp.blocks[0], CompactionBlock)
    assert "--dry-run flag" in comp.blocks[0].content
    assert comp.meta["trigger"] == "manual" and comp.meta["tokens_before"] == 48211
    side = [e for e in ev if e.meta.get("sidechain")]
    assert [e.role for e in side] == ["user", "assistant"]
    assert side[0].injected  # the parent agent's prompt to a sub-agent, not the human
    img = ev[4].tool_results[0].content[1]
    assert isinstance(img, ImageBlock) and img.data  # small image stays inline


def test_claude_code_merges_response_split_around_a_result():
    def line(t, uid, content, mid=None):
        msg = {"role": t, "content": content}
        if mid:
            msg["id"] = mid
        return json.dumps(
            {"type": t, "uuid": uid, "sessionId": "s", "timestamp": "2026-01-01T00:00:00Z", "message": msg}
        )

    use = lambda i: {"type": "tool_use", "id": i, "name": "Bash", "input": {"command": i}}  # noqa: E731
    res_ = lambda i: [{"type": "tool_result", "tool_use_id": i, "content": "ok " + i}]  # noqa: E731
    data = "\n".join(
        [
            line("user", "u1", "run a and b"),
            line("assistant", "a1", [use("a")], "msg_X"),
            line("user", "r1", res_("a")),
            line("assistant", "a2", [use("b")], "msg_X"),  # same response, after a's result
            line("user", "r2", res_("b")),
            line("assistant", "a3", [{"type": "text", "text": "both ran"}], "msg_Y"),
        ]
    ).encode()
    ev = import_bytes(data, name="split.jsonl").events
    assert [e.id for e in ev] == ["u1", "a1", "r1", "a3"]
    assert [u.id for u in ev[1].tool_uses] == ["a", "b"]
    assert [r.tool_use_id for r in ev[2].tool_results] == ["a", "b"]


# --- Codex --------------------------------------------------------------------------------


def test_codex_counts_pinned_injected_and_usage():
    res = load("codex/rollout.jsonl")
    s = res.stats
    assert (s["events"], s["pinned"], s["injected"], s["user_messages"]) == (13, 3, 2, 2)
    assert (s["tool_calls"], s["tool_results"], s["unresolved_tool_calls"]) == (4, 3, 1)
    assert [k.line for k in res.skipped] == [17]
    ev = res.events
    assert ev[0].kind == "pinned" and ev[0].role == "system" and "You are Codex" in ev[0].text
    # developer instructions and AGENTS.md stand for the whole session: pinned (Codex re-injects them)
    assert ev[1].injected and ev[1].meta["source_role"] == "developer" and ev[1].kind == "pinned"
    assert ev[2].injected and "AGENTS.md" in ev[2].text and ev[2].kind == "pinned"
    assert ev[3].is_user_request and ev[3].text == "Fix the failing test in tests/test_parser.py"
    a = ev[4]
    assert [b.type for b in a.blocks] == ["thinking", "text", "tool_use"]
    assert a.tool_uses[0].input == {"cmd": "pytest -q tests/test_parser.py", "workdir": "/repo"}
    # token_count: input excludes the cached part, which is reported as a cache read
    assert (a.usage.input_tokens, a.usage.cache_read_input_tokens, a.usage.output_tokens) == (2000, 3000, 200)
    patch = ev[6].tool_uses[0]
    assert patch.name == "apply_patch" and patch.input["input"].startswith("*** Begin Patch")


def test_codex_standing_instructions_survive_a_compaction_verbatim():
    from compactor.engine.compact import compact
    from compactor.engine.policy import make_policy

    events = load("codex/rollout.jsonl").events
    agents = next(e for e in events if "AGENTS.md" in e.text)
    developer = next(e for e in events if e.meta.get("source_role") == "developer")
    res = compact(events, make_policy("codex"), 400)
    assert res.checkpoint is not None and res.checkpoint.covers.end >= agents.seq
    texts = [e.text for e in res.view]
    assert agents.text in texts and developer.text in texts  # kept whole, not summarized away
    assert texts.index(agents.text) < next(i for i, e in enumerate(res.view) if e.kind == "summary" or
                                           "continued from an earlier conversation" in e.text)


def test_codex_compaction_and_unresolved_call():
    ev = load("codex/rollout.jsonl").events
    comp = [e for e in ev if e.kind == "compaction"]
    assert len(comp) == 1 and "returns None for empty input" in comp[0].blocks[0].content
    assert comp[0].meta["tokens_before"] == 6150  # last token_count before the compaction
    last = ev[-1]
    assert last.tool_uses[0].id == "call_p4" and last.meta["turn_aborted"] == "interrupted"
    assert not any(r.tool_use_id == "call_p4" for e in ev for r in e.tool_results)  # not invented


# --- Aider --------------------------------------------------------------------------------


def test_aider_synthesizes_call_pairs_and_sessions():
    res = load("aider/.aider.chat.history.md")
    s = res.stats
    assert (s["events"], s["user_messages"], s["tool_calls"], s["tool_results"]) == (11, 4, 4, 4)
    ev = res.events
    assert ev[0].text == (
        "add a --verbose flag to cli.py that prints each file as it is processed\n\n"
        "keep the default output unchanged"
    )
    uses = [u for e in ev for u in e.tool_uses]
    assert [(u.id, u.name) for u in uses] == [
        ("aider-1", "apply_edit"),
        ("aider-2", "run"),
        ("aider-3", "apply_edit"),
        ("aider-4", "apply_edit"),
    ]
    assert uses[1].input == {"command": "python -m pytest -q"}
    assert "SEARCH" in ev[1].text and ev[1].tool_uses[0].input == {"path": "cli.py"}
    assert ev[1].meta["aider_tokens"] == {"sent": 3100, "received": 212}
    assert [u.id for u in ev[7].tool_uses] == ["aider-3", "aider-4"]  # one reply, two edits
    assert str(ev[0].at) == "2025-06-02 09:15:04" and str(ev[-1].at) == "2025-06-03 14:02:11"


def test_aider_ids_survive_appending_to_the_file():
    path = FIXTURES / "aider/.aider.chat.history.md"
    before = import_file(path).events
    more = path.read_bytes() + b"\n#### one more question  \n\nAnd one more answer.\n"
    after = import_bytes(more, name="grown.md").events
    assert [e.id for e in after[: len(before)]] == [e.id for e in before]
    assert len(after) == len(before) + 2


# --- SWE-agent ----------------------------------------------------------------------------


def test_swe_agent_function_calling_history_only():
    res = load("swe-agent/function_calling.traj")
    s = res.stats
    assert (s["events"], s["pinned"], s["injected"], s["user_messages"]) == (11, 1, 1, 1)
    assert (s["tool_calls"], s["tool_results"]) == (4, 4)
    ev = res.events
    assert ev[0].kind == "pinned" and ev[0].text.startswith("SETTING:")
    assert ev[1].injected and ev[1].meta["demo"]
    assert not any("MUST BE IGNORED" in e.text for e in ev)  # trajectory[].messages ignored
    # a reused call id is renamed and its observation follows the rename
    assert ev[7].tool_uses[0].id == "call_a1~2"
    assert ev[8].tool_results[0].tool_use_id == "call_a1~2" and ev[8].tool_results[0].text == "5400"
    assert ev[5].tool_uses[0].input == {"path": "src/timeutil.py", "line_number": 12}


def test_swe_agent_fenced_actions_get_synthetic_ids():
    res = load("swe-agent/fenced_actions.traj")
    s = res.stats
    assert (s["events"], s["tool_calls"], s["tool_results"], s["unresolved_tool_calls"]) == (8, 3, 2, 1)
    ev = res.events
    assert ev[3].tool_uses[0] == ToolUseBlock(id="swe-3", name="bash", input={"command": "ls"})
    assert ev[4].tool_results[0].tool_use_id == "swe-3"
    assert ev[-1].tool_uses[0].input == {"command": "submit"}  # final submit: no observation


def test_swe_agent_turn_without_a_command_still_gets_its_observation():
    doc = {
        "history": [
            {"role": "system", "content": "SETTING"},
            {"role": "user", "content": "Fix issue 7."},
            {"role": "assistant", "content": "I think the bug is in utils.", "action": ""},
            {"role": "user", "content": "Your output was not formatted correctly. Include one command."},
            {"role": "assistant", "content": "```\nls\n```", "action": "ls\n"},
            {"role": "user", "content": "utils.py"},
        ],
        "info": {},
    }
    res = import_bytes(json.dumps(doc).encode(), name="x.traj")
    assert res.stats["tool_calls"] == 2 and res.stats["tool_results"] == 2
    assert res.stats["user_messages"] == 1  # the format error is not a human request
    bad = res.events[2]
    assert bad.tool_uses[0].input == {"command": ""} and bad.meta["empty_action"]
    assert "not formatted correctly" in res.events[3].tool_results[0].text


def test_codex_user_image_is_kept():
    png = base64.b64encode(b"\x89PNG" + b"\x00" * 20).decode()
    line = {
        "timestamp": "2026-01-01T00:00:00Z",
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_image", "image_url": f"data:image/png;base64,{png}"}],
        },
    }
    e = import_bytes(json.dumps(line).encode(), format="codex").events[0]
    assert not e.injected and isinstance(e.blocks[0], ImageBlock) and e.blocks[0].data == png


# --- pi -----------------------------------------------------------------------------------


def test_pi_repairs_bad_escape_skips_broken_line_and_keeps_compaction():
    res = load("pi/session.jsonl")
    s = res.stats
    assert (s["events"], s["user_messages"], s["tool_calls"], s["tool_results"]) == (11, 2, 4, 4)
    assert (s["compactions"], s["injected"], s["repaired_lines"]) == (1, 1, 1)
    assert [k.line for k in res.skipped] == [10]
    ev = res.events
    repaired = ev[2].tool_results[0]
    assert repaired.tool_use_id == "call_pi1" and "jest --runInBand" in repaired.text
    comp = next(e for e in ev if e.kind == "compaction")
    assert comp.blocks[0].content.startswith("## Goal")
    assert comp.meta["tokens_before"] == 120345 and comp.meta["first_kept_entry_id"] == "a0000007"
    u = ev[1].usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens) == (
        120,
        40,
        3000,
        500,
    )
    assert isinstance(ev[1].blocks[0], ThinkingBlock)
    assert next(e for e in ev if e.injected).meta["custom_type"] == "volatile-project-context"


def test_pi_branched_session_keeps_the_active_branch():
    def m(id_, parent, role, text):
        return json.dumps(
            {
                "type": "message",
                "id": id_,
                "parentId": parent,
                "timestamp": "2026-05-10T08:00:00Z",
                "message": {"role": role, "content": [{"type": "text", "text": text}]},
            }
        )

    data = "\n".join(
        [
            json.dumps({"type": "session", "version": 3, "id": "S", "timestamp": "2026-05-10T08:00:00Z"}),
            m("e1", None, "user", "write a haiku"),
            m("e2", "e1", "assistant", "draft one"),
            m("e3", "e2", "user", "make it about rain"),  # abandoned branch
            m("e4", "e3", "assistant", "rain haiku"),
            m("e5", "e2", "user", "make it about snow"),  # user went back to e2
            m("e6", "e5", "assistant", "snow haiku"),
        ]
    ).encode()
    res = import_bytes(data, format="pi")
    assert [e.text for e in res.events] == ["write a haiku", "draft one", "make it about snow", "snow haiku"]
    assert res.stats["off_branch_entries"] == 2


# --- Gemini -------------------------------------------------------------------------------


def test_gemini_chat_emits_call_then_result():
    res = load("gemini-chat/session.json")
    s = res.stats
    assert (s["events"], s["user_messages"], s["tool_calls"], s["tool_results"]) == (5, 2, 2, 2)
    ev = res.events
    assert [e.role for e in ev] == ["user", "assistant", "user", "assistant", "user"]
    assert [u.name for u in ev[1].tool_uses] == ["search_file_content", "read_file"]
    ok, err = ev[2].tool_results
    assert "retry on timeout" in ok.text and not ok.is_error
    assert err.is_error and "File not found" in err.text
    assert ev[1].usage.input_tokens == 1200 and ev[1].usage.cache_read_input_tokens == 4000
    assert not any("fallback model" in e.text for e in ev)  # info messages are UI only


def test_gemini_stream_joins_chunks_and_keeps_runs():
    res = load("gemini-stream/transcript.jsonl")
    s = res.stats
    assert (s["events"], s["user_messages"], s["tool_calls"], s["tool_results"]) == (8, 2, 3, 2)
    assert [k.line for k in res.skipped] == [10]
    ev = res.events
    assert ev[0].injected and ev[0].meta["harness_prompt"]  # echoed by the CLI right after
    assert ev[4].text == "I created hello.py. Running it now."
    assert ev[5].tool_results[0].is_error and "code 127" in ev[5].tool_results[0].text
    assert ev[-1].meta["run"] == 2 and ev[-1].tool_uses[0].name == "replace"
    assert s["unresolved_tool_calls"] == 1


# --- OpenCode -----------------------------------------------------------------------------


def test_opencode_tool_parts_split_into_call_and_result():
    res = load("opencode/export.json")
    s = res.stats
    assert (s["events"], s["user_messages"], s["injected"]) == (7, 1, 1)
    assert (s["tool_calls"], s["tool_results"], s["unresolved_tool_calls"]) == (3, 2, 1)
    ev = res.events
    assert ev[1].injected and ev[1].text.startswith("Called the Read tool")
    assert [b.type for b in ev[2].blocks] == ["thinking", "text", "tool_use"]
    assert ev[2].usage.cache_read_input_tokens == 4000 and ev[2].usage.output_tokens == 100
    assert ev[5].tool_results[0].is_error and "oldString not found" in ev[5].tool_results[0].text
    assert ev[6].tool_uses[0].id == "toolu_oc3"  # still running: no result


# --- plain message lists ------------------------------------------------------------------


def test_anthropic_messages_round_trip_through_to_anthropic():
    res = load("anthropic-messages/messages.json")
    assert (res.stats["events"], res.stats["pinned"], res.stats["tool_calls"]) == (6, 1, 1)
    system, msgs = to_anthropic(res.events)
    src = json.loads((FIXTURES / "anthropic-messages/messages.json").read_text())
    assert system == src["system"]
    assert len(msgs) == len(src["messages"])
    assert msgs[1]["content"][-1] == src["messages"][1]["content"][-1]  # tool_use intact
    assert msgs[2]["content"][0]["tool_use_id"] == "toolu_sre1"


def test_openai_messages_tool_messages_become_one_result_event():
    res = load("openai-messages/messages.json")
    ev = res.events
    assert (res.stats["events"], res.stats["pinned"], res.stats["tool_results"]) == (6, 1, 2)
    assert [r.tool_use_id for r in ev[3].tool_results] == ["call_o1", "call_o2"]
    assert ev[2].tool_uses[1].input == {"path": "orders.csv"}


def test_plain_list_detection():
    anth = json.dumps(
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "1"}]}]
    )
    oai = json.dumps(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": []}]
    )
    assert import_bytes(anth.encode()).format == "anthropic-messages"
    assert import_bytes(oai.encode()).format == "openai-messages"


# --- images -------------------------------------------------------------------------------


def test_large_image_is_not_kept_inline():
    big = base64.b64encode(b"\x00" * (70 * 1024)).decode()
    small = base64.b64encode(b"\x00" * 100).decode()
    doc = [
        {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": big}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": small}},
            ],
        }
    ]
    e = import_bytes(json.dumps(doc).encode(), format="anthropic-messages").events[0]
    large, tiny = e.blocks
    assert isinstance(large, ImageBlock) and large.data is None and large.media_type == "image/png"
    assert tiny.data == small
    note = e.meta["images_not_inline"]
    assert len(note) == 1 and note[0]["bytes"] == 70 * 1024 and len(note[0]["sha256"]) == 64


# --- pairing repair -----------------------------------------------------------------------


def test_result_without_call_becomes_text():
    doc = [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_gone", "content": "old"}]},
        {"role": "assistant", "content": "ok"},
    ]
    res = import_bytes(json.dumps(doc).encode(), format="anthropic-messages")
    assert res.stats["orphan_results"] == 1
    assert not res.events[0].tool_results and "toolu_gone" in res.events[0].text


# --- bad input ----------------------------------------------------------------------------


def test_unknown_format_names_known_formats(tmp_path: Path):
    p = tmp_path / "notes.txt"
    p.write_text("just some notes\nnothing to see here\n")
    with pytest.raises(UnknownFormat) as exc:
        import_file(p)
    assert "notes.txt" in str(exc.value)
    for fmt in FORMATS:
        assert fmt in str(exc.value)
    with pytest.raises(UnknownFormat):
        detect_format(p)


def test_unknown_format_name_is_rejected():
    with pytest.raises(UnknownFormat) as exc:
        import_file(FIXTURES / "codex/rollout.jsonl", format="cursor")
    assert "claude-code" in str(exc.value)


def test_json_of_no_known_shape_is_unknown():
    with pytest.raises(UnknownFormat):
        import_bytes(b'{"hello": "world"}', name="x.json")


@pytest.mark.parametrize("content", [b"", b"   \n\n\t\n"])
def test_empty_file(tmp_path: Path, content: bytes):
    p = tmp_path / "session.jsonl"
    p.write_bytes(content)
    with pytest.raises(EmptyInput) as exc:
        import_file(p)
    assert "session.jsonl" in str(exc.value)
    with pytest.raises(EmptyInput):
        detect_format(p)
    with pytest.raises(EmptyInput):
        import_file(p, format="codex")


@pytest.mark.parametrize(
    "rel,fmt",
    [
        ("swe-agent/function_calling.traj", "swe-agent"),
        ("opencode/export.json", "opencode"),
        ("gemini-chat/session.json", "gemini-chat"),
        ("anthropic-messages/messages.json", "anthropic-messages"),
    ],
)
def test_truncated_json_document(tmp_path: Path, rel: str, fmt: str):
    data = (FIXTURES / rel).read_bytes()
    p = tmp_path / Path(rel).name
    p.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ParseError) as exc:
        import_file(p)
    assert p.name in str(exc.value) and "truncated" in str(exc.value)
    with pytest.raises(ParseError):
        import_file(p, format=fmt)


def test_jsonl_of_unknown_shape_is_unknown_not_truncated():
    data = b'{"event": "start", "n": 1}\n{"event": "tick", "n": 2}\n{"event": "stop", "n": 3}\n'
    with pytest.raises(UnknownFormat):
        import_bytes(data, name="metrics.jsonl")


def test_truncated_pretty_json_with_complete_inner_lines(tmp_path: Path):
    p = tmp_path / "conv.json"
    # the closing bracket is missing; one inner line is a complete JSON object on its own
    p.write_text('[\n{"role": "user", "content": "hi"}\n,{"role": "assistant", "content": "yo"}\n')
    with pytest.raises(ParseError) as exc:
        import_file(p)
    assert "conv.json" in str(exc.value)


def test_markdown_that_is_not_aider_is_unknown():
    md = b"# Notes\n\n#### A heading\n\nSome text.\n"
    with pytest.raises(UnknownFormat):
        import_bytes(md, name="notes.md")


def test_truncated_single_line_traj(tmp_path: Path):
    doc = json.loads((FIXTURES / "swe-agent/fenced_actions.traj").read_text())
    p = tmp_path / "run.traj"
    p.write_text(json.dumps(doc)[:500])
    with pytest.raises(ParseError):
        import_file(p)


def test_jsonl_with_only_broken_lines_reports_them():
    data = b'{"type":"session_meta","payload":{"id":"x"}}\n{"type":"response_item","payl\nnot json at all\n'
    res = import_bytes(data, format="codex")
    assert [k.line for k in res.skipped] == [2, 3]
    assert res.events == []


def test_truncated_last_line_of_jsonl_is_skipped_not_fatal():
    data = (FIXTURES / "claude-code/session.jsonl").read_bytes()
    cut = data[: len(data) - 60]  # the last line loses its end
    res = import_bytes(cut, name="cut.jsonl")
    assert res.format == "claude-code"
    assert res.skipped[-1].line == data.count(b"\n")


def test_lone_surrogate_escapes_are_replaced_not_fatal():
    # JavaScript agents cut strings between the halves of a surrogate pair and JSON.stringify
    # writes the lone half as an escape ("\ud83d"): valid JSON that Python loads, but such a
    # string cannot be encoded as UTF-8 (the log could not store it, nor could the Messages API
    # accept it). Valid pairs stay intact.
    doc = ('{"messages":[{"role":"user","content":"fix it \\ud83d"},'
           '{"role":"assistant","content":"ok \\ud83d\\ude00"}]}')
    res = import_bytes(doc.encode(), "anthropic-messages")
    assert [e.text for e in res.events] == ["fix it \ufffd", "ok \U0001F600"]
    for e in res.events:
        e.to_json_line().encode("utf-8")
    line = (FIXTURES / "claude-code/session.jsonl").read_text().splitlines()
    line[1] = line[1].replace("Add a --dry-run flag", "Add a \\udc00 --dry-run flag", 1)
    res = import_bytes("\n".join(line).encode(), "claude-code")
    assert "Add a \ufffd --dry-run flag" in res.events[0].text
    for e in res.events:
        e.to_json_line().encode("utf-8")


def test_valid_json_of_the_wrong_shape_is_a_parse_error_naming_the_line(tmp_path):
    """A corrupted entry (valid JSON, wrong types) is a clear ParseError with its line, not a crash."""
    import json as _json

    from compactor.errors import ParseError
    from compactor.importers import import_file

    cc = tmp_path / "cc.jsonl"
    cc.write_text(
        _json.dumps({"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}}) + "\n"
        + _json.dumps({"type": [], "uuid": "u2", "message": {"role": "user", "content": "x"}}) + "\n"
    )
    with pytest.raises(ParseError) as info:
        import_file(cc, "claude-code")
    assert info.value.details["line"] == 2 and "line 2" in str(info.value)

    cx = tmp_path / "cx.jsonl"
    cx.write_text(
        _json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "s"}}) + "\n"
        + _json.dumps({"timestamp": "2026-01-01T00:00:01Z", "type": "response_item",
                       "payload": {"type": "message", "role": "user", "content": 7}}) + "\n"
    )
    with pytest.raises(ParseError) as info:
        import_file(cx, "codex")
    assert info.value.details["line"] == 2

    pi = tmp_path / "pi.jsonl"
    pi.write_text(
        _json.dumps({"type": "session", "id": "s1", "timestamp": "2026-01-01T00:00:00Z"}) + "\n"
        + _json.dumps({"type": "message", "id": "m1", "parentId": "s1", "timestamp": "2026-01-01T00:00:01Z",
                       "message": {"role": "user", "content": 5}}) + "\n"
    )
    try:
        res = import_file(pi, "pi")
    except ParseError as exc:
        assert exc.details["line"] == 2
    else:  # tolerated: the entry must not have produced a malformed event
        assert all(e.seq == i for i, e in enumerate(res.events, 1))
