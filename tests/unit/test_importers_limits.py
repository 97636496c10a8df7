"""compactor.importers: bounded, streaming input (line size, JSON depth, document size, big
tool outputs) and files that mix two formats. Fixtures are small: the limits are lowered."""

from __future__ import annotations

import json

import pytest

from compactor.errors import InputTooLarge, ParseError
from compactor.events import ArtifactRefBlock, TextBlock, ToolResultBlock
from compactor.importers import ImportLimits, detect_format, import_bytes, import_file


def _cc(uuid: str, content, role: str = "user") -> str:
    return json.dumps({"type": role, "uuid": uuid, "sessionId": "s", "timestamp": "2025-01-01T00:00:00Z",
                       "message": {"role": role, "content": content}})


def _call(uuid: str = "a1", call_id: str = "toolu_1") -> str:
    return _cc(uuid, [{"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "ls"}}], "assistant")


def _result(uuid: str, text: str, call_id: str = "toolu_1") -> str:
    return _cc(uuid, [{"type": "tool_result", "tool_use_id": call_id, "content": text}])


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _write(tmp_path, name: str, lines: list[str]):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_a_line_over_the_limit_is_an_error_naming_file_and_line(tmp_path):
    p = _write(tmp_path, "big.jsonl", [_cc("u1", "hi"), _cc("u2", "x" * 5_000), _cc("u3", "bye")])
    with pytest.raises(InputTooLarge) as info:
        import_file(p, limits=ImportLimits(max_line_bytes=1_000))
    assert info.value.details["line"] == 2 and info.value.details["limit"] == "max_line_bytes"
    assert f"{p}:2" in str(info.value)
    # the same file within the limit imports whole
    res = import_file(p, limits=ImportLimits(max_line_bytes=10_000))
    assert [e.blocks[0].text for e in res.events][1] == "x" * 5_000


@pytest.mark.parametrize("fmt", ["auto", "claude-code"])
def test_jsonl_nested_ten_thousand_deep_is_a_parse_error_with_its_line(tmp_path, fmt):
    bad = '{"type":"user","uuid":"u2","sessionId":"s","message":{"role":"user","content":' + _deep(10_000) + "}}"
    p = _write(tmp_path, "deep.jsonl", [_cc("u1", "hi"), bad])
    with pytest.raises(ParseError) as info:
        import_file(p, format=fmt)
    assert info.value.details["line"] == 2 and info.value.details["limit"] == "max_json_depth"


def test_nesting_under_the_recursion_limit_but_over_the_depth_limit_is_refused(tmp_path):
    nested = '{"a":' * 150 + "1" + "}" * 150
    call = _call().replace('{"command": "ls"}', nested)
    p = _write(tmp_path, "deep.jsonl", [_cc("u1", "hi"), call])
    with pytest.raises(ParseError):
        import_file(p, limits=ImportLimits(max_json_depth=100))
    assert len(import_file(p).events) == 2  # 150 levels: within the default 200


@pytest.mark.parametrize("doc", ['{"messages": %s}' % _deep(10_000), _deep(10_000)])
def test_whole_document_nested_ten_thousand_deep_is_a_parse_error(tmp_path, doc):
    p = tmp_path / "deep.json"
    p.write_text(doc)
    for call in (lambda: import_file(p), lambda: detect_format(p), lambda: import_file(p, "anthropic-messages")):
        with pytest.raises(ParseError) as info:
            call()
        assert info.value.details["limit"] == "max_json_depth"


def test_a_whole_document_over_the_size_limit_is_refused_before_parsing(tmp_path):
    doc = {"messages": [{"role": "user", "content": "y" * 4_000}, {"role": "assistant", "content": "ok"}]}
    p = tmp_path / "msgs.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(InputTooLarge) as info:
        import_file(p, limits=ImportLimits(max_document_bytes=1_000))
    assert info.value.details["limit"] == "max_document_bytes"
    assert len(import_file(p).events) == 2


def test_a_one_line_document_longer_than_the_line_limit_still_imports(tmp_path):
    """Single-document formats are bounded by the document size, not the line size."""
    doc = [{"role": "user", "content": "z" * 3_000}, {"role": "assistant", "content": "done"}]
    res = import_bytes(json.dumps(doc).encode(), name="one-line.json", limits=ImportLimits(max_line_bytes=500))
    assert res.format == "anthropic-messages" and len(res.events) == 2


def _outputs(res) -> list:
    return [c for e in res.events for b in e.blocks if isinstance(b, ToolResultBlock) for c in b.content]


def test_a_big_tool_output_without_a_store_is_cut_with_a_recorded_marker(tmp_path):
    big = "HEAD" + "m" * 10_000 + "TAIL"
    p = _write(tmp_path, "t.jsonl", [_cc("u1", "run it"), _call(), _result("u2", big)])
    res = import_file(p, limits=ImportLimits(max_inline_tool_output=1_000))
    (text,) = [c.text for c in _outputs(res)]
    assert text.startswith("HEAD") and text.endswith("TAIL") and len(text) < 1_200
    assert f"[... {len(big) - 1_000:,} bytes truncated at import ...]" in text
    (t,) = res.truncated
    assert (t.tool_use_id, t.bytes, t.kept_bytes, t.artifact) == ("toolu_1", len(big), 1_000, None)
    assert res.stats["tool_outputs_truncated"] == 1


def test_a_big_tool_output_with_a_store_becomes_an_artifact_ref(tmp_path):
    from compactor.store import SessionLog, open_store

    big = "line of output\n" * 1_000
    p = _write(tmp_path, "t.jsonl", [_cc("u1", "run it"), _call(), _result("u2", big), _cc("u3", "thanks")])
    log = SessionLog(open_store(str(tmp_path / "store")), "default", "s")
    res = import_file(p, limits=ImportLimits(max_inline_tool_output=1_000), spill=log.put_artifact)
    (ref,) = _outputs(res)
    assert isinstance(ref, ArtifactRefBlock) and ref.bytes == len(big)
    assert ref.preview_head.startswith("line of output") and ref.preview_tail.endswith("output\n")
    assert log.get_artifact(ref.sha256).decode() == big
    assert res.truncated[0].artifact == ref.uri and res.stats["tool_outputs_to_artifacts"] == 1
    # small outputs stay inline
    small = import_file(p, limits=ImportLimits(max_inline_tool_output=100_000), spill=log.put_artifact)
    assert isinstance(_outputs(small)[0], TextBlock) and not small.truncated


def test_mixed_formats_report_the_minority_lines_as_skipped(tmp_path):
    codex = json.dumps({"timestamp": "2025-01-01T00:00:00Z", "type": "response_item",
                        "payload": {"type": "message", "role": "user",
                                    "content": [{"type": "input_text", "text": "codex says hi"}]}})
    lines = [_cc("u1", "one"), _cc("u2", "two"), codex, _cc("u3", "three"), codex, _cc("u4", "four")]
    res = import_file(_write(tmp_path, "mixed.jsonl", lines))
    assert res.format == "claude-code" and len(res.events) == 4
    assert [(s.line, "codex" in s.reason) for s in res.skipped] == [(3, True), (5, True)]


def test_streaming_keeps_ids_and_handles_crlf_and_a_bom(tmp_path):
    lines = [_cc("u1", "one"), _call(), _result("u2", "out"), _cc("u3", "two")]
    plain = import_file(_write(tmp_path, "a.jsonl", lines))
    p = tmp_path / "b.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    crlf = import_file(p)
    assert [e.model_dump() for e in crlf.events] == [e.model_dump() for e in plain.events]
    assert crlf.skipped == []


def test_a_directory_or_missing_path_is_invalid_input(tmp_path):
    from compactor.errors import InvalidInput

    for p in (tmp_path, tmp_path / "missing.jsonl"):
        with pytest.raises(InvalidInput):
            import_file(p)
