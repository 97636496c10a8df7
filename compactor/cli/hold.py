"""``compactor approve|reject SESSION``: decide a compaction held before its swap.

A compaction started with ``pause_before_commit`` (``compactor compact SESSION --hold``, or the
client's ``start_compaction(..., pause_before_commit=True)``) validates its candidate and waits
at ``waiting_for_resume``. ``approve`` sends the workflow's ``resume`` signal and waits for the
swap; ``reject`` sends ``reject`` with a reason: the run ends failed, the session untouched.
No held run for the session is a not-found (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from compactor.cli.common import add_json_arg, add_store_args, add_temporal_args, print_json


def register(sub: argparse._SubParsersAction) -> None:
    for name, help_ in (("approve", "approve a held compaction: it swaps the session's head"),
                        ("reject", "reject a held compaction: it ends failed, the session unchanged")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("session", metavar="SESSION", help="session id")
        if name == "reject":
            p.add_argument("--reason", default="rejected by an operator", help="recorded in the run's failure")
        p.add_argument("--no-wait", action="store_true", help="send the decision and return at once")
        add_json_arg(p)
        add_temporal_args(p)
        add_store_args(p)
        p.set_defaults(func=run, decision=name)


def run(args: argparse.Namespace) -> int:
    from compactor.cli.ops import run_and_exit

    return run_and_exit(_run(args))


async def _run(args: argparse.Namespace) -> int:
    from compactor import client as cc
    from compactor.cli.history import workflow_id_of
    from compactor.cli.ops import _client, _settings

    settings = _settings(args)
    wf_id = workflow_id_of(args.session, settings.tenant)  # checked before anything is contacted
    temporal = await _client(settings)
    outcome = await cc.decide_held(temporal, wf_id, approve=args.decision == "approve",
                                   reason=getattr(args, "reason", None), wait=not args.no_wait)
    doc: dict[str, Any] = {"tenant": settings.tenant, "session": args.session, **outcome.model_dump(mode="json")}
    if args.json:
        print_json(doc)
    else:
        verb = "approved" if args.decision == "approve" else "rejected"
        line = f"{settings.tenant}/{args.session}: {verb} {wf_id}"
        if outcome.status:
            line += f"; run ended {outcome.status}"
            if outcome.checkpoint:
                line += f", checkpoint {outcome.checkpoint}"
        print(line)
        if outcome.error and args.decision == "approve":
            print(f"  {outcome.error}", file=sys.stderr)
    ok = outcome.status in (None, "committed", "noop") if args.decision == "approve" else True
    return 0 if ok else 1
