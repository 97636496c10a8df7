"""The stand-in model answers in tests/fixtures/model-path replayed through the product
(issue 14 item 3): every CI run exercises the validator on model-written text. Needs the
transcripts (../shared/corpus), so it is skipped without them."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactor.bench.model_path import KINDS, NO_ROOM, RATIOS, expected_outcomes, run_bench
from tests.conftest import corpus_files

pytestmark = [pytest.mark.integration, pytest.mark.corpus]

ANSWERS = Path(__file__).resolve().parents[1] / "fixtures" / "model-path"


def _check(result: dict, paths: tuple[str, ...]) -> None:
    assert result["rows"] and not result["missing_answers"]
    for row in result["rows"]:
        for p in paths:
            out = row[p]
            assert out["truthful"], (row["name"], row["kind"], p, out)
            assert out["outcome"] in expected_outcomes(row["kind"], row["note"], out.get("detail", "")), \
                (row["name"], row["kind"], p, out)


def test_every_stand_in_answer_is_used_inline(corpus_dir):
    """The real model-written text of every transcript at 10% and 5% through the validator;
    with it, the answers derived from it that must be refused or completed."""
    stems = {p.name.split(".")[0] for p in corpus_files()}
    kinds = ("faithful", "placeholder", "no-constraints", "invented-path")
    result = run_bench(str(corpus_dir), str(ANSWERS), paths=("inline",), kinds=kinds)
    _check(result, ("inline",))
    # every transcript at 10% and 5%: a faithful answer used, or no model asked for lack of room
    answered = [r for r in result["rows"] if r["kind"] in ("faithful", NO_ROOM)]
    assert len(answered) == len(stems) * len(RATIOS)
    assert len([r for r in answered if r["kind"] == NO_ROOM]) <= 1  # raze at 5%; the rest are asked
    assert {r["kind"] for r in result["rows"]} - {NO_ROOM} == set(kinds)


def test_every_adversarial_answer_is_handled_on_both_paths(corpus_dir, temporal_address):
    result = run_bench(str(corpus_dir), str(ANSWERS), paths=("inline", "durable"),
                       only=("apanloco-random", "Soul"), temporal_address=temporal_address)
    _check(result, ("inline", "durable"))
    assert {r["kind"] for r in result["rows"]} == set(KINDS)
    for row in result["rows"]:
        assert row["inline"]["outcome"] == row["durable"]["outcome"], row
        assert row["same_request"], row  # one prompt, both paths


def test_the_bench_finds_its_answers_and_the_corpus_from_any_directory(corpus_dir, tmp_path, monkeypatch, capsys):
    """The defaults (``tests/fixtures/model-path``, ``../shared/corpus``) are the project's, not
    the working directory's: run from elsewhere, the bench still replays the bundled answers."""
    import json

    from compactor.cli import main

    if Path(corpus_dir).resolve() != (ANSWERS.parents[2].parent / "shared" / "corpus").resolve():
        pytest.skip("the corpus is not the one beside the project (COMPACTOR_CORPUS elsewhere)")
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "model-path", "--paths", "inline", "--only", "Soul", "--kinds", "faithful", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert Path(result["answers"]) == ANSWERS
    assert [r["kind"] for r in result["rows"]] == ["faithful", "faithful"]  # Soul at 10% and 5%
    assert all(r["inline"]["truthful"] for r in result["rows"])
