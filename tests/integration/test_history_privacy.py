"""No conversation text in Temporal history, with and without the payload codec (issue 9).

A distinctive string sits in a user message, a constraint, a tool output and an error line;
compactions run through every path (structured, model summary accepted, model summary
rejected by the validator, model failing with 500s that echo the prompt, a merge with events
appended mid-run, a compaction after a rollback). Each workflow's whole history, as JSON, must
not contain the string in any encoding (plain, or inside any base64 field). With the codec on,
every payload is ciphertext, and the codec server decodes it only for a bearer-token holder.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import time
import uuid
from typing import Any

import pytest

from activities.contracts import WORKFLOW_NAME, CompactSessionInput, CompactSessionOutput, CompactStatus
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.store import SessionLog, open_store
from compactor.testing import FakeAnthropic, Fault
from workers.codec import new_key

pytestmark = pytest.mark.integration

TENANT = "acme"
SECRET = "ZQX-SECRET-7731"


def secret_session(rounds: int = 10) -> list[Event]:
    ev: list[Event] = []

    def add(role: str, blocks: list[Any]) -> None:
        ev.append(Event(id=f"e{len(ev) + 1}", role=role, blocks=blocks))

    add("user", [TextBlock(text=f"Fix the parser for the {SECRET} account. Never print {SECRET} in logs.")])
    for r in range(rounds):
        add("assistant", [ToolUseBlock(id=f"t{r}", name="bash", input={"command": f"pytest -q tests/test_p{r}.py"})])
        out = "\n".join(f"tests/test_p{r}.py::test_{i} PASSED ({SECRET} fixture)" for i in range(30))
        err = r % 3 == 1
        if err:
            out += f"\nError: connection to {SECRET} refused (exit 1)"
        add("user", [ToolResultBlock(tool_use_id=f"t{r}", content=[TextBlock(text=out)], is_error=err)])
        add("assistant", [TextBlock(text=f"Round {r}: handled {SECRET} case {r}.")])
        add("user", [TextBlock(text=f"Next, case {r + 1} of {SECRET}.")])
    add("assistant", [TextBlock(text="Working on it.")])
    return ev


def _strings(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)] + [k for k in node if isinstance(k, str)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


def leaks(history_json: str) -> list[str]:
    """Every place the secret shows in the history: plain, or inside a base64 value."""
    found = []
    for s in _strings(json.loads(history_json)):
        if SECRET in s:
            found.append(s[:120])
            continue
        with contextlib.suppress(binascii.Error, ValueError):
            raw = base64.b64decode(s, validate=True)
            if SECRET.encode() in raw or SECRET.encode("utf-16-le") in raw:
                found.append(f"base64:{s[:60]}")
    return found


def payloads(node: Any, path: str = "") -> list[tuple[str, dict]]:
    """Every Payload in the history JSON, except search attributes (indexed, never encoded) and
    the SDK's own marker bookkeeping, written without the codec: patch ids ("circuit-breaker")
    and local-activity marker data (seq, attempt, activity id and type, times). The local
    activity's input and result are payloads of their own and are checked."""
    out = []
    if isinstance(node, dict):
        if "metadata" in node and "encoding" in node.get("metadata", {}):
            return [(path, node)]
        for k, v in node.items():
            if k in ("searchAttributes", "indexedFields", "patch-data"):
                continue
            if k == "data" and path.endswith("markerRecordedEventAttributes.details"):
                sdk = json.loads(base64.b64decode(v["payloads"][0]["data"]))
                assert set(sdk) <= {"seq", "attempt", "activity_id", "activity_type", "complete_time",
                                    "backoff", "original_schedule_time", "activation_index"}, sdk
                continue
            out += payloads(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += payloads(v, f"{path}[{i}]")
    return out


def failures(node: Any) -> list[dict]:
    """Every Failure in the history JSON (activity failures, their causes)."""
    out = []
    if isinstance(node, dict):
        if "encodedAttributes" in node or "applicationFailureInfo" in node or "stackTrace" in node:
            out.append(node)
        for v in node.values():
            out += failures(v)
    elif isinstance(node, list):
        for v in node:
            out += failures(v)
    return out


@pytest.fixture
def fake():
    with FakeAnthropic() as f:
        yield f


@contextlib.asynccontextmanager
async def stack(temporal_address: str, store_dir: str, task_queue: str, codec_keys: str | None):
    from workers.settings import Settings
    from workers.worker import build_workers, connect

    settings = Settings(store=f"file://{store_dir}", task_queue=task_queue,
                        llm_task_queue=f"{task_queue}-llm", llm_rate_limit=100.0,
                        codec_keys=codec_keys)
    store = open_store(settings.store)
    client = await connect(settings, temporal_address)
    async with contextlib.AsyncExitStack() as st:
        for w in build_workers(client, settings, store):
            await st.enter_async_context(w)
        yield client, store


async def run(client: Any, store: Any, task_queue: str, session: str, *, new: bool = True,
              during: Any = None, **kw: Any) -> tuple[CompactSessionOutput | Exception, str]:
    if new:
        SessionLog(store, TENANT, session).append(secret_session())
    handle = await client.start_workflow(
        WORKFLOW_NAME,
        CompactSessionInput(tenant=TENANT, session=session, model="claude-test", target_tokens=3000,
                            llm_task_queue=f"{task_queue}-llm", **kw),
        id=f"compact/{TENANT}/{session}", task_queue=task_queue, result_type=CompactSessionOutput,
    )
    if during is not None:
        await during(handle)
    try:
        out: CompactSessionOutput | Exception = await handle.result()
    except Exception as exc:  # noqa: BLE001 - a failed path is still checked for leaks
        out = exc
    return out, (await handle.fetch_history()).to_json()


async def _append_while_held(store: Any, session: str):
    async def during(handle: Any) -> None:
        deadline = time.monotonic() + 30
        while not (await handle.query("status", result_type=CompactStatus)).waiting_for_resume:
            assert time.monotonic() < deadline, "never paused before commit"
            await asyncio.sleep(0.1)
        SessionLog(store, TENANT, session).append([
            Event(id="late-1", role="user", blocks=[TextBlock(text=f"Also keep {SECRET} out of the report.")]),
            Event(id="late-2", role="assistant", blocks=[TextBlock(text=f"Noted about {SECRET}.")]),
        ])
        await handle.signal("resume")
    return during


async def every_path(client: Any, store: Any, task_queue: str, fake: FakeAnthropic) -> dict[str, tuple[Any, str]]:
    out: dict[str, tuple[Any, str]] = {}
    sid = lambda: "s-" + uuid.uuid4().hex[:10]  # noqa: E731
    out["structured"] = await run(client, store, task_queue, sid())
    out["model accepted"] = await run(client, store, task_queue, sid(), summarizer="anthropic")
    # A well-formed summary far larger than the range it replaces: the validator rejects it.
    bloated = "## Goal\n" + "".join(f"- Fix the parser for the {SECRET} account, step {i}.\n" for i in range(4000))
    fake.push(Fault("reply", message=bloated))
    out["model rejected"] = await run(client, store, task_queue, sid(), summarizer="anthropic")
    echo = f"messages.0.content: unexpected text '{SECRET}'"
    fake.push(*[Fault("status", status=500, message=echo) for _ in range(2)])
    out["model failing"] = await run(client, store, task_queue, sid(), summarizer="anthropic", llm_attempts=2)
    merge = sid()
    SessionLog(store, TENANT, merge).append(secret_session())
    out["merge"] = await run(client, store, task_queue, merge, new=False, pause_before_commit=True,
                             during=await _append_while_held(store, merge))
    rolled = sid()
    first, _ = await run(client, store, task_queue, rolled)
    assert isinstance(first, CompactSessionOutput) and first.status == "committed"
    SessionLog(store, TENANT, rolled).set_checkpoint(None, expected_etag=None)  # rollback to none
    out["after rollback"] = await run(client, store, task_queue, rolled, new=False)
    return out


def _check_outcomes(results: dict[str, tuple[Any, str]]) -> None:
    for name, (out, _) in results.items():
        assert isinstance(out, CompactSessionOutput), f"{name}: {out!r}"
        assert out.status == "committed", name
    assert results["model accepted"][0].record.summarizer == "anthropic"
    assert results["model rejected"][0].record.fallback_reason.startswith("validation:")
    assert results["model failing"][0].record.fallback_reason.startswith("anthropic failed")
    assert results["merge"][0].record.conflicts_merged == 1


async def test_no_conversation_text_in_history_without_codec(temporal_address, tmp_path, task_queue, fake,
                                                             monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    async with stack(temporal_address, str(tmp_path / "store"), task_queue, None) as (client, store):
        results = await every_path(client, store, task_queue, fake)
    _check_outcomes(results)
    for name, (_, history) in results.items():
        assert SECRET not in json.dumps(results[name][0].model_dump(mode="json")), name
        assert leaks(history) == [], name
    # The secret really was in what the compactions worked on (so the check above can fail).
    ckpt = SessionLog(open_store(f"file://{tmp_path / 'store'}"), TENANT,
                      results["structured"][0].record.session).current_checkpoint()
    assert SECRET in ckpt.summary


async def test_with_codec_every_payload_is_ciphertext_and_the_codec_server_decodes(
    temporal_address, tmp_path, task_queue, fake, monkeypatch
):
    from google.protobuf import json_format
    from temporalio.api.common.v1 import Payloads

    from workers.codec import EncryptionCodec, parse_keys
    from workers.codec_server import CodecServer

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    keys = f"{new_key('k2')},{new_key('k1')}"
    async with stack(temporal_address, str(tmp_path / "store"), task_queue, keys) as (client, store):
        results = await every_path(client, store, task_queue, fake)
    _check_outcomes(results)
    for name, (_, history) in results.items():
        assert leaks(history) == [], name
        found = payloads(json.loads(history))
        assert found, name
        for where, p in found:
            meta = {k: base64.b64decode(v) for k, v in p["metadata"].items()}
            assert meta["encoding"] == b"binary/encrypted", (name, where)
            assert meta["encryption-key-id"] == b"k2", (name, where)
            with pytest.raises(ValueError):
                json.loads(base64.b64decode(p.get("data", "")))
        # failure messages and stack traces go through the codec too (encoded attributes)
        for f in failures(json.loads(history)):
            assert f.get("message") == "Encoded failure" and not f.get("stackTrace"), (name, f)
    assert failures(json.loads(results["model failing"][1]))

    # The codec server decodes the workflow input for a token holder, and refuses others.
    _, history = results["merge"]
    [(_, first)] = payloads(json.loads(history)["events"][0])[:1]
    body = json.dumps({"payloads": [first]}).encode()
    server = CodecServer(EncryptionCodec(parse_keys(keys)), port=0, token="op-token")
    server.start()
    try:
        import urllib.error
        import urllib.request

        def post(headers: dict[str, str]) -> tuple[int, bytes]:
            req = urllib.request.Request(server.url + "/decode", data=body, method="POST",
                                         headers={"Content-Type": "application/json", **headers})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as e:
                return e.code, e.read()

        assert post({})[0] == 401
        status, raw = post({"Authorization": "Bearer op-token"})
        assert status == 200
        [p] = json_format.Parse(raw, Payloads()).payloads
        inp = json.loads(p.data)
        assert inp["tenant"] == TENANT and inp["pause_before_commit"] is True
    finally:
        server.shutdown()
        server.server_close()
