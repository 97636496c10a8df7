"""`compactor report --by tenant`: sums of the stored records per tenant, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from activities.metrics import llm_cost_usd
from compactor.cli.report import parse_since
from compactor.records import CompactionRecord
from compactor.store import SessionLog, open_store

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime.now(timezone.utc)


def _rec(tenant: str, session: str, run: str, status: str, before: int, after: int, *, age_h: float = 0.5,
         calls: list[dict] | None = None, fallback: str | None = None) -> CompactionRecord:
    return CompactionRecord(id=run, tenant=tenant, session=session, status=status, tokens_before=before,
                            tokens_after=after, llm_calls=calls or [], fallback_reason=fallback,
                            created_at=NOW - timedelta(hours=age_h), workflow_id=f"compact/{tenant}/{session}")


CALL = {"model": "claude-sonnet-5-5", "input_tokens": 100_000, "output_tokens": 5_000}


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    d = tmp_path / "store"
    store = open_store(f"file://{d}")
    a1, a2, b1 = SessionLog(store, "acme", "s1"), SessionLog(store, "acme", "s2"), SessionLog(store, "beta", "s1")
    for log in (a1, a2, b1):
        log.append([])  # a head, as a real session has
    a1.write_record(_rec("acme", "s1", "r1", "committed", 10_000, 2_000, calls=[CALL]))
    a1.write_record(_rec("acme", "s1", "r2", "noop", 2_000, 2_000))
    a2.write_record(_rec("acme", "s2", "r3", "failed", 9_000, 9_000, age_h=48))
    b1.write_record(_rec("beta", "s1", "r4", "committed", 5_000, 1_000, calls=[CALL, CALL], fallback="validation: x"))
    return d


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("COMPACTOR_")}
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "compactor", "report", *argv], capture_output=True, text=True,
                          cwd=ROOT, env=e, timeout=60)


def test_report_sums_records_per_tenant(store_dir: Path):
    res = run("--by", "tenant", "--store", f"file://{store_dir}", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    rows = {r["tenant"]: r for r in doc["tenants"]}
    assert set(rows) == {"acme", "beta"}
    acme, beta = rows["acme"], rows["beta"]
    assert acme["compactions"] == 3 and acme["statuses"] == {"committed": 1, "noop": 1, "failed": 1}
    assert acme["tokens_saved"] == 8_000  # committed runs only
    assert acme["llm_calls"] == 1 and acme["cost_usd"] == pytest.approx(llm_cost_usd(CALL))
    assert llm_cost_usd(CALL) == pytest.approx(0.1 * 2.0 + 0.005 * 10.0)  # sonnet-5-5 list prices
    assert beta["tokens_saved"] == 4_000 and beta["fallbacks"] == 1
    assert beta["cost_usd"] == pytest.approx(2 * llm_cost_usd(CALL))
    assert doc["total"]["compactions"] == 4 and doc["total"]["tokens_saved"] == 12_000


def test_since_keeps_only_recent_runs_and_text_output_is_a_table(store_dir: Path):
    res = run("--store", f"file://{store_dir}", "--since", "24h")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    acme = next(x for x in lines if x.startswith("acme"))
    assert acme.split()[1] == "2"  # the 48-hour-old failure is out of the window
    assert any(x.startswith("total") for x in lines) and "tokens saved" in lines[1]
    doc = json.loads(run("--store", f"file://{store_dir}", "--since", (NOW - timedelta(days=3)).date().isoformat(),
                         "--json").stdout)
    assert doc["total"]["compactions"] == 4


def test_bad_input_is_one_line_exit_2(store_dir: Path, tmp_path: Path):
    for argv in (["--since", "yesterday"], ["--tenant", "../x"]):
        res = run("--store", f"file://{store_dir}", *argv)
        assert res.returncode == 2, (argv, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    missing = tmp_path / "nowhere"
    res = run("--store", f"file://{missing}")
    assert res.returncode == 2 and "no store" in res.stderr and not missing.exists()
    res = run("--store", f"file://{store_dir}", "--tenant", "gamma")
    assert res.returncode == 2 and "gamma" in res.stderr


def test_a_bound_cli_reports_only_its_tenants(store_dir: Path):
    res = run("--store", f"file://{store_dir}", "--json", env={"COMPACTOR_TENANTS": "beta"})
    assert [r["tenant"] for r in json.loads(res.stdout)["tenants"]] == ["beta"]
    res = run("--store", f"file://{store_dir}", "--tenant", "acme", env={"COMPACTOR_TENANTS": "beta"})
    assert res.returncode == 2


def test_parse_since():
    now = datetime(2026, 3, 1, tzinfo=timezone.utc)
    assert parse_since("90m", now) == now - timedelta(minutes=90)
    assert parse_since("7d", now) == now - timedelta(days=7)
    assert parse_since("2026-02-01", now) == datetime(2026, 2, 1, tzinfo=timezone.utc)
    assert parse_since(None) is None
