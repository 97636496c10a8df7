"""Fixtures for tests that run on both store backends from a cold process.

Import the ones a module uses (``from tests.unit.store_fixtures import make_store, store, cli_url``); pytest
finds imported fixtures by name.
"""

from __future__ import annotations

from typing import Callable

import pytest

import compactor.store.log as logmod
from compactor.store import LocalStore, ObjectStore
from compactor.store.s3 import S3Store


def reset_caches() -> None:
    """Forget verified checkpoints and id indexes: the next read is a fresh process's."""
    logmod._VERIFIED_CKPTS.clear()
    logmod._INDEXES.clear()


@pytest.fixture
def cold_process():
    """Each read below is a fresh process: no verified checkpoint or id index to fall back on."""
    reset_caches()
    yield
    reset_caches()


@pytest.fixture(params=["local", "s3"])
def make_store(request, tmp_path) -> Callable[[], ObjectStore]:
    """Factory of independent store objects (each its own client) on one fresh location: a
    LocalStore under tmp_path, then an S3Store on a fresh moto bucket."""
    if request.param == "local":
        return lambda: LocalStore(tmp_path / "store")
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("s3_bucket")
    return lambda: S3Store(bucket, "pfx", endpoint_url=endpoint)


@pytest.fixture
def store(make_store) -> ObjectStore:
    return make_store()


@pytest.fixture
def cli_url(store, monkeypatch) -> str:
    """The URL the CLI opens ``store`` by (an S3 endpoint comes from AWS_ENDPOINT_URL)."""
    if isinstance(store, LocalStore):
        return f"file://{store.root}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", store.endpoint_url)
    return store.url
