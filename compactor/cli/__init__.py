"""The ``compactor`` command. Each command group lives in its own module with ``register``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from compactor.cli.common import JSON_OUTPUT, check_tenant_arg, report_error
from compactor.errors import CompactorError

# Modules that add subcommands; each defines register(subparsers). Order = help order.
COMMAND_MODULES = [
    "compactor.cli.demo",
    "compactor.cli.data",
    "compactor.cli.policy",
    "compactor.cli.compact",
    "compactor.cli.ops",
    "compactor.cli.setup",
    "compactor.cli.codec",
    "compactor.cli.hold",
    "compactor.cli.plot",
    "compactor.cli.config",
    "compactor.cli.bench",
]


class _Parser(argparse.ArgumentParser):
    """argparse's usage errors, plus the JSON error document when ``--json`` was given."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if JSON_OUTPUT["on"]:
            from compactor.cli.common import print_json

            print_json({"error": {"code": "usage", "message": f"{self.prog}: {message}", "exit_code": 2}})
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
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
    JSON_OUTPUT["on"] = "--json" in (sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    JSON_OUTPUT["on"] = bool(getattr(args, "json", False))
    try:
        check_tenant_arg(args)  # COMPACTOR_TENANTS binds the CLI: refuse before any I/O
        rc = args.func(args)
    except CompactorError as exc:
        report_error(str(exc), code=exc.code, exit_code=exc.exit_code)
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
