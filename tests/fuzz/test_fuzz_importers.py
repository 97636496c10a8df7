"""Fuzz the importers: damaged and reshaped versions of every fixture format, and raw bytes.

Whatever the input, an import either returns events that store and render, or raises one of
our InvalidInput errors (a one-line message for the CLI); never anything else.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactor.engine.measure import render_request
from compactor.engine.view import build_view, view_text
from compactor.errors import InvalidInput
from compactor.importers import FORMATS, import_bytes
from compactor.store import LocalStore, SessionLog
from tests.fuzz.strategies import dumps_like, load_like, mutated_bytes, perturbed_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FILES = {fmt: next(p for p in sorted((FIXTURES / fmt).rglob("*")) if p.is_file())
         for fmt in FORMATS if (FIXTURES / fmt).is_dir() and any((FIXTURES / fmt).rglob("*.*"))}


def check(data: bytes, fmt: str, tmp: Path | None = None) -> None:
    try:
        result = import_bytes(data, format=fmt, name="fuzz")
    except InvalidInput as exc:
        assert str(exc).strip()  # a message to show
        return
    view = build_view(result.events, None)
    view_text(view)
    render_request(view)
    if tmp is not None and result.events:
        SessionLog(LocalStore(tmp, fsync=False), "t", "s").append(result.events)


def _is_json(path: Path) -> bool:
    try:
        load_like(path.read_bytes())
        return True
    except ValueError:
        return False


@pytest.mark.parametrize("fmt", sorted(f for f, p in FILES.items() if _is_json(p)))
@given(data=st.data())
def test_reshaped_documents(fmt, data, tmp_path_factory):
    original = FILES[fmt].read_bytes()
    doc = data.draw(perturbed_json(load_like(original)))
    check(dumps_like(original, doc), fmt, tmp_path_factory.mktemp("imp"))


@pytest.mark.parametrize("fmt", sorted(FILES) + ["auto"])
@given(data=st.data())
def test_damaged_bytes(fmt, data):
    original = FILES.get(fmt, FILES["claude-code"]).read_bytes()
    check(data.draw(mutated_bytes(original)), fmt)


@given(st.binary(max_size=300), st.sampled_from(["auto", *FORMATS]))
def test_arbitrary_bytes(data, fmt):
    check(data, fmt)
