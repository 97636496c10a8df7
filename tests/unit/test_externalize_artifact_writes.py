"""externalize writes the artifacts the layers made while it makes and writes the layers document
(their fsyncs off the step's critical path), and returns - or fails - only once every one is
stored: what a committed checkpoint references is stored before any later step runs."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from activities.contracts import ExternalizeInput, FreezeInput, PolicyRef
from activities.store_activities import StoreActivities
from compactor import errors
from compactor.bench.perf import turns
from compactor.store import SessionLog, open_store
from compactor.store.documents import SessionDocuments
from compactor.tokens import with_tokens


async def _ready(tmp_path: Any) -> tuple[Any, StoreActivities, ExternalizeInput]:
    store = open_store(f"file://{tmp_path}")
    SessionLog(store, "t1", "s1").append(with_tokens(turns(30_000 // 440, prefix="g")))
    acts = StoreActivities(store)
    pol = PolicyRef(target_tokens=8_000)  # (a cut that leaves 4 big tool results in the view)
    snap = await acts.freeze_snapshot(FreezeInput(tenant="t1", session="s1", plan_policy=pol, plan_model="m"))
    assert snap.plan is not None and snap.plan.needed
    pre = snap.plan.plan_key[: -len("plan.json")]
    return store, acts, ExternalizeInput(snapshot=snap.model_copy(update={"plan": None}), policy=pol,
                                         plan_key=snap.plan.plan_key, layers_key=pre + "layers.json")


async def test_artifacts_are_written_beside_the_layers_document_and_stored_on_return(tmp_path, monkeypatch):
    store, acts, ext_in = await _ready(tmp_path)
    seen: list[tuple[str, float]] = []
    lock = threading.Lock()
    real_put = SessionDocuments.put_artifact
    real_parsed = StoreActivities._put_parsed

    def slow_put(self, data, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        time.sleep(0.2)  # a slow fsync
        ref = real_put(self, data, *a, **k)
        with lock:
            seen.append(("artifact", time.monotonic()))
        return ref

    def parsed(self, key, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        out = real_parsed(self, key, *a, **k)
        with lock:
            seen.append(("layers", time.monotonic()))
        return out

    monkeypatch.setattr(SessionDocuments, "put_artifact", slow_put)
    monkeypatch.setattr(StoreActivities, "_put_parsed", parsed)
    out = await acts.externalize(ext_in)
    assert out.artifacts_written > 0
    kinds = [k for k, _ in seen]
    assert kinds.count("artifact") == out.artifacts_written  # every one stored when the step returns
    assert kinds[0] == "layers"  # the layers document did not wait for the artifacts' writes
    for sha in json.loads(store.get(ext_in.layers_key)[0])["artifacts"]:
        assert store.get(f"t/t1/a/sha256/{sha}")[0]


async def test_a_failed_artifact_write_fails_the_step(tmp_path, monkeypatch):
    _, acts, ext_in = await _ready(tmp_path)
    calls: list[int] = []

    def broken(self, data, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append(1)
        raise errors.IntegrityError("artifact exists but its bytes do not match", key="k")

    monkeypatch.setattr(SessionDocuments, "put_artifact", broken)
    with pytest.raises(Exception) as err:
        await acts.externalize(ext_in)
    assert calls
    assert "do not match" in str(err.value)
