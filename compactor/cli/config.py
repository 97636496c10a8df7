"""``compactor config``: the effective settings (secrets masked) and where each came from.

Warns (stderr) about ``COMPACTOR_*`` variables no setting reads: pydantic-settings ignores
them, so a typo would otherwise silently leave the default in force.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from typing import Any

from compactor.cli.common import add_json_arg, print_json, table

#: ``COMPACTOR_*`` variables read outside the settings model (benchmarks and tests).
OTHER_KNOWN = {"COMPACTOR_CORPUS", "COMPACTOR_ANTHROPIC_MODEL", "COMPACTOR_RECORD_HISTORIES"}
MASK = "********"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="print the effective settings (secrets masked); warn on unknown "
                       "COMPACTOR_* variables")
    add_json_arg(p)
    p.set_defaults(func=run)


def env_names(settings_cls: Any) -> dict[str, list[str]]:
    """Field name -> the environment variables that set it, in priority order."""
    from pydantic import AliasChoices

    prefix = settings_cls.model_config.get("env_prefix", "")
    out: dict[str, list[str]] = {}
    for name, f in settings_cls.model_fields.items():
        alias = f.validation_alias
        if isinstance(alias, AliasChoices):
            out[name] = [str(c).upper() for c in alias.choices]
        elif isinstance(alias, str):
            out[name] = [alias.upper()]
        else:
            out[name] = [f"{prefix}{name}".upper()]
    return out


def unknown_variables(environ: dict[str, str], *settings_cls: Any) -> list[tuple[str, str | None]]:
    """(name, closest known name or None) for every ``COMPACTOR_*`` variable nothing reads."""
    known = {n for c in settings_cls for names in env_names(c).values() for n in names} | OTHER_KNOWN
    ours = sorted(k for k in (n.upper() for n in known) if k.startswith("COMPACTOR_"))
    out = []
    for var in sorted(environ):
        if var.upper().startswith("COMPACTOR_") and var.upper() not in known:
            close = difflib.get_close_matches(var.upper(), ours, n=1, cutoff=0.75)
            out.append((var, close[0] if close else None))
    return out


def warn_unknown_variables() -> list[tuple[str, str | None]]:
    """Print one warning per ``COMPACTOR_*`` variable nothing reads (a typo is otherwise
    silently ignored); returns them. Every command calls it (``main``; ``config``, ``worker``
    and ``dev`` themselves). Imports nothing when no such variable is set, and the LLM
    settings (a heavy import) only when a variable is left unexplained by the others."""
    environ = {k: v for k, v in os.environ.items() if k.upper().startswith("COMPACTOR_")}
    if not environ:
        return []
    from workers.settings import Settings

    unknown = unknown_variables(environ, Settings)
    if unknown:
        from activities.llm_settings import _AnthropicEnv

        unknown = unknown_variables(environ, Settings, _AnthropicEnv)
    for var, close in unknown:
        hint = f" (did you mean {close}?)" if close else ""
        print(f"warning: {var} is not a compactor setting and is ignored{hint}", file=sys.stderr)
    return unknown


def _shown(value: Any) -> Any:
    from pydantic import SecretStr  # here: every command imports this module (warn_unknown_variables)

    if isinstance(value, SecretStr):
        return MASK if value.get_secret_value() else ""
    return value


def run(args: argparse.Namespace) -> int:
    from activities.llm_settings import AnthropicSettings, _AnthropicEnv
    from compactor.cli.common import settings as load
    from workers.settings import Settings

    s = load()
    llm = AnthropicSettings.from_settings(s)  # the summarizer's client settings, as a worker sees them
    upper_env = {k.upper(): k for k in os.environ}
    rows: list[dict[str, Any]] = []
    for cls, obj, prefix in ((Settings, s, ""), (_AnthropicEnv, llm, "anthropic_")):
        names = env_names(cls)
        for field in cls.model_fields:
            if prefix and field == "model":
                continue  # the worker's COMPACTOR_MODEL wins (AnthropicSettings.from_settings)
            src = next((n for n in names[field] if n in upper_env), None)
            rows.append({"name": prefix + field, "env": names[field][0], "value": _shown(getattr(obj, field)),
                         "source": f"env {src}" if src else "default"})
    unknown = warn_unknown_variables()
    if args.json:
        print_json({"settings": {r["name"]: r["value"] for r in rows},
                    "sources": {r["name"]: r["source"] for r in rows},
                    "unknown": [{"name": v, "did_you_mean": c} for v, c in unknown]})
        return 0
    print(table([[r["env"], "-" if r["value"] in (None, "") else r["value"], r["source"]] for r in rows],
                ["variable", "value", "source"]))
    return 0
