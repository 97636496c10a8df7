"""`compactor compact FILE` on the embedded stack (its own dev server), with OTLP export."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "compactor" / "samples" / "demo-session.claude.jsonl"


class _Collector(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self):  # noqa: N802 - http.server API
        n = int(self.headers.get("Content-Length", 0))
        type(self).bodies.append(self.path.encode() + b" " + self.rfile.read(n))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_compact_file_embedded_stack_matches_inline_and_exports_traces(tmp_path):
    collector = HTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    env = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "COMPACTOR_STORE")}
    env["COMPACTOR_OTLP_ENDPOINT"] = f"http://127.0.0.1:{collector.server_port}"
    cmd = [sys.executable, "-m", "compactor", "compact", str(SAMPLE), "--target-tokens", "3000"]
    try:
        durable = subprocess.run(
            [*cmd, "--store", f"file://{tmp_path}/store", "--out", str(tmp_path / "d.json")],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
        )
        inline = subprocess.run([*cmd, "--inline", "--out", str(tmp_path / "i.json")],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    finally:
        collector.shutdown()
    assert durable.returncode == 0, durable.stderr
    assert inline.returncode == 0, inline.stderr
    assert "workflow" in durable.stdout and "compact/default/demo-session.claude" in durable.stdout
    d, i = json.loads((tmp_path / "d.json").read_text()), json.loads((tmp_path / "i.json").read_text())
    assert (d["messages"], d["system"]) == (i["messages"], i["system"])
    assert d["record"]["status"] == "committed" and d["workflow_id"]
    # spans reached the OTLP endpoint, Temporal's own among them
    traces = b"".join(b for b in _Collector.bodies if b.startswith(b"/v1/traces"))
    assert traces and b"CompactSessionWorkflow" in traces


async def test_dev_keeps_stack_running_and_stops_on_ctrl_c(tmp_path):
    import asyncio
    import signal
    import socket

    from compactor.client import CompactorClient
    from compactor.store import SessionLog, open_store
    from tests.integration.durable_support import coding_session
    from workers.devstack import free_port
    from workers.settings import Settings
    from workers.worker import connect

    port, ui = free_port(), free_port()
    url = f"file://{tmp_path}/store"
    env = {k: v for k, v in os.environ.items() if k not in ("TEMPORAL_ADDRESS", "COMPACTOR_OTLP_ENDPOINT")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "compactor", "dev", "--port", str(port), "--ui-port", str(ui), "--store", url],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        lines = []
        loop = asyncio.get_running_loop()
        while not any("worker running" in x for x in lines):
            line = await asyncio.wait_for(loop.run_in_executor(None, proc.stdout.readline), 90)
            assert line, f"compactor dev exited early: {lines}"
            lines.append(line)
        text = "".join(lines)
        assert f"TEMPORAL_ADDRESS=127.0.0.1:{port}" in text and f"http://127.0.0.1:{ui}" in text
        store = open_store(url)
        SessionLog(store, "default", "dev1").append(coding_session())
        client = await connect(Settings(store=url), f"127.0.0.1:{port}")
        out = await CompactorClient(client, store).compact("dev1", target_tokens=4_000)
        assert out.status == "committed"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
