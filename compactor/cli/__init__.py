"""The ``compactor`` command. Each command group lives in its own module with ``register``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from compactor.cli.common import JSON_OUTPUT, check_tenant_arg, cli_scope, report_error
from compactor.errors import CompactorError

# Modules that add subcommands; each defines register(subparsers). Order = help order.
COMMAND_MODULES = [
    "compactor.cli.demo",
    "compactor.cli.data",
    "compactor.cli.policy",
    "compactor.cli.compact",
    "compactor.cli.ops",
    "compactor.cli.history",
    "compactor.cli.lifecycle",
    "compactor.cli.setup",
    "compactor.cli.codec",
    "compactor.cli.hold",
    "compactor.cli.plot",
    "compactor.cli.config",
    "compactor.cli.report",
    "compactor.cli.bench",
]


#: Commands that warn about unknown COMPACTOR_* variables themselves (config lists them too).
_WARN_THEMSELVES = ("config", "worker", "dev")


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
    from compactor.cli.terminal import sanitized_output

    JSON_OUTPUT["on"] = "--json" in (sys.argv[1:] if argv is None else argv)
    # Every human-readable byte passes the terminal sanitizer; --json output is left as is.
    with sanitized_output(stdout=False):
        parser = build_parser()
        args = parser.parse_args(argv)
    with sanitized_output(stdout=not getattr(args, "json", False)):
        return _run(parser, args)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    JSON_OUTPUT["on"] = bool(getattr(args, "json", False))
    try:
        if args.command not in _WARN_THEMSELVES:
            from compactor.cli.config import warn_unknown_variables

            warn_unknown_variables()  # a mistyped COMPACTOR_* variable is said by every command
        cli_scope()  # a blank COMPACTOR_TENANTS is an error (fail closed), for every command
        check_tenant_arg(args)  # COMPACTOR_TENANTS binds the CLI: refuse before any I/O
        rc = args.func(args)
    except CompactorError as exc:
        report_error(str(exc), code=exc.code, exit_code=exc.exit_code)
        return exc.exit_code
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            return _broken_pipe()
        # A path the system refuses (too long, no permission, a directory): one line, exit 2.
        if exc.filename is not None:
            name = str(exc.filename)
            shown = name if len(name) <= 80 else f"{name[:60]}...({len(name)} characters)"
            report_error(f"{shown}: {exc.strerror or exc}", code="os_error", exit_code=2)
            return 2
        report_error(f"{exc.strerror or exc}", code="os_error", exit_code=1)
        return 1
    except KeyboardInterrupt:
        return 130
    return int(rc or 0)


def _broken_pipe() -> int:
    # output piped into `head` and the like: not an error
    try:
        sys.stdout = open(os.devnull, "w")
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
