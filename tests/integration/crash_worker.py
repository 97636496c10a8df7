"""A worker process for the crash test: it runs the workflow normally but, inside commit_swap,
writes the checkpoint, says so on stdout and then hangs until it is killed (SIGKILL). With
MODE ``after``, commit_swap swaps the head first (the commit lands) and hangs before it can
report: the worker dies after the commit, before its workflow task is recorded.

    python -m tests.integration.crash_worker ADDRESS STORE_URL TASK_QUEUE [MODE]
"""

from __future__ import annotations

import asyncio
import sys

from temporalio import activity

from activities.contracts import CommitInput, CommitOutput
from activities.store_activities import StoreActivities
from compactor.records import Checkpoint
from compactor.store import open_store


class HangingCommit(StoreActivities):
    @activity.defn(name="commit_swap")
    async def commit_swap(self, inp: CommitInput) -> CommitOutput:
        ckpt = Checkpoint.model_validate(self._get_json(inp.candidate_key))
        await asyncio.to_thread(self.log(inp.snapshot.tenant, inp.snapshot.session).write_checkpoint, ckpt)
        print("in-commit-swap", flush=True)
        await asyncio.sleep(3600)
        raise AssertionError("not killed")


class HangingAfterCommit(StoreActivities):
    @activity.defn(name="commit_swap")
    async def commit_swap(self, inp: CommitInput) -> CommitOutput:
        await StoreActivities.commit_swap(self, inp)
        print("after-commit-swap", flush=True)
        await asyncio.sleep(3600)
        raise AssertionError("not killed")


async def main(address: str, store_url: str, task_queue: str, mode: str = "in") -> None:
    from tests.integration.durable_support import running_worker

    store = open_store(store_url)
    hanging = (HangingAfterCommit if mode == "after" else HangingCommit)(store)
    async with running_worker(address, store, task_queue, extra_activities=[hanging.commit_swap],
                              with_llm=False):
        print("ready", flush=True)
        await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
