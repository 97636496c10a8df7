"""A worker process for ``compactor bench chaos``, meant to be SIGKILLed.

It serves the compaction workflow and the store activities on one task queue. MODE:

- ``plain``: a normal worker (killed at a random moment, or left to finish).
- ``in``: inside commit_swap it writes the checkpoint, prints ``in-commit-swap`` and hangs:
  the worker dies after the checkpoint is stored and before the head is swapped.
- ``after``: commit_swap swaps the head, prints ``after-commit-swap`` and hangs: the worker
  dies after the commit, before its workflow task is recorded (the run is executed again).

    python -m compactor.testing.chaos_worker ADDRESS STORE_URL TASK_QUEUE [MODE]

Prints ``ready`` once it polls. ``tests/integration/test_crash.py`` uses it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

from temporalio import activity

from activities.contracts import CommitInput, CommitOutput
from activities.store_activities import StoreActivities
from compactor.records import Checkpoint

MODES = ("plain", "in", "after")


class HangInCommit(StoreActivities):
    @activity.defn(name="commit_swap")
    async def commit_swap(self, inp: CommitInput) -> CommitOutput:
        ckpt = Checkpoint.model_validate(self._get_json(inp.candidate_key))
        log = self.log(inp.snapshot.tenant, inp.snapshot.session)
        await asyncio.to_thread(log.write_checkpoint, ckpt)
        print("in-commit-swap", flush=True)
        await asyncio.sleep(3600)
        raise AssertionError("not killed")


class HangAfterCommit(StoreActivities):
    @activity.defn(name="commit_swap")
    async def commit_swap(self, inp: CommitInput) -> CommitOutput:
        await StoreActivities.commit_swap(self, inp)
        print("after-commit-swap", flush=True)
        await asyncio.sleep(3600)
        raise AssertionError("not killed")


async def main(address: str, store_url: str, task_queue: str, mode: str = "plain") -> None:
    from compactor.store import open_store
    from workers.settings import Settings
    from workers.worker import _store_s3_client, build_workers, connect

    if mode not in MODES:
        raise SystemExit(f"mode must be one of {', '.join(MODES)}")
    store = open_store(store_url)
    extra = []
    if mode == "in":
        extra = [HangInCommit(store).commit_swap]
    elif mode == "after":
        extra = [HangAfterCommit(store).commit_swap]
    settings = Settings(store=store_url, task_queue=task_queue, llm_task_queue=task_queue + "-llm")
    client = await connect(settings, address, s3_client=_store_s3_client(store))
    workers = build_workers(client, settings, store, extra_activities=extra, with_llm=False)
    async with contextlib.AsyncExitStack() as stack:
        for w in workers:
            await stack.enter_async_context(w)
        print("ready", flush=True)
        await asyncio.sleep(24 * 3600)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
