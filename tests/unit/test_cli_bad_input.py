"""Every bad input a careless or hostile user can give the CLI: one line on stderr naming the
problem (no traceback), exit 2, and the store exactly as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor.cli import main

SAMPLE = Path(__file__).resolve().parents[2] / "compactor" / "samples" / "demo-session.claude.jsonl"


def _cc(uuid: str, content, role: str = "user") -> str:
    return json.dumps({"type": role, "uuid": uuid, "sessionId": "s", "timestamp": "2025-01-01T00:00:00Z",
                       "message": {"role": role, "content": content}})


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under the store directory with its bytes (empty when there is no store)."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _subprocess(*argv: str) -> tuple[int, str, str]:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("TEMPORAL_ADDRESS", None)
    res = subprocess.run([sys.executable, "-m", "compactor", *argv], capture_output=True, text=True,
                         env=env, timeout=120, check=False)
    return res.returncode, res.stdout, res.stderr


@pytest.fixture
def store(tmp_path) -> Path:
    """A store that already holds a session, so 'unchanged' is a real comparison."""
    root = tmp_path / "store"
    assert main(["import", str(SAMPLE), "--store", str(root), "--session", "existing"]) == 0
    return root


def fails_cleanly(capsys, root: Path, *argv: str) -> str:
    before = snapshot(root)
    if argv[0] == "compact" and "--inline" not in argv:
        # the durable path leaves through os._exit (Temporal's runtime threads): a process
        rc, out, err = _subprocess(*argv)
    else:
        rc = main(list(argv))
        out, err = capsys.readouterr()
    assert rc == 2, (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("compactor: error: "), err
    assert "Traceback" not in err
    assert snapshot(root) == before
    return lines[0]


def test_a_line_over_the_limit(capsys, store, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTOR_MAX_LINE_BYTES", "2000")
    p = tmp_path / "big.jsonl"
    p.write_text("\n".join([_cc("u1", "hi"), _cc("u2", "w " * 5_000)]) + "\n")
    msg = fails_cleanly(capsys, store, "import", str(p), "--store", str(store))
    assert f"{p}:2" in msg and "COMPACTOR_MAX_LINE_BYTES" in msg
    fails_cleanly(capsys, store, "compact", "--inline", str(p))


@pytest.mark.parametrize("doc", ["jsonl", "json"])
def test_json_nested_ten_thousand_deep_on_every_import_path(capsys, store, tmp_path, doc):
    deep = "[" * 10_000 + "]" * 10_000
    p = tmp_path / f"deep.{doc}"
    if doc == "jsonl":
        p.write_text(_cc("u1", "hi") + "\n" + _cc("u2", "x").replace('"x"', deep) + "\n")
    else:
        p.write_text('{"messages": %s}' % deep)
    for argv in (["import", str(p), "--store", str(store)], ["compact", "--inline", str(p)],
                 ["compact", str(p), "--store", str(store)]):
        assert "nested deeper than 200" in fails_cleanly(capsys, store, *argv)


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_compact_inline_on_a_missing_file_or_a_directory(capsys, store, tmp_path, what):
    target = tmp_path / "nope.jsonl" if what == "missing" else tmp_path
    msg = fails_cleanly(capsys, store, "compact", "--inline", str(target))
    assert ("no such file" if what == "missing" else "is a directory") in msg
    fails_cleanly(capsys, store, "import", str(target), "--store", str(store))


def test_now_not_a_date(capsys, store):
    assert "--now" in fails_cleanly(capsys, store, "compact", "--inline", str(SAMPLE), "--now", "not-a-date")


def test_a_store_that_is_a_file(capsys, store, tmp_path):
    f = tmp_path / "passwd"
    f.write_text("root:x:0:0\n")
    for url in (f"file://{f}", "file:///etc/passwd"):
        msg = fails_cleanly(capsys, store, "import", str(SAMPLE), "--store", url)
        assert "not a directory" in msg
        fails_cleanly(capsys, store, "compact", str(SAMPLE), "--store", url)
    assert f.read_text() == "root:x:0:0\n"


def test_a_store_below_a_file_is_not_writable(capsys, store, tmp_path):
    f = tmp_path / "plain"
    f.write_text("x")
    assert "cannot write" in fails_cleanly(capsys, store, "import", str(SAMPLE), "--store", f"file://{f}/sub")


def test_corrupt_breaker_is_reported_with_the_reset_command(capsys, store):
    key = store / "t" / "default" / "s" / "existing" / "breaker.json"
    key.write_text('{"tenant": "default", "consec')
    msg = fails_cleanly(capsys, store, "breaker", "existing", "--store", str(store))
    assert "corrupt" in msg and "compactor breaker existing --clear" in msg
    assert main(["breaker", "existing", "--clear", "--store", str(store)]) == 0
    assert main(["breaker", "existing", "--store", str(store)]) == 0
    assert "closed" in capsys.readouterr().out


async def test_corrupt_breaker_is_read_as_closed_without_failing_the_activities(store):
    # issue 15: a failed activity is a worker traceback per run; the check warns once instead
    from activities.breaker import BreakerActivities, BreakerCheckInput, BreakerRecordInput
    from compactor.store import open_store

    key = store / "t" / "default" / "s" / "existing" / "breaker.json"
    key.write_text("not json")
    acts = BreakerActivities(open_store(str(store)))
    gate = await acts.check_breaker(BreakerCheckInput(tenant="default", session="existing", trigger="sweep"))
    assert gate.allowed and "unreadable" in gate.reason
    out = await acts.record_breaker(BreakerRecordInput(tenant="default", session="existing", ok=False, trigger="sweep"))
    assert out.transition == "unchanged"
    assert key.read_text() == "not json"  # left for the operator to see and clear


def test_mixed_formats_report_skipped_lines(capsys, tmp_path):
    codex = json.dumps({"timestamp": "2025-01-01T00:00:00Z", "type": "response_item",
                        "payload": {"type": "message", "role": "user",
                                    "content": [{"type": "input_text", "text": "other agent"}]}})
    p = tmp_path / "mixed.jsonl"
    p.write_text("\n".join([_cc("u1", "one"), codex, _cc("u2", "two"), codex]) + "\n")
    assert main(["import", str(p), "--store", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "skipped lines 2" in out and "line 2: a codex line" in out and "line 4: a codex line" in out


@pytest.mark.parametrize("cmd", ["import", "compact-inline", "compact"])
def test_an_empty_session_id_is_an_error_not_the_file_name(capsys, store, cmd):
    argv = {"import": ["import", str(SAMPLE), "--store", str(store)],
            "compact-inline": ["compact", "--inline", str(SAMPLE)],
            "compact": ["compact", str(SAMPLE), "--store", str(store)]}[cmd]
    assert "invalid session id ''" in fails_cleanly(capsys, store, *argv, "--session", "")


@pytest.mark.parametrize("value", ["0", "-5"])
def test_durable_target_tokens_zero_is_rejected_up_front(capsys, store, value):
    """Rejected before the import, the append or any Temporal server is started."""
    msg = fails_cleanly(capsys, store, "compact", str(SAMPLE), "--store", str(store), "--target-tokens", value)
    assert "--target-tokens" in msg


def test_a_bad_limit_setting_is_one_line(capsys, store, monkeypatch):
    monkeypatch.setenv("COMPACTOR_MAX_LINE_BYTES", "lots")
    assert "COMPACTOR_MAX_LINE_BYTES" in fails_cleanly(capsys, store, "import", str(SAMPLE), "--store", str(store))


def test_a_big_tool_output_goes_to_the_store_on_import_and_is_cut_inline(capsys, tmp_path, monkeypatch):
    from compactor.store import SessionLog, open_store

    monkeypatch.setenv("COMPACTOR_MAX_INLINE_TOOL_OUTPUT", "4096")
    big = "".join(f"row {i}\n" for i in range(5_000))
    call = _cc("a1", [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "cat"}}], "assistant")
    res = _cc("u2", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": big}])
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join([_cc("u1", "go"), call, res, _cc("u3", "thanks")]) + "\n")

    root = tmp_path / "s"
    assert main(["import", str(p), "--store", str(root), "--session", "t"]) == 0
    out = capsys.readouterr().out
    assert "1 moved to the artifact store" in out
    log = SessionLog(open_store(str(root)), "default", "t")
    (ref,) = [c for e in log.read_events() for b in e.tool_results for c in b.content]
    assert ref.type == "artifact_ref" and log.get_artifact(ref.sha256).decode() == big

    assert main(["compact", "--inline", str(p), "--out", str(tmp_path / "o.json")]) == 0
    err = capsys.readouterr().err
    assert "cut to head + tail" in err
    doc = json.loads((tmp_path / "o.json").read_text())
    texts = json.dumps(doc["messages"])
    assert "bytes truncated at import" in texts and "row 4999" in texts
