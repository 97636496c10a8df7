"""Helpers for the durable-path integration tests: sessions, in-process workers, history capture."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Sequence

from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock

HISTORIES = Path(__file__).resolve().parents[1] / "histories"
RECORD_ENV = "COMPACTOR_RECORD_HISTORIES"


def _text(role: str, text: str, eid: str, **kw: Any) -> Event:
    return Event(id=eid, role=role, blocks=[TextBlock(text=text)], **kw)  # type: ignore[arg-type]


def coding_session(
    rounds: int = 24,
    result_chars: int = 1_200,
    *,
    abandoned: bool = True,
    pending_last: bool = True,
    prefix: str = "e",
) -> list[Event]:
    """A coding-agent session: pinned system prompt, a request with a constraint, tool rounds,
    an abandoned deploy call (outcome unknown), a latest request and, optionally, a last call
    still awaiting its result."""
    n = 0

    def nid() -> str:
        nonlocal n
        n += 1
        return f"{prefix}{n:05d}"

    evs: list[Event] = [
        Event(id=nid(), kind="pinned", role="system",
              blocks=[TextBlock(text="You are a careful coding agent working in /repo.")]),
        _text("user", "Fix the failing tests in src/app/core.py. Do not modify tests/test_core.py "
              "and never push to main.", nid()),
    ]
    for i in range(rounds):
        uid = f"toolu_{prefix}{i:04d}abcdef"
        cmd = f"cat src/app/mod_{i}.py" if i % 3 else "pytest -q tests/test_core.py"
        evs.append(Event(id=nid(), role="assistant", blocks=[
            TextBlock(text=f"Step {i}: inspecting module {i} to find the cause."),
            ToolUseBlock(id=uid, name="Bash", input={"command": cmd}),
        ]))
        body = (f"# module {i}\n" + "\n".join(
            f"def fn_{i}_{j}(x):\n    return x * {j} + {i}  # line {j}" for j in range(result_chars // 48)
        ))
        if i % 3 == 0:
            body = f"F.. [{i}]\nFAILED tests/test_core.py::test_{i} - AssertionError\n1 failed, 2 passed"
        evs.append(Event(id=nid(), role="user", blocks=[
            ToolResultBlock(tool_use_id=uid, content=[TextBlock(text=body)], is_error=(i % 3 == 0)),
        ]))
        if abandoned and i == 2:
            evs.append(Event(id=nid(), role="assistant", blocks=[
                TextBlock(text="Deploying to staging in the background."),
                ToolUseBlock(id=f"toolu_{prefix}deploy01", name="Bash",
                             input={"command": "./scripts/deploy.sh staging"}),
            ]))
            evs.append(_text("assistant", "While that runs, I will keep reading the code.", nid()))
        if i == rounds // 2:
            evs.append(_text("user", "Also keep the public API of src/app/core.py stable.", nid()))
    evs.append(_text("user", "Now run the full test suite and report the result.", nid()))
    if pending_last:
        evs.append(Event(id=nid(), role="assistant", blocks=[
            ToolUseBlock(id=f"toolu_{prefix}final01", name="Bash", input={"command": "pytest -q"}),
        ]))
    return evs


def new_ids() -> tuple[str, str]:
    """(tenant, session) unique to one test."""
    return "t" + uuid.uuid4().hex[:6], "s" + uuid.uuid4().hex[:8]


@contextlib.asynccontextmanager
async def running_worker(
    address: str,
    store: Any,
    task_queue: str,
    *,
    extra_activities: Sequence[Any] = (),
    with_llm: bool = True,
    **settings_kw: Any,
) -> AsyncIterator[Any]:
    """An in-process worker (workflow + store activities [+ LLM queue]) and its client."""
    from workers.settings import Settings
    from workers.worker import _store_s3_client, build_workers, connect

    settings = Settings(store=store.url, task_queue=task_queue, llm_task_queue=task_queue + "-llm",
                        **settings_kw)
    client = await connect(settings, address, s3_client=_store_s3_client(store))
    workers = build_workers(client, settings, store, extra_activities=extra_activities, with_llm=with_llm)
    async with contextlib.AsyncExitStack() as stack:
        for w in workers:
            await stack.enter_async_context(w)
        yield client


async def save_history(client: Any, workflow_id: str, name: str) -> None:
    """With COMPACTOR_RECORD_HISTORIES=1, write the workflow's history to tests/histories/."""
    if not os.environ.get(RECORD_ENV):
        return
    handle = client.get_workflow_handle(workflow_id)
    history = await handle.fetch_history()
    HISTORIES.mkdir(parents=True, exist_ok=True)
    (HISTORIES / f"{name}.json").write_text(json.dumps(json.loads(history.to_json()), indent=1))


# --- `compactor` subprocesses (worker, setup, compact) --------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def process_env(**kw: str) -> dict[str, str]:
    """This environment without any compactor, Temporal, model or OTel setting, plus ``kw``: a
    subprocess sees exactly the configuration its test gives it."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("COMPACTOR_", "OTEL_", "TEMPORAL_", "ANTHROPIC_"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(kw)
    return env


def wait_for(pred: Any, timeout: float, what: str) -> Any:
    """Poll ``pred`` every 0.1 s until it returns something truthy (returned), else fail."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
