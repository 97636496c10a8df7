"""``compact --inline`` run as the process's entry ends without its teardown (issue 17,
``compactor.cli.fast_exit``): the same stdout, ``--out`` document and exit code as the usual
exit, through a pipe (block-buffered: the streams must be flushed before ``os._exit``); other
commands, and ``main`` called in a process of its own, end as before."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from compactor.cli import fast_exit, main

ROOT = Path(__file__).resolve().parents[2]

# The process's entry with an atexit hook of its own: it runs only when the process tears
# itself down. ``USUAL``: ``main`` then ``sys.exit``, the exit before ``fast_exit``.
_RUN = r"""
import atexit, sys
atexit.register(lambda: print("@@teardown", file=sys.stderr))
from compactor.cli import entry, main
mode = sys.argv.pop(1)
sys.exit(main(sys.argv[1:]) if mode == "USUAL" else entry())
"""


def _run(mode: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # (stdout a buffered pipe)
    return subprocess.run([sys.executable, "-c", _RUN, mode, *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=env)


def _session(tmp_path: Path) -> Path:
    from compactor.bench.scale import write_session

    path = tmp_path / "small.jsonl"
    write_session(path, 2_000)
    return path


def _record(stdout: str) -> dict:
    doc = json.loads(stdout)
    doc["record"].pop("durations_ms")
    doc.pop("out")
    return doc


def _document(path: Path) -> dict:
    doc = json.loads(path.read_text())
    doc["record"].pop("durations_ms")  # (wall-clock times)
    return doc


def test_compact_inline_ends_short_with_the_same_outputs(tmp_path: Path) -> None:
    path = _session(tmp_path)
    args = ["compact", "--inline", str(path), "--json", "--now", "2026-01-01T00:00:00Z"]
    usual = _run("USUAL", *args, "--out", str(tmp_path / "usual.json"))
    short = _run("ENTRY", *args, "--out", str(tmp_path / "short.json"))
    assert usual.returncode == short.returncode == 0
    assert "@@teardown" in usual.stderr and "@@teardown" not in short.stderr
    assert _record(short.stdout) == _record(usual.stdout)
    assert _document(tmp_path / "short.json") == _document(tmp_path / "usual.json")
    # without --out (the session's events held to the end) and in the human-readable report
    plain = _run("ENTRY", *args)
    assert plain.returncode == 0 and "@@teardown" not in plain.stderr
    assert _record(plain.stdout) == _record(usual.stdout) and json.loads(plain.stdout)["out"] is None
    report = [a for a in args if a != "--json"]
    usual_report, short_report = _run("USUAL", *report), _run("ENTRY", *report)
    assert short_report.returncode == 0 and "@@teardown" not in short_report.stderr
    assert short_report.stdout == usual_report.stdout and "status" in short_report.stdout


def test_other_commands_and_failures_end_as_before(tmp_path: Path) -> None:
    shown = _run("ENTRY", "policy", "show", "default")
    assert shown.returncode == 0 and "@@teardown" in shown.stderr
    assert shown.stdout == _run("USUAL", "policy", "show", "default").stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    failed = _run("ENTRY", "compact", "--inline", str(bad), "--json")
    assert failed.returncode == _run("USUAL", "compact", "--inline", str(bad), "--json").returncode != 0
    assert "@@teardown" in failed.stderr


def test_main_in_a_process_of_its_own_holds_nothing(tmp_path: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        rc = main(["compact", "--inline", str(_session(tmp_path)), "--json"])
    assert rc == 0 and json.loads(out.getvalue())["status"] == "committed"
    assert not fast_exit.enabled() and fast_exit._held == [] and not fast_exit._state["asked"]
    assert gc.get_freeze_count() == 0  # (the caller's objects stay in the collector's sight)
