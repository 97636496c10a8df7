"""Tenant binding of clients, the CLI and workers, and request checks before any workflow exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from activities.contracts import CompactSessionInput
from compactor.client import CompactorClient
from compactor.errors import InvalidId, InvalidInput, PolicyError, TenantNotAllowed
from compactor.events import Event, TextBlock
from compactor.store import SessionLog, open_store
from compactor.tenancy import TenantScope, check_compaction_request, parse_tenants
from workers.settings import Settings
from workflows.compact_session import check_input


class FakeTemporal:
    """Records every call a client makes to Temporal; a refused request must make none."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []

    async def start_workflow(self, *args, **kw):
        self.calls.append(("start_workflow", args, kw))
        return type("Handle", (), {"id": kw.get("id")})()

    def get_workflow_handle(self, *args, **kw):
        self.calls.append(("get_workflow_handle", args, kw))
        raise AssertionError("no RPC expected")

    def list_workflows(self, query, **kw):
        self.calls.append(("list_workflows", (query,), kw))

        async def none():
            return
            yield

        return none()


def _ev(i: int) -> Event:
    return Event(id=f"e{i}", role="user", blocks=[TextBlock(text=f"hello {i}")])


@pytest.fixture
def store(tmp_path):
    return open_store(f"file://{tmp_path}/store")


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


# --- client bound to one tenant ----------------------------------------------------------------


async def test_client_for_a_refuses_tenant_b_before_any_io(store, tmp_path):
    SessionLog(store, "B", "s1").append([_ev(1)])
    before = _files(tmp_path / "store")
    temporal = FakeTemporal()
    cc = CompactorClient(temporal, store, tenant="A")
    for call in (
        cc.append("s1", [_ev(2)], tenant="B"),
        cc.view("s1", tenant="B"),
        cc.start_compaction("s1", tenant="B"),
        cc.ensure_budget("s1", 200_000, tenant="B"),
        cc.records("s1", tenant="B"),
        cc.compactions(tenant="B"),
    ):
        with pytest.raises(TenantNotAllowed):
            await call
    assert temporal.calls == []
    assert _files(tmp_path / "store") == before
    assert [e.seq for e in SessionLog(store, "B", "s1").read_view()] == [1]


async def test_client_for_a_still_serves_a(store):
    cc = CompactorClient(FakeTemporal(), store, tenant="A")
    await cc.append("s1", [_ev(1)])
    await cc.append("s1", [_ev(2)], tenant="A")
    assert [e.seq for e in await cc.view("s1")] == [1, 2]


async def test_multi_tenant_client_serves_each_listed_tenant_only(store):
    temporal = FakeTemporal()
    cc = CompactorClient(temporal, store, tenants=["A", "B"])
    assert cc.tenant == "A" and cc.tenants == ("A", "B")
    await cc.append("s1", [_ev(1)], tenant="B")
    assert [e.seq for e in await cc.view("s1", tenant="B")] == [1]
    handle = await cc.start_compaction("s1", tenant="B")
    assert handle.id == "compact/B/s1"
    with pytest.raises(TenantNotAllowed):
        await cc.view("s1", tenant="C")
    with pytest.raises(TenantNotAllowed):
        CompactorClient(temporal, store, tenant="C", tenants=["A", "B"])


async def test_compactions_listing_is_scoped_to_bound_tenants(store):
    temporal = FakeTemporal()
    await CompactorClient(temporal, store, tenants=["A", "B"]).compactions()
    (_, (query,), _), = temporal.calls
    assert "CompactorTenant IN ('A', 'B')" in query


async def test_history_of_another_tenants_workflow_is_refused_before_any_rpc(store):
    temporal = FakeTemporal()
    cc = CompactorClient(temporal, store, tenant="A")
    for wid in ("compact/B/s1", "sweep/B", "some-other-workflow"):
        with pytest.raises(TenantNotAllowed):
            await cc.history(wid)
    assert temporal.calls == []


async def test_approve_and_reject_of_another_tenant_are_refused_before_any_rpc(store):
    temporal = FakeTemporal()
    cc = CompactorClient(temporal, store, tenant="A")
    for call in (cc.approve("s1", tenant="B"), cc.reject("s1", tenant="B")):
        with pytest.raises(TenantNotAllowed):
            await call
    assert temporal.calls == []


# --- requests checked before the workflow exists ---------------------------------------------


@pytest.mark.parametrize(
    "session, kw, error",
    [
        ("../../tB/s/s1", {}, InvalidId),
        ("", {}, InvalidId),
        ("a/b", {}, InvalidId),
        ("x" * 129, {}, InvalidId),
        ("s1", {"target_tokens": 0}, InvalidInput),
        ("s1", {"window": 0}, PolicyError),
        ("s1", {"max_output": 300_000}, PolicyError),
        ("s1", {"policy": "nope"}, PolicyError),
        ("s1", {"max_merges": -1}, InvalidInput),
        ("s1", {"max_merges": 10_000}, InvalidInput),
        ("s1", {"trigger": "x\n" * 200}, InvalidInput),
    ],
)
async def test_invalid_requests_never_start_a_workflow(store, session, kw, error):
    temporal = FakeTemporal()
    cc = CompactorClient(temporal, store, tenant="A")
    with pytest.raises(error):
        await cc.start_compaction(session, **kw)
    assert temporal.calls == []


def test_workflow_first_step_refuses_what_slipped_past_the_client():
    bad = CompactSessionInput(tenant="A", session="../../tB/s/s1")
    with pytest.raises(ApplicationError) as exc:
        check_input(bad)
    assert exc.value.type == "InvalidInput" and exc.value.non_retryable
    check_input(CompactSessionInput(tenant="A", session="s1"))  # a good one passes


def test_check_compaction_request_accepts_defaults_and_policy_numbers():
    check_compaction_request(CompactSessionInput(tenant="A", session="s1", target_tokens=1))
    with pytest.raises(InvalidInput):
        check_compaction_request(CompactSessionInput(tenant="A", session="s1", llm_attempts=1_000))


# --- binding from settings ----------------------------------------------------------------------


def test_tenants_setting_is_a_validated_comma_list(monkeypatch):
    monkeypatch.setenv("COMPACTOR_TENANTS", " acme, beta ,acme")
    s = Settings()
    assert s.tenants == ["acme", "beta"] and s.tenant == "acme"
    monkeypatch.setenv("COMPACTOR_TENANT", "gamma")
    with pytest.raises(ValueError, match="COMPACTOR_TENANTS"):
        Settings()
    monkeypatch.delenv("COMPACTOR_TENANT")
    monkeypatch.setenv("COMPACTOR_TENANTS", "acme,../x")
    with pytest.raises(ValueError, match="tenant id"):
        Settings()
    monkeypatch.delenv("COMPACTOR_TENANTS")
    assert Settings().tenants == [] and Settings().tenant == "default"


def test_unbound_scope_allows_any_valid_tenant():
    scope = TenantScope()
    assert not scope.bound and scope.check("anything") == "anything"
    with pytest.raises(InvalidId):
        scope.check("../x")
    assert parse_tenants(None) == () and parse_tenants([]) == ()
    with pytest.raises(InvalidInput, match="names no tenant"):  # blank is a mistake, not "any" (issue 15)
        parse_tenants("")


# --- the CLI bound by COMPACTOR_TENANTS ------------------------------------------------------


def test_cli_bound_to_a_refuses_tenant_b_and_leaves_the_store(tmp_path, monkeypatch, capsys):
    from compactor.cli import main

    root = tmp_path / "store"
    SessionLog(open_store(f"file://{root}"), "B", "s1").append([_ev(1)])
    before = {p: (root / p).read_bytes() for p in _files(root)}
    monkeypatch.setenv("COMPACTOR_TENANTS", "A")
    for argv in (["view", "s1"], ["inspect", "s1"], ["sessions"], ["verify", "--all"]):
        rc = main([*argv, "--store", f"file://{root}", "--tenant", "B"])
        err = capsys.readouterr().err
        assert rc == 2, argv
        assert err.count("\n") == 1 and "'B' is not allowed" in err
    assert {p: (root / p).read_bytes() for p in _files(root)} == before
    # and its default tenant is the bound one
    assert main(["sessions", "--store", f"file://{root}"]) == 0


def test_cli_history_of_another_tenant_is_refused_without_contacting_temporal(tmp_path):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "COMPACTOR_TENANTS": "A",
           "TEMPORAL_ADDRESS": "127.0.0.1:9"}  # nothing listens: a contact would fail differently
    res = subprocess.run([sys.executable, "-m", "compactor", "history", "compact/B/s1"],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    assert res.returncode == 2 and "'B' is not allowed" in res.stderr, res.stderr


def test_cli_approve_of_another_tenants_workflow_is_refused_without_contacting_temporal(tmp_path):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "COMPACTOR_TENANTS": "A",
           "TEMPORAL_ADDRESS": "127.0.0.1:9"}  # nothing listens: a contact would fail differently
    for verb in ("approve", "reject"):
        res = subprocess.run([sys.executable, "-m", "compactor", verb, "compact/B/s1"],
                             capture_output=True, text=True, env=env, timeout=120, check=False)
        assert res.returncode == 2 and "'B' is not allowed" in res.stderr, res.stderr


# --- IAM templates ------------------------------------------------------------------------------

IAM = Path(__file__).resolve().parents[2] / "infra" / "iam"


def _render(name: str, **values: str) -> dict:
    from string import Template

    return json.loads(Template((IAM / name).read_text()).substitute(**values))


def _resources(stmt: dict) -> list[str]:
    res = stmt.get("Resource", [])
    return [res] if isinstance(res, str) else res


def test_tenant_policy_confines_objects_and_listing_to_the_tenant_prefix():
    from fnmatch import fnmatchcase

    raw = json.loads((IAM / "tenant-policy.json").read_text())  # parses as a template too
    assert raw["Version"] == "2012-10-17"
    doc = _render("tenant-policy.json", tenant="acme", bucket="bkt", prefix="compactor/")
    objects, patterns = [], []
    for stmt in doc["Statement"]:
        assert stmt["Effect"] == "Allow"
        actions = stmt["Action"] if isinstance(stmt["Action"], list) else [stmt["Action"]]
        assert not any(a.endswith("*") or "Delete" in a for a in actions)
        for r in _resources(stmt):
            if r == "arn:aws:s3:::bkt":  # bucket-level: only ListBucket, only under the prefix
                assert actions == ["s3:ListBucket"]
                patterns += stmt["Condition"]["StringLike"]["s3:prefix"]
            else:
                objects.append(r)
    assert objects == ["arn:aws:s3:::bkt/compactor/t/acme/*"]
    assert patterns == ["compactor/t/acme/*"]
    key = "arn:aws:s3:::bkt/compactor/"
    allowed = [key + "t/acme/s/s1/head.json", key + "t/acme/a/sha256/" + "0" * 64]
    refused = [key + "t/acme2/s/s1/head.json", key + "t/acm/s/x", key + "t/beta/a/sha256/00",
               "arn:aws:s3:::bkt/t/acme/s/s1/head.json"]
    assert all(fnmatchcase(k, objects[0]) for k in allowed)
    assert not any(fnmatchcase(k, objects[0]) for k in refused)


def test_worker_policy_parses_and_stays_inside_tenant_data_and_payloads():
    doc = _render("worker-policy.json", bucket="bkt", prefix="", payload_bucket="pay")
    for stmt in doc["Statement"]:
        for r in _resources(stmt):
            assert r in ("arn:aws:s3:::bkt", "arn:aws:s3:::bkt/t/*", "arn:aws:s3:::pay", "arn:aws:s3:::pay/v0/*")
