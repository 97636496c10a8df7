"""One CLI grammar: --json on every store command parses, the same not-found exits 2 in every
command, config warns on a mistyped variable, dev refuses a busy port, plot writes a PNG,
inspect --diff shows what a checkpoint replaced. (Temporal commands: tests/integration.)"""

from __future__ import annotations

import json
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from compactor.cli import main
from compactor.engine.diff import diff_checkpoint
from compactor.events import ArtifactRefBlock, Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.records import Checkpoint, CompactionRecord, SeqRange
from compactor.store import SessionLog, open_store

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "anthropic" / "cli-session.json"


@pytest.fixture
def url(tmp_path, capsys) -> str:
    """A store holding session ``s`` (8 events) and a committed record on it."""
    u = f"file://{tmp_path / 'store'}"
    assert main(["import", str(FIXTURE), "--store", u, "--session", "s"]) == 0
    SessionLog(open_store(u), "default", "s").write_record(CompactionRecord(
        id="run-1", tenant="default", session="s", status="committed", checkpoint="ck-x",
        snapshot_version=6, committed_version=6, tokens_before=150, tokens_after=40, layers=["summary"],
        created_at=datetime(2026, 1, 1, tzinfo=timezone.utc)))
    capsys.readouterr()
    return u


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv", [
    ["import", str(FIXTURE), "--session", "s2"],
    ["view", "s"],
    ["sessions"],
    ["inspect", "s"],
    ["verify", "s"],
    ["breaker", "s"],
    ["rollback", "s", "--to", "none"],
    ["plot", "s", "--out", "{tmp}/p.png"],
])
def test_every_store_command_prints_json(capsys, url, tmp_path, argv):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    rc, out, err = run(capsys, *argv, "--json", "--store", url)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc not in (None, {}, [])


@pytest.mark.parametrize("argv", [["policy", "show", "default"], ["policy", "list"], ["config"],
                                  ["compact", "--inline", str(FIXTURE), "--target-tokens", "200"]])
def test_commands_without_a_store_print_json(capsys, argv):
    rc, out, err = run(capsys, *argv, "--json")
    assert rc == 0, err
    json.loads(out)


def test_compact_inline_json_says_what_happened(capsys):
    rc, out, _ = run(capsys, "compact", "--inline", str(FIXTURE), "--target-tokens", "200", "--json")
    doc = json.loads(out)
    assert doc["status"] == doc["record"]["status"] and doc["tokens_before"] > 0


@pytest.mark.parametrize("argv", [
    ["view", "nosuch"], ["inspect", "nosuch"], ["inspect", "nosuch", "--diff"],
    ["rollback", "nosuch", "--to", "none"], ["verify", "nosuch"], ["breaker", "nosuch"],
    ["breaker", "nosuch", "--clear"], ["plot", "nosuch"], ["compact", "nosuch"],
])
def test_the_same_not_found_exits_2_everywhere(capsys, url, argv):
    before = sorted(p.name for p in Path(url[len("file://"):]).rglob("*"))
    rc, out, err = run(capsys, *argv, "--store", url)
    assert rc == 2, (out, err)
    assert "nosuch" in err and err.startswith("compactor: error:")
    assert sorted(p.name for p in Path(url[len("file://"):]).rglob("*")) == before  # nothing written


def test_rollback_to_an_unknown_checkpoint_exits_2(capsys, url):
    rc, _, err = run(capsys, "rollback", "s", "--to", "ck-nosuch", "--store", url)
    assert rc == 2 and "ck-nosuch" in err


def test_diff_without_a_checkpoint_is_not_found(capsys, url):
    rc, _, err = run(capsys, "inspect", "s", "--diff", "--store", url)
    assert rc == 2 and "no checkpoint" in err


def test_config_warns_on_a_mistyped_variable_and_masks_secrets(capsys, monkeypatch):
    monkeypatch.setenv("COMPACTOR_STOER", "s3://typo/x")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value")
    monkeypatch.setenv("COMPACTOR_TENANT", "acme")
    rc, out, err = run(capsys, "config", "--json")
    assert rc == 0
    assert "COMPACTOR_STOER" in err and "did you mean COMPACTOR_STORE" in err
    doc = json.loads(out)
    assert doc["settings"]["tenant"] == "acme" and doc["sources"]["tenant"] == "env COMPACTOR_TENANT"
    assert doc["settings"]["store"] != "s3://typo/x"  # the typo really was ignored
    assert doc["unknown"] == [{"name": "COMPACTOR_STOER", "did_you_mean": "COMPACTOR_STORE"}]
    assert "sk-ant-secret-value" not in out + err and doc["settings"]["anthropic_api_key"] == "********"
    rc, out, err = run(capsys, "config")
    assert "sk-ant-secret-value" not in out and "COMPACTOR_STOER" in err


def test_config_is_quiet_when_every_variable_is_known(capsys, monkeypatch):
    monkeypatch.setenv("COMPACTOR_STORE", "file:///tmp/x")
    _, _, err = run(capsys, "config")
    assert "warning" not in err


def test_dev_refuses_a_port_in_use(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTOR_METRICS_PROT", "9464")  # a typo is said at start, not ignored
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        rc, _, err = run(capsys, "dev", "--port", str(port), "--store", f"file://{tmp_path}")
    assert rc == 2 and f"port {port}" in err and "already in use" in err
    assert "COMPACTOR_METRICS_PROT" in err and "did you mean COMPACTOR_METRICS_PORT" in err


def test_plot_writes_a_png_with_each_compaction(capsys, url, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "s.png"
    rc, text, err = run(capsys, "plot", "s", "--out", str(out), "--json", "--store", url)
    assert rc == 0, err
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5_000
    doc = json.loads(text)
    assert [(m["seq"], m["after"], m["layers"]) for m in doc["marks"]] == [(6, 40, ["summary"])]
    assert doc["view"][5] == 40 and doc["log"][-1] > doc["view"][-1]


def test_plot_without_matplotlib_says_how_to_install(capsys, url, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    rc, _, err = run(capsys, "plot", "s", "--store", url)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "pip install" in err


def test_token_series_follows_commits_and_rollbacks():
    from compactor.cli.plot import token_series

    def rec(status, at, after=0, ckpt=None):
        return CompactionRecord(id=f"{status}{at}", tenant="t", session="s", status=status, checkpoint=ckpt,
                                committed_version=at, tokens_after=after)

    s = token_series([(i, 100) for i in range(1, 9)],
                     [rec("committed", 4, 150, "ck1"), rec("failed", 5), rec("rolled_back", 7)])
    assert s.view == [100, 200, 300, 150, 250, 350, 700, 800]  # rollback to none: the whole log
    assert [m.status for m in s.marks] == ["committed", "failed", "rolled_back"]


def _diff_session():
    ref = ArtifactRefBlock(uri="artifact://sha256/" + "ab" * 32, sha256="ab" * 32, bytes=50_000)
    events = [
        Event(seq=1, id="1", role="user", blocks=[TextBlock(text="Please fix the flaky upload test in ci.")]),
        Event(seq=2, id="2", role="assistant", blocks=[ToolUseBlock(id="t1", name="Read", input={"file_path": "src/upload.py"})]),
        Event(seq=3, id="3", role="user", blocks=[ToolResultBlock(tool_use_id="t1", content=[ref])]),
        Event(seq=4, id="4", role="assistant", blocks=[ToolUseBlock(id="t2", name="Bash", input={"command": "pytest -q"})]),
        Event(seq=5, id="5", role="user", blocks=[ToolResultBlock(
            tool_use_id="t2", is_error=True, content=[TextBlock(text="TypeError: bad operand\n1 failed")])]),
        Event(seq=6, id="6", role="user", blocks=[TextBlock(text="Now also bump the version.")]),
    ]
    summary = ("Goal: please fix the flaky upload test in ci. Files read: src/upload.py. "
               f"Artifacts: {ref.uri}. Errors: TypeError.")
    ckpt = Checkpoint(id="ck1", tenant="t", session="s", covers=SeqRange(start=1, end=5), summary=summary,
                      summary_tokens=30, snapshot_version=6)
    return events, ckpt


def test_diff_shows_covered_requests_files_errors_and_artifact_refs():
    events, ckpt = _diff_session()
    d = diff_checkpoint(events, ckpt, None)
    assert (d.replaced_start, d.covers_end, d.replaced_events) == (1, 5, 5)
    req = d.of("request")
    assert [(r.seq, r.kept) for r in req] == [(1, True)]  # seq 6 is after the range: still verbatim
    assert any(f.text == "src/upload.py" and f.kept for f in d.of("file"))
    assert any(e.text.startswith("TypeError") and e.kept for e in d.of("error"))
    tr = {t.tool_use_id: t for t in d.of("tool_result")}
    assert tr["t1"].artifact == "artifact://sha256/" + "ab" * 32 and tr["t1"].kept and tr["t1"].bytes == 50_000
    assert tr["t2"].is_error and tr["t2"].artifact is None and not tr["t2"].kept
    assert tr["t2"].text == "Bash pytest -q"


def test_diff_marks_what_the_summary_dropped():
    events, ckpt = _diff_session()
    d = diff_checkpoint(events, ckpt.model_copy(update={"summary": "Something unrelated."}), None)
    assert not any(i.kept for i in d.items)
    assert len(d.dropped) == len(d.items) > 0


def test_diff_lists_each_file_once_changed_before_read():
    """A file written and read again (and read twice) is one file item; ``inspect --diff`` lists
    the changed files first, then the ones only read, in the lift's order."""
    events = [Event(seq=1, id="1", role="user", blocks=[TextBlock(text="Please tidy the modules.")])]
    calls = [("Write", {"file_path": "src/a.py", "content": "x = 1\n"}), ("Read", {"file_path": "src/a.py"}),
             ("Read", {"file_path": "src/b.py"}), ("Read", {"file_path": "src/b.py"}),
             ("Edit", {"file_path": "src/c.py", "old_string": "a", "new_string": "b"}),
             ("Read", {"file_path": "src/a.py"})]
    for n, (name, inp) in enumerate(calls):
        seq = len(events) + 1
        events += [Event(seq=seq, id=str(seq), role="assistant", blocks=[ToolUseBlock(id=f"t{n}", name=name, input=inp)]),
                   Event(seq=seq + 1, id=str(seq + 1), role="user",
                         blocks=[ToolResultBlock(tool_use_id=f"t{n}", content=[TextBlock(text="ok")])])]
    ckpt = Checkpoint(id="ck1", tenant="t", session="s", covers=SeqRange(start=1, end=len(events)),
                      summary="Changed src/a.py.", summary_tokens=5, snapshot_version=len(events))
    files = [(f.text, f.kept) for f in diff_checkpoint(events, ckpt, None).of("file")]
    assert files == [("src/a.py", True), ("src/c.py", False), ("src/b.py", False)]


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("compactor ")


def _leaf_commands():
    from tests.unit.test_cli_help import _commands

    groups = {"policy", "bench"}
    return {name: p for name, p in _commands() if name not in groups}


def _options(p) -> set[str]:
    return {o for a in p._actions for o in a.option_strings}


def test_every_command_takes_json():
    missing = [n for n, p in _leaf_commands().items() if "--json" not in _options(p)]
    assert missing == []


@pytest.mark.parametrize("name", ["compact", "history", "replay", "sweep", "approve", "reject", "worker"])
def test_every_temporal_command_takes_address_and_namespace(name):
    assert {"--address", "--namespace"} <= _options(_leaf_commands()[name])


@pytest.mark.parametrize("name", ["view", "inspect", "rollback", "verify", "breaker", "plot", "history",
                                  "replay", "approve", "reject"])
def test_every_session_command_takes_session_and_tenant(name):
    p = _leaf_commands()[name]
    assert "--tenant" in _options(p)
    assert any(a.dest == "session" and not a.option_strings for a in p._actions)
