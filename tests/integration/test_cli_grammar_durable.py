"""The CLI's Temporal commands on a real dev server: `compact SESSION` on a stored session,
--json on compact/history/replay/sweep/approve/reject, a held compaction approved and another
rejected, not-found exits 2, inspect --diff after a real compaction, and the Python client's
typed reads (async with, the sync facade, view as a Messages API request)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from compactor.cli import main
from compactor.store import SessionLog, open_store
from tests.integration.durable_support import new_ids, running_worker

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "compactor" / "samples" / "demo-session.claude.jsonl"


async def cli(env: dict[str, str], *argv: str) -> tuple[int, str, str]:
    """The CLI in its own process (Temporal commands leave through os._exit), without blocking
    the loop the in-process worker runs on."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "compactor", *argv, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    return proc.returncode, out.decode(), err.decode()


async def held(env: dict[str, str], base: list[str], session: str) -> None:
    rc, out, err = await cli(env, "compact", session, "--hold", "--json", "--target-tokens", "3000", *base)
    assert rc == 0 and json.loads(out)["status"] == "held", err
    for _ in range(100):  # until the run reaches its hold
        rc, out, _ = await cli(env, "history", session, "--json", *base)
        if rc == 0 and any(s["step"] == "validate_candidate" and s["outcome"] == "completed"
                           for s in json.loads(out)["steps"]):
            return
        await asyncio.sleep(0.3)
    raise AssertionError("the held compaction never reached its hold")


async def test_durable_commands_share_one_grammar(temporal_address, tmp_path, task_queue, capsys, monkeypatch):
    url = f"file://{tmp_path}/store"
    store = open_store(url)
    tenant, session = new_ids()
    base = ["--store", url, "--tenant", tenant]
    # Tool outputs over 4,000 bytes go to the artifact store at import, so the diff has refs.
    monkeypatch.setenv("COMPACTOR_MAX_INLINE_TOOL_OUTPUT", "4000")
    for s in (session, session + "-held", session + "-rej"):
        assert main(["import", str(SAMPLE), "--session", s, *base]) == 0
    capsys.readouterr()
    env = {k: v for k, v in os.environ.items() if k not in ("COMPACTOR_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")}
    env.update(TEMPORAL_ADDRESS=temporal_address, COMPACTOR_TASK_QUEUE=task_queue,
               COMPACTOR_LLM_TASK_QUEUE=task_queue + "-llm", PYTHONPATH=str(ROOT))

    async with running_worker(temporal_address, store, task_queue):
        # compact SESSION: a session already in the store, by id
        rc, out, err = await cli(env, "compact", session, "--target-tokens", "1500", "--json", *base)
        assert rc == 0, err
        doc = json.loads(out)
        assert doc["status"] == "committed" and doc["workflow_id"] == f"compact/{tenant}/{session}"
        assert doc["tokens_after"] < doc["tokens_before"] and doc["checkpoint"]
        assert SessionLog(store, tenant, session).head().checkpoint == doc["checkpoint"]

        rc, out, err = await cli(env, "history", session, "--json", *base)
        assert rc == 0, err
        assert "freeze_snapshot" in [s["step"] for s in json.loads(out)["steps"]]
        rc, out, err = await cli(env, "replay", session, "--json", *base)
        assert rc == 0 and json.loads(out)["ok"] is True, err
        rc, out, err = await cli(env, "sweep", "--once", "--json", *base)
        assert rc == 0, err
        assert "workflow_id" in json.loads(out)

        # the same not-found, the same exit code, in every Temporal command
        for argv in (["history", "nosuch"], ["replay", "nosuch"], ["approve", "nosuch"], ["reject", "nosuch"],
                     ["approve", session], ["compact", "nosuch"]):
            rc, out, err = await cli(env, *argv, *base)
            assert rc == 2, (argv, out, err)

        # a held compaction: reject leaves the session as it was, approve swaps
        await held(env, base, session + "-rej")
        rc, out, err = await cli(env, "reject", session + "-rej", "--reason", "summary too thin", "--json", *base)
        assert rc == 0, err
        doc = json.loads(out)
        assert doc["decision"] == "reject" and doc["status"] == "failed" and "summary too thin" in doc["error"]
        assert SessionLog(store, tenant, session + "-rej").head().checkpoint is None

        await held(env, base, session + "-held")
        rc, out, err = await cli(env, "approve", session + "-held", "--json", *base)
        assert rc == 0, err
        doc = json.loads(out)
        assert doc["status"] == "committed"
        assert SessionLog(store, tenant, session + "-held").head().checkpoint == doc["checkpoint"]

    # inspect --diff after a real compaction: a covered request, a tool result's artifact ref
    assert main(["inspect", session, "--diff", "--json", *base]) == 0
    diff = json.loads(capsys.readouterr().out)
    requests = [i for i in diff["items"] if i["kind"] == "request"]
    assert requests and requests[0]["seq"] == 1 and requests[0]["kept"]
    refs = [i for i in diff["items"] if i["kind"] == "tool_result" and i["artifact"]]
    assert refs and all(i["artifact"].startswith("artifact://sha256/") for i in refs)
    assert main(["inspect", session, "--diff", *base]) == 0
    text = capsys.readouterr().out
    assert "requests" in text and refs[0]["artifact"] in text


async def test_client_typed_reads_async_with_and_sync(temporal_address, tmp_path):
    from compactor.client import CompactorClient, MessagesRequest
    from compactor.errors import NotFound
    from workers.settings import Settings

    url = f"file://{tmp_path}/store"
    tenant, session = new_ids()
    assert main(["import", str(SAMPLE), "--session", session, "--store", url, "--tenant", tenant]) == 0
    settings = Settings(store=url, tenant=tenant, temporal_address=temporal_address)

    async with CompactorClient.connect(settings) as cc:
        req = await cc.view(session, as_request=True)
        assert isinstance(req, MessagesRequest) and req.messages[0]["role"] == "user"
        rep = await cc.inspect(session)
        assert rep.version == 33 and rep.checkpoint is None and rep.records == []
        assert (await cc.breaker(session)).open is False
        with pytest.raises(NotFound):
            await cc.records("nosuch")

    def blocking() -> tuple[int, bool]:
        with CompactorClient.sync(settings) as sc:
            events = sc.view(session)
            rolled = sc.rollback(session, None)
            return len(events), rolled.changed

    n, changed = await asyncio.to_thread(blocking)
    assert n == 33 and changed is False  # already at no checkpoint: nothing written
