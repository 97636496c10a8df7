"""The Temporal core's own log lines never land on a command's stdout.

The SDK's default runtime prints the Rust core's warnings (a failed workflow task, e.g. the
deadlock detector under load) on stdout, with colour escapes, in the middle of a command's
``--json`` output. The runtime ``workers.worker.connect`` creates keeps no core logger; the
SDK's Python side logs the failed task itself, on stderr. The probe leaves the way every
command holding a client does (``compactor.cli.ops.run_and_exit``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

PROBE = '''
import asyncio, sys, uuid
from temporalio import workflow
from temporalio.worker import Worker
from workers.settings import Settings
from workers.worker import connect

@workflow.defn(name="FailsItsTask", sandboxed=False)
class FailsItsTask:
    @workflow.run
    async def run(self) -> None:
        raise RuntimeError("boom")  # not a workflow failure: the task fails, and the core warns

async def main(address: str) -> None:
    tq = f"core-logs-{uuid.uuid4().hex[:8]}"
    client = await connect(Settings(), address)
    async with Worker(client, task_queue=tq, workflows=[FailsItsTask]):
        handle = await client.start_workflow(FailsItsTask.run, id=tq, task_queue=tq)
        await asyncio.sleep(2.5)
        await handle.terminate()
    print(json.dumps({"done": True}))
    return 0

import json
from compactor.cli.ops import run_and_exit
run_and_exit(main(sys.argv[1]))
'''


def test_a_failed_workflow_task_is_logged_on_stderr_and_stdout_stays_json(temporal_address, tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPACTOR_", "OTEL_"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, str(script), temporal_address], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout) == {"done": True}  # nothing but the command's own output
    assert "\x1b[" not in p.stdout + p.stderr  # no terminal escapes anywhere
    assert "Failed activation on workflow FailsItsTask" in p.stderr  # the SDK's warning, where logs go
