"""How the CLI and the worker fail (issue 16 item 9): `--json` errors are a JSON document on
stdout with the same exit code, a busy metrics port and `--inline --hold` are one line, a
Temporal connection failure names the address, and a failed `connect()` never aborts the
process at exit."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from compactor.cli import main
from compactor.errors import InvalidInput, TemporalUnavailable

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "compactor" / "samples" / "demo-session.claude.jsonl"


def test_json_errors_are_a_document_on_stdout_with_the_same_exit_code(tmp_path, capsys):
    store = f"file://{tmp_path}/store"
    assert main(["inspect", "nosuch", "--store", store]) == 2
    plain = capsys.readouterr()
    assert plain.out == "" and plain.err.startswith("compactor: error:")

    assert main(["inspect", "nosuch", "--store", store, "--json"]) == 2
    got = capsys.readouterr()
    doc = json.loads(got.out)
    assert doc["error"]["code"] == "not_found" and doc["error"]["exit_code"] == 2
    assert "nosuch" in doc["error"]["message"]
    assert got.err.count("compactor: error:") == 1


def test_a_usage_error_with_json_is_a_document_too(capsys):
    with pytest.raises(SystemExit) as ex:
        main(["view", "s1", "--json", "--no-such-flag"])
    assert ex.value.code == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"]["code"] == "usage" and "--no-such-flag" in doc["error"]["message"]


def test_inline_hold_is_refused_in_one_line(tmp_path, capsys):
    rc = main(["compact", str(SAMPLE), "--inline", "--hold", "--store", f"file://{tmp_path}/s"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--hold" in err and "--inline" in err
    assert not (tmp_path / "s").exists()  # nothing was read or stored


def test_a_busy_metrics_port_is_one_line_naming_it():
    from workers.telemetry import OpsServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(InvalidInput) as err:
            OpsServer("127.0.0.1", port, lambda: {})
    assert f"127.0.0.1:{port}" in str(err.value) and "COMPACTOR_METRICS_PORT" in str(err.value)


@pytest.mark.parametrize("raw, says", [
    ("Failed client connect: Server connection error: tonic::transport::Error(Transport, ConnectError("
     "ConnectError(\"tcp connect error\", Os { code: 111, kind: ConnectionRefused, message: "
     "\"Connection refused\" })))", "connection refused"),
    ("Failed client connect: Server connection error: tonic::transport::Error(Transport, ConnectError("
     "ConnectError(\"dns error\", Custom { kind: Uncategorized, error: \"failed to lookup address "
     "information: Name or service not known\" })))", "unknown host"),
    ("Failed client connect: something new", "could not connect"),
])
def test_connection_failures_name_the_address_not_the_transport(raw, says):
    from workers.worker import unreachable

    exc = unreachable("temporal.example:7233", RuntimeError(raw))
    assert isinstance(exc, TemporalUnavailable)
    assert str(exc).startswith("cannot reach Temporal at temporal.example:7233: " + says)
    assert "tonic" not in str(exc) and "\n" not in str(exc)


PROBE = """
import asyncio
from workers.settings import Settings
from workers.worker import connect
async def main():
    try:
        await connect(Settings(), "127.0.0.1:{port}", connect_timeout=1)
    except Exception as exc:
        print(type(exc).__name__)
asyncio.run(main())
"""


def test_a_failed_connect_never_aborts_the_process_at_exit():
    # Before the fix about 4 in 10 of these exited 134 (PyGILState_Release while finalizing).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        for _ in range(6):
            p = subprocess.run([sys.executable, "-c", PROBE.format(port=port)], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
            assert (p.returncode, p.stdout.strip()) == (0, "TemporalUnavailable"), p.stderr[-500:]


def test_a_dev_server_that_died_after_opening_its_port_is_named_with_its_log(tmp_path):
    """`compactor dev`: when Temporal is unreachable because the dev server it started has
    exited (its UI port taken meanwhile, say), the error says so with the server's last log
    lines, not only "connection refused"; a live server adds nothing."""
    from compactor.cli.ops import _server_died
    from workers.devstack import Proc

    log = tmp_path / "temporal.log"
    log.write_text("starting\nfailed to start UI server: listen tcp 127.0.0.1:8233: bind: address already in use\n")
    dead = Proc(subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"]), "127.0.0.1:1")
    dead.proc.wait()
    said = _server_died(dead, str(log))
    assert said is not None and "exited with code 3" in said and "address already in use" in said

    alive = Proc(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]), "127.0.0.1:1")
    try:
        assert _server_died(alive, str(log)) is None
    finally:
        alive.proc.kill()
        alive.proc.wait()
