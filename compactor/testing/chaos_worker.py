"""A worker process for ``compactor bench chaos``, meant to be SIGKILLed.

It serves the compaction workflow and the store activities on one task queue. MODE:

- ``plain``: a normal worker (killed at a random moment, or left to finish).
- ``in``: at the commit point it writes the checkpoint, prints ``in-commit-swap`` and hangs:
  the worker dies after the checkpoint is stored and before the head is swapped.
- ``after``: it swaps the head, prints ``after-commit-swap`` and hangs: the worker dies after
  the commit, before its record is written and before its workflow task is recorded (the run
  is executed again).

The hooks are in the commit's own work (``StoreActivities._write_or_adopt`` and ``_commit``), so
they hold in every step that commits: ``commit_swap``, ``commit_record`` (commit_swap +
write_record in one step, runs since the ``commit-records`` patch) and ``freeze_snapshot`` (which
runs commit_record's work too, runs since the ``freeze-commits`` patch), where ``after`` dies
between the commit and the record.

    python -m compactor.testing.chaos_worker ADDRESS STORE_URL TASK_QUEUE [MODE]

Prints ``ready`` once it polls. ``tests/integration/test_crash.py`` uses it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Any, NoReturn

from activities.contracts import CommitInput, CommitOutput
from activities.store_activities import StoreActivities
from compactor.records import Checkpoint
from compactor.store import SessionLog

MODES = ("plain", "in", "after")


def _hang(line: str) -> NoReturn:
    """Print ``line`` and block the executor thread until the process is killed."""
    print(line, flush=True)
    time.sleep(3600)
    raise AssertionError("not killed")


class HangInCommit(StoreActivities):
    def _write_or_adopt(self, log: SessionLog, ckpt: Checkpoint) -> Checkpoint:  # type: ignore[override]
        StoreActivities._write_or_adopt(log, ckpt)
        _hang("in-commit-swap")


class HangAfterCommit(StoreActivities):
    def _commit(self, inp: CommitInput, meta: dict[str, Any]) -> CommitOutput:
        StoreActivities._commit(self, inp, meta)
        _hang("after-commit-swap")


def _committing_steps(acts: StoreActivities) -> list[Any]:
    return [acts.freeze_snapshot, acts.commit_swap, acts.commit_record]


async def main(address: str, store_url: str, task_queue: str, mode: str = "plain") -> None:
    from compactor.store import open_store
    from workers.settings import Settings
    from workers.worker import _store_s3_client, build_workers, connect

    if mode not in MODES:
        raise SystemExit(f"mode must be one of {', '.join(MODES)}")
    store = open_store(store_url)
    extra = []
    if mode == "in":
        extra = _committing_steps(HangInCommit(store))
    elif mode == "after":
        extra = _committing_steps(HangAfterCommit(store))
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
