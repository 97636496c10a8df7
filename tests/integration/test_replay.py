"""Recorded workflow histories replay against the current workflow code (determinism check).

Regenerate after an intentional, patched change with::

    COMPACTOR_RECORD_HISTORIES=1 .venv/bin/python -m pytest -q tests/integration/test_workflow.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from workflows.compact_session import CompactSessionWorkflow
from workflows.sweep import SweepSessionsWorkflow

HISTORIES = sorted((Path(__file__).resolve().parents[1] / "histories").glob("*.json"))


def test_histories_are_recorded():
    assert HISTORIES, "no recorded histories under tests/histories/ (see module docstring)"


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_replay(path: Path):
    replayer = Replayer(
        workflows=[CompactSessionWorkflow, SweepSessionsWorkflow],
        data_converter=pydantic_data_converter,
    )
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    await replayer.replay_workflow(history)
