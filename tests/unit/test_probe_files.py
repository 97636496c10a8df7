"""The fixed probe files (tests/probes/*.json): shape, spread, and evidence from the transcript.

Each probe file holds 12 questions a developer taking over the session must answer, written once
from the full transcript. The evidence of every question must be verbatim in the transcript and
lie in the first 75% of its conversation (the newest part is kept verbatim by any compactor,
so questions about it test nothing).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor.bench.probe_text import probe_text
from compactor.importers import import_file
from tests.conftest import CORPUS

PROBES = sorted((Path(__file__).parent.parent / "probes").glob("*.json"))
CATEGORIES = {"goal": 2, "artifact": 3, "error": 2, "decision": 2, "state": 3}


@pytest.mark.parametrize("path", PROBES, ids=lambda p: p.stem)
def test_probe_file_shape(path: Path) -> None:
    doc = json.loads(path.read_text())
    qs = doc["questions"]
    assert len(qs) == 12
    assert [q["id"] for q in qs] == list(range(1, 13))
    counts = {c: sum(q["category"] == c for q in qs) for c in CATEGORIES}
    assert counts == CATEGORIES
    for q in qs:
        assert q["question"].strip() and q["reference"].strip()
        assert 20 <= len(q["evidence"]) <= 200 and "\n" not in q["evidence"]


@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus not present")
@pytest.mark.parametrize("path", PROBES, ids=lambda p: p.stem)
def test_probe_evidence_is_early_and_verbatim(path: Path) -> None:
    doc = json.loads(path.read_text())
    text = probe_text(import_file(CORPUS / doc["transcript"]).events, max_result_chars=6000)
    lines = text.split("\n")
    first = next(i for i, ln in enumerate(lines) if not ln.startswith("[system]") and ln.startswith("["))
    start = len("\n".join(lines[:first]))
    cut = start + int(0.75 * (len(text) - start))
    for q in doc["questions"]:
        at = text.find(q["evidence"])
        assert at != -1, f"question {q['id']}: evidence not in the transcript"
        assert at < cut, f"question {q['id']}: evidence in the last 25% of the session"


def test_every_corpus_transcript_has_a_probe_file() -> None:
    if not CORPUS.is_dir():
        pytest.skip("corpus not present")
    names = {json.loads(p.read_text())["transcript"] for p in PROBES}
    corpus = {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.is_file() and p.name != "README.md"}
    assert corpus <= names
