"""`compactor import`, `view`, `sessions` through compactor.cli.main, on tmp stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor.cli import main
from compactor.cli.common import session_id_from_path
from compactor.store import SessionLog, open_store

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "anthropic" / "cli-session.json"


@pytest.fixture
def store_url(tmp_path) -> str:
    return f"file://{tmp_path / 'store'}"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def stored_keys(url: str) -> list[str]:
    return open_store(url).list("")


def test_import_then_view(capsys, store_url):
    rc, out, _ = run(capsys, "import", str(FIXTURE), "--store", store_url)
    assert rc == 0
    assert "anthropic-messages" in out and "8 new" in out and "tool calls    2" in out
    assert "default/cli-session" in out and "head version  8" in out

    rc, out, _ = run(capsys, "view", "cli-session", "--store", store_url)
    assert rc == 0
    assert "cannot find module 'left-pad'" in out and "[tool_use toolu_ci2]" in out

    # re-import stores nothing twice
    rc, out, _ = run(capsys, "import", str(FIXTURE), "--store", store_url)
    assert rc == 0 and "0 new; 8 already stored" in out
    assert SessionLog(open_store(store_url), "default", "cli-session").head().version == 8


def test_view_json_is_a_messages_list(capsys, store_url):
    run(capsys, "import", str(FIXTURE), "--store", store_url, "--tenant", "acme", "--session", "ci")
    rc, out, _ = run(capsys, "view", "ci", "--json", "--store", store_url, "--tenant", "acme")
    assert rc == 0
    doc = json.loads(out)
    assert doc["system"].startswith("You are a build assistant")
    msgs = doc["messages"]
    assert msgs[0]["role"] == "user"
    assert all(a["role"] != b["role"] for a, b in zip(msgs, msgs[1:]))  # roles alternate
    allowed = {"text", "tool_use", "tool_result"}
    for i, m in enumerate(msgs):
        assert m["role"] in ("user", "assistant") and m["content"]
        assert {b["type"] for b in m["content"]} <= allowed
        uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        if uses:  # each tool_use is answered in the very next user message, results first
            nxt = msgs[i + 1]["content"]
            assert [b["tool_use_id"] for b in nxt[: len(uses)]] == uses
    assert [b["id"] for m in msgs for b in m["content"] if b["type"] == "tool_use"] == ["toolu_ci1", "toolu_ci2"]


def test_skipped_lines_are_reported_with_line_numbers(capsys, store_url, tmp_path):
    lines = [
        {"type": "user", "uuid": "u1", "sessionId": "s", "timestamp": "2026-01-01T00:00:00Z",
         "message": {"role": "user", "content": "list the files"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s",
         "timestamp": "2026-01-01T00:00:01Z",
         "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "Sure."}]}},
    ]
    path = tmp_path / "my session (1).jsonl"
    path.write_text(json.dumps(lines[0]) + "\n" + '{"type": "assistant", "uu\n' + json.dumps(lines[1]) + "\n")
    rc, out, _ = run(capsys, "import", str(path), "--store", store_url)
    assert rc == 0
    assert "claude-code" in out and "skipped lines 1" in out and "line 2:" in out
    assert "default/my-session-1" in out


@pytest.mark.parametrize(
    "content,args",
    [
        ("", []),  # empty file
        ('{"messages": [{"role": "user", "cont', []),  # truncated JSON
        ("just some prose, not a transcript\n", []),  # unknown format
        (None, ["--session", "../escape"]),  # id that escapes its prefix
        (None, ["--tenant", "a/b"]),
        (None, ["--format", "no-such-format"]),
    ],
)
def test_bad_input_fails_cleanly_and_stores_nothing(capsys, store_url, tmp_path, content, args):
    path = FIXTURE
    if content is not None:
        path = tmp_path / "input.json"
        path.write_text(content)
    rc, out, err = run(capsys, "import", str(path), "--store", store_url, *args)
    assert rc == 2
    assert err.startswith("compactor: error:")
    assert stored_keys(store_url) == []


def test_view_of_an_unknown_session(capsys, store_url):
    rc, _, err = run(capsys, "view", "nope", "--store", store_url)
    assert rc == 2 and "no session 'nope'" in err and "compactor import" in err


def test_sessions(capsys, store_url):
    assert run(capsys, "sessions", "--store", store_url)[1].startswith("no sessions")
    run(capsys, "import", str(FIXTURE), "--store", store_url, "--session", "one")
    run(capsys, "import", str(FIXTURE), "--store", store_url, "--session", "two")
    rc, out, _ = run(capsys, "sessions", "--store", store_url, "--json")
    assert rc == 0
    assert [(r["session"], r["version"]) for r in json.loads(out)] == [("one", 8), ("two", 8)]
    assert "one" in run(capsys, "sessions", "--store", store_url)[1]


def test_import_and_view_on_s3(capsys, s3_endpoint, s3_bucket, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    url = f"s3://{s3_bucket}/compactor"
    assert run(capsys, "import", str(FIXTURE), "--store", url)[0] == 0
    rc, out, _ = run(capsys, "view", "cli-session", "--json", "--store", url)
    assert rc == 0 and len(json.loads(out)["messages"]) == 7
    rc, _, err = run(capsys, "view", "cli-session", "--store", f"s3://{s3_bucket}-missing/x")
    assert rc == 2 and "does not exist" in err  # a missing bucket is a not-found, like a session


@pytest.mark.parametrize(
    "name,expected",
    [
        ("rollout-2025-01-01T10:00:00-abc.jsonl", "rollout-2025-01-01T10-00-00-abc"),
        ("..hidden..json", "hidden"),
        ("weird name (copy).traj", "weird-name-copy"),
        ("x" * 300 + ".md", "x" * 128),
        ("...", "session"),
    ],
)
def test_session_id_from_path(name, expected):
    assert session_id_from_path(name) == expected


def test_view_json_answers_a_call_still_waiting_for_its_result(tmp_path, capsys):
    """The JSON is a request the Messages API accepts: every tool_use has a tool_result."""
    import json as _json

    from compactor.cli import main as _main
    from compactor.events import Event, TextBlock, ToolUseBlock
    from compactor.store import SessionLog, open_store

    url = f"file://{tmp_path}"
    SessionLog(open_store(url), "default", "pending").append([
        Event(id="u", role="user", blocks=[TextBlock(text="run the load test")]),
        Event(id="a", role="assistant", blocks=[ToolUseBlock(id="t9", name="Bash", input={"command": "lt"})]),
    ])
    capsys.readouterr()
    assert _main(["view", "pending", "--json", "--store", url]) == 0
    doc = _json.loads(capsys.readouterr().out)
    msgs = doc["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    result = msgs[2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "t9" and result["is_error"]
