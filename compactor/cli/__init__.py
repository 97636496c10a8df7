"""The ``compactor`` command. Each command group lives in its own module with ``register``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from compactor.cli.common import check_tenant_arg
from compactor.errors import CompactorError

# Modules that add subcommands; each defines register(subparsers). Order = help order.
COMMAND_MODULES = [
    "compactor.cli.demo",
    "compactor.cli.data",
    "compactor.cli.policy",
    "compactor.cli.compact",
    "compactor.cli.ops",
    "compactor.cli.lifecycle",
    "compactor.cli.codec",
    "compactor.cli.hold",
    "compactor.cli.plot",
    "compactor.cli.config",
    "compactor.cli.bench",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="compactor",
        description="Durable, distributed context compaction for LLM-agent sessions. "
        "Session commands take SESSION [--tenant T]; every command takes --json; exit 0 ok, "
        "1 failed, 2 usage error or not found (docs/cli.md).",
    )
    parser.add_argument("--version", action="version", version=f"compactor {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue  # command group not built yet
            raise
        mod.register(sub)
    return parser


def version() -> str:
    """The installed distribution's version (the source tree's when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    from compactor import __version__

    try:
        return dist_version("compactor")
    except PackageNotFoundError:
        return __version__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        check_tenant_arg(args)  # COMPACTOR_TENANTS binds the CLI: refuse before any I/O
        rc = args.func(args)
    except CompactorError as exc:
        print(f"compactor: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # output piped into `head` and the like: not an error
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
