"""compactor delete on both backends: nothing of the session / tenant is left, artifacts another
session still references stay, every other tenant's object is byte-identical, and a deletion
record (counts, no content) is left outside what was deleted."""

from __future__ import annotations

import asyncio
import json
from typing import Callable

import pytest

from compactor.bench.lifecycle import busy_session
from compactor.errors import NotFound
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.store import LocalStore, ObjectStore, SessionLog
from compactor.store.erase import delete_session, delete_tenant
from compactor.store.s3 import S3Store
from compactor.store.verify import verify_session
from tests.unit.store_fixtures import make_store, store  # noqa: F401 (pytest fixtures)

SECRET = "zebra-quartz-7731"  # conversation text that must never reach a deletion record




def with_artifact(store: ObjectStore, tenant: str, session: str, data: bytes) -> str:
    """A session whose tool result was spilled to the artifact store (as an import does)."""
    log = SessionLog(store, tenant, session)
    ref = log.put_artifact(data)
    log.append([
        Event(id="u", role="user", blocks=[TextBlock(text=f"please look {SECRET}")]),
        Event(id="a", role="assistant", blocks=[ToolUseBlock(id="toolu_1", name="Bash", input={"command": "cat x"})]),
        Event(id="r", role="user", blocks=[ToolResultBlock(tool_use_id="toolu_1", content=[ref])]),
    ])
    return ref.sha256


def everything(store: ObjectStore, prefix: str = "") -> dict[str, bytes]:
    return {k: store.get(k)[0] for k in store.list(prefix)}


@pytest.fixture
def populated(store):
    asyncio.run(busy_session(store, "acme", "busy", appends=15, compactions=3))
    shared = with_artifact(store, "acme", "one", b"shared output " * 100)
    assert with_artifact(store, "acme", "two", b"shared output " * 100) == shared
    own = with_artifact(store, "acme", "three", b"only three " * 100)
    asyncio.run(busy_session(store, "beta", "b1", appends=10, compactions=2))
    with_artifact(store, "beta", "b2", b"only three " * 100)  # same bytes, other tenant
    return store, shared, own


def test_delete_session_removes_it_and_only_its_artifacts(populated):
    store, shared, own = populated
    before = everything(store)
    delete_session(store, "acme", "one", by="tester")
    rec = delete_session(store, "acme", "three", by="tester")
    after = everything(store)
    assert not [k for k in after if k.startswith(("t/acme/s/one/", "t/acme/s/three/"))]
    assert f"t/acme/a/sha256/{own}" not in after
    assert f"t/acme/a/sha256/{shared}" in after  # session two still references it
    # every other object, other sessions and other tenants alike, byte-identical
    untouched = {k: v for k, v in before.items()
                 if not k.startswith(("t/acme/s/one/", "t/acme/s/three/", f"t/acme/a/sha256/{own}"))}
    assert {k: after[k] for k in untouched} == untouched
    assert set(after) - set(before) == {k for k in after if k.startswith("t/acme/deletions/")}
    assert rec.objects["head"] == 1 and rec.objects["artifact"] == 1 and rec.by == "tester"
    stored = store.get(rec.record_key)[0]
    assert SECRET.encode() not in stored
    assert json.loads(stored)["session"] == "three"
    for s in ("two", "busy"):
        assert verify_session(SessionLog(store, "acme", s)).ok
    if isinstance(store, LocalStore):  # no directory left behind either
        assert not (store.root / "t/acme/s/one").exists() and not (store.root / "t/acme/s/three").exists()


def test_delete_tenant_leaves_nothing_and_other_tenants_byte_identical(populated):
    store, _, _ = populated
    beta = everything(store, "t/beta/")
    n_arts = len(store.list("t/acme/a/"))
    rec = delete_tenant(store, "acme", by="tester")
    assert store.list("t/acme/") == []
    assert everything(store, "t/beta/") == beta
    assert rec.record_key.startswith("deletions/acme/") and store.head(rec.record_key)
    assert rec.objects["artifact"] == n_arts >= 2 and rec.objects["head"] == 4
    assert SECRET.encode() not in store.get(rec.record_key)[0]
    if isinstance(store, LocalStore):
        assert not (store.root / "t" / "acme").exists()
    with pytest.raises(NotFound):
        delete_tenant(store, "acme")


def test_dry_run_and_unknown_targets_change_nothing(populated):
    store, _, _ = populated
    before = everything(store)
    rec = delete_session(store, "acme", "busy", dry_run=True)
    assert rec.total_objects > 0 and rec.record_key is None
    assert delete_tenant(store, "beta", dry_run=True).total_objects == len(everything(store, "t/beta/"))
    with pytest.raises(NotFound):
        delete_session(store, "acme", "nope")
    assert everything(store) == before


@pytest.mark.parametrize("dies_at", [2, 3])
def test_an_interrupted_delete_finishes_when_run_again(store, dies_at):
    with_artifact(store, "acme", "one", b"data " * 50)

    class Dies:
        delete_many = None  # one delete at a time, through the hook below

        def __init__(self, inner):
            self.inner, self.url, self.n = inner, inner.url, 0

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def delete(self, key):
            self.n += 1
            if self.n == dies_at:
                raise OSError("killed")
            self.inner.delete(key)

    with pytest.raises(OSError):
        delete_session(Dies(store), "acme", "one")
    assert store.head("t/acme/s/one/head.json") is None  # the head went first
    delete_session(store, "acme", "one")
    assert store.list("t/acme/") == [k for k in store.list("t/acme/") if k.startswith("t/acme/deletions/")]
