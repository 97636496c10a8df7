"""`compactor gc` and `compactor delete` through compactor.cli.main: output, --json, exit codes,
the confirm flag, and settings from the environment."""

from __future__ import annotations

import asyncio
import json

import pytest

from compactor.bench.lifecycle import busy_session
from compactor.cli import main
from compactor.store import SessionLog, open_store
from compactor.store.verify import verify_session


@pytest.fixture
def url(tmp_path) -> str:
    u = f"file://{tmp_path / 'store'}"
    store = open_store(u)
    asyncio.run(busy_session(store, "acme", "s1", appends=20, compactions=4))
    asyncio.run(busy_session(store, "beta", "s2", appends=10, compactions=2))
    return u


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def everything(url: str) -> dict[str, bytes]:
    store = open_store(url)
    return {k: store.get(k)[0] for k in store.list("")}


def test_gc_session_text_and_json(capsys, url, monkeypatch):
    before = everything(url)
    # the default grace period (15 min) keeps what was just written
    rc, out, _ = run(capsys, "gc", "s1", "--tenant", "acme", "--store", url)
    assert rc == 0 and "acme/s1: removed nothing" in out
    assert everything(url) == before
    rc, out, _ = run(capsys, "gc", "s1", "--tenant", "acme", "--store", url, "--grace", "0s", "--dry-run", "--json")
    doc = json.loads(out)["sessions"][0]
    assert rc == 0 and doc["dry_run"] and doc["removed"]["segment"] > 0 and everything(url) == before
    monkeypatch.setenv("COMPACTOR_GC_GRACE_S", "0")
    rc, out, _ = run(capsys, "gc", "s1", "--tenant", "acme", "--store", url)
    assert rc == 0 and "acme/s1: removed " in out and " segments" in out and "x live" in out
    after = everything(url)
    assert len(after) < len(before)
    assert {k: v for k, v in after.items() if not k.startswith("t/acme/")} == {
        k: v for k, v in before.items() if not k.startswith("t/acme/")}
    assert verify_session(SessionLog(open_store(url), "acme", "s1")).ok


def test_gc_all_tenants_json(capsys, url):
    rc, out, _ = run(capsys, "gc", "--all", "--store", url, "--grace", "0", "--json")
    doc = json.loads(out)
    assert rc == 0 and [t["tenant"] for t in doc["tenants"]] == ["acme", "beta"]
    for t in doc["tenants"]:
        assert t["totals"]["after_bytes"] <= 1.3 * t["totals"]["live_bytes"]


def test_gc_grammar_errors_exit_2_in_one_line(capsys, url):
    before = everything(url)
    for argv in (["gc"], ["gc", "s1", "--all"], ["gc", "s1", "--grace", "soon"], ["gc", "nosuch"],
                 ["gc", "../x"], ["delete"], ["delete", "nosuch"], ["gc", "--tenant", "a/b"]):
        rc, out, err = run(capsys, *argv, "--store", url)
        assert rc == 2, argv
        assert err.startswith("compactor: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert everything(url) == before


def test_gc_of_a_damaged_session_exits_1_and_removes_nothing(capsys, url):
    store = open_store(url)
    key = store.list("t/acme/s/s1/records/")[0]
    store.put(key, store.get(key)[0].replace(b'"trigger":"manual"', b'"trigger":"sweep"'))
    before = everything(url)
    rc, out, _ = run(capsys, "gc", "--tenant", "acme", "--store", url, "--grace", "0")
    assert rc == 1 and "skipped" in out and "sha256" in out
    assert {k: v for k, v in everything(url).items() if "/s/s1/" in k} == {
        k: v for k, v in before.items() if "/s/s1/" in k}


def test_delete_needs_yes(capsys, url):
    before = everything(url)
    rc, out, err = run(capsys, "delete", "s1", "--tenant", "acme", "--store", url)
    assert rc == 2 and "would delete session acme/s1" in out and "--yes" in err
    assert everything(url) == before
    rc, out, _ = run(capsys, "delete", "s1", "--tenant", "acme", "--store", url, "--yes", "--by", "ops@example")
    assert rc == 0 and "deleted session acme/s1" in out and "record t/acme/deletions/" in out
    assert open_store(url).list("t/acme/s/") == []
    rc, out, _ = run(capsys, "delete", "--tenant", "beta", "--store", url, "--yes", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["kind"] == "tenant" and doc["record_key"].startswith("deletions/beta/")
    assert open_store(url).list("t/beta/") == []
    rc, _, _ = run(capsys, "delete", "--tenant", "beta", "--store", url, "--yes")
    assert rc == 2


def test_a_bound_cli_cannot_gc_or_delete_another_tenant(capsys, url, monkeypatch):
    monkeypatch.setenv("COMPACTOR_TENANTS", "beta")
    before = everything(url)
    for argv in (["gc", "s1", "--tenant", "acme"], ["gc", "--tenant", "acme"], ["delete", "--tenant", "acme", "--yes"]):
        rc, _, err = run(capsys, *argv, "--store", url, "--grace", "0") if argv[0] == "gc" else run(capsys, *argv, "--store", url)
        assert rc == 2 and "acme" in err
    rc, out, _ = run(capsys, "gc", "--all", "--store", url, "--grace", "0", "--json")
    assert rc == 0 and [t["tenant"] for t in json.loads(out)["tenants"]] == ["beta"]
    assert {k: v for k, v in everything(url).items() if k.startswith("t/acme/")} == {
        k: v for k, v in before.items() if k.startswith("t/acme/")}
