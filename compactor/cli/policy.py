"""``compactor policy``: show the thresholds and budgets a preset gives for a model."""

from __future__ import annotations

import argparse
import json

from compactor.cli.common import table
from compactor.engine.presets import PRESETS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("policy", help="show compaction policies and their numbers")
    psub = p.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")

    show = psub.add_parser("show", help="thresholds, tail budget and tool-output limits of a preset")
    show.add_argument("preset", choices=PRESETS, metavar="PRESET", help=f"one of {', '.join(PRESETS)}")
    show.add_argument("--window", type=int, default=200_000, help="context window W (default %(default)s)")
    show.add_argument("--max-output", type=int, default=32_000, help="max output tokens O (default %(default)s)")
    show.add_argument("--configured", type=int, default=None, help="configured auto-compact limit (codex)")
    show.add_argument("--json", action="store_true", help="print the policy as JSON")
    show.set_defaults(func=_show)

    lst = psub.add_parser("list", help="list the presets")
    lst.add_argument("--json", action="store_true", help="print the presets' numbers as JSON")
    lst.set_defaults(func=_list)

    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _show(args: argparse.Namespace) -> int:
    from compactor.engine.policy import make_policy, policy_rows

    pol = make_policy(args.preset, window=args.window, max_output=args.max_output, configured=args.configured)
    if args.json:
        print(json.dumps(pol.model_dump(mode="json"), indent=2))
        return 0
    print(f"policy {pol.name}  (W={pol.window:,}, O={pol.max_output:,})")
    print(table([list(r) for r in policy_rows(pol)], ["field", "value"]))
    return 0


def _list(args: argparse.Namespace) -> int:
    from compactor.engine.policy import make_policy

    rows = []
    pols = [make_policy(name) for name in PRESETS]
    if args.json:
        print(json.dumps([{"preset": p.name, "window": p.window, "max_output": p.max_output,
                           "trigger_tokens": p.trigger_tokens, "hard_tokens": p.hard_tokens,
                           "tail_budget_tokens": p.tail_budget_tokens} for p in pols], indent=2))
        return 0
    for name, pol in zip(PRESETS, pols):
        rows.append([name, f"{pol.trigger_tokens:,}", f"{pol.hard_tokens:,}", f"{pol.tail_budget_tokens:,}"])
    print("numbers at W=200,000, O=32,000")
    print(table(rows, ["preset", "trigger", "hard", "tail"]))
    return 0
