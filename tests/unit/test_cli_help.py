"""Every command's --help renders (argparse formats help lazily, so a bad help string only
fails when a user asks for it)."""

import argparse

import pytest

from compactor.cli import build_parser


def _commands():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = []
    for name, p in sub.choices.items():
        out.append((name, p))
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                out += [(f"{name} {n}", q) for n, q in a.choices.items()]
    return out


@pytest.mark.parametrize("name,parser", _commands(), ids=lambda x: x if isinstance(x, str) else "")
def test_help_renders(name, parser):
    text = parser.format_help()
    assert "usage:" in text


def test_expected_commands_exist():
    names = {n for n, _ in _commands()}
    for cmd in ["demo", "import", "view", "compact", "policy", "inspect", "rollback", "verify", "history",
                "replay", "sweep", "dev", "worker", "approve", "reject", "plot", "config", "breaker",
                "bench store", "bench fidelity", "bench perf"]:
        assert cmd in names, cmd


def test_compact_takes_model_and_summarizer():
    args = build_parser().parse_args(
        ["compact", "x.jsonl", "--summarizer", "anthropic", "--model", "claude-haiku-4-5"]
    )
    assert args.model == "claude-haiku-4-5" and args.summarizer == "anthropic"
