"""Constraint classification on the labelled set (tests/fixtures/constraints).

The synthetic and held-out messages are scored on every run; the corpus messages (referenced
by transcript, seq and hash, never copied) where ../shared/corpus exists.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor.bench.constraints import (
    TARGET_PRECISION,
    TARGET_RECALL,
    corpus_cases,
    score,
    synthetic_cases,
)
from compactor.cli import main
from compactor.lifting.constraints import constraint_sentences, own_lines

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "constraints"


def test_labelled_set_is_big_enough() -> None:
    n = sum(len(json.loads((FIXTURES / f).read_text())["messages"])
            for f in ("synthetic.json", "holdout.json", "corpus.json"))
    assert n >= 60


@pytest.mark.parametrize("name", ["synthetic.json", "holdout.json"])
def test_synthetic_pastes_meet_the_targets(name: str) -> None:
    r = score(synthetic_cases(FIXTURES, name))
    assert r["precision"] >= TARGET_PRECISION, r["false_constraints"]
    assert r["recall"] >= TARGET_RECALL, r["missed"]


def test_corpus_messages_meet_the_targets(corpus_dir: Path) -> None:
    cases = corpus_cases(corpus_dir, FIXTURES)
    assert len(cases) >= 40
    r = score(cases)
    assert r["precision"] >= TARGET_PRECISION, r["false_constraints"]
    assert r["recall"] >= TARGET_RECALL, r["missed"]


def test_pasted_output_never_becomes_a_constraint() -> None:
    # a wallet popup after "says:", a compiler error, a JSON error body, a log line
    text = ("when I mint the wallet says:\n\nYou must have at least 0.002 SOL to pay fees.\n\n"
            "error[E0382]: borrow of moved value: `cfg`\n"
            "{\"error\": {\"message\": \"max_tokens must be at most 8192\"}}\n"
            "2026-11-30 10:02:11 ERROR only 2 of 3 replicas alive")
    assert constraint_sentences(text) == []


def test_a_wrapped_sentence_is_one_constraint() -> None:
    text = ("Add a retry to the uploader but do not retry on 4xx responses, those are\n"
            "our bug and retrying them only hides it.")
    assert constraint_sentences(text) == [
        "Add a retry to the uploader but do not retry on 4xx responses, those are our bug and "
        "retrying them only hides it."]


def test_statements_and_hedges_are_not_rules() -> None:
    assert constraint_sentences("Currently it only supports text. The guard only covers PgVector.") == []
    assert constraint_sentences("i don't think we need a Dockerfile") == []
    assert constraint_sentences("The README says \"never run migrations by hand\" but make does.") == []


def test_user_words_around_a_paste_are_kept() -> None:
    text = "the api returns\n{\n  \"error\": 1\n}\nAlways validate the email first."
    assert own_lines(text) == ["the api returns", "Always validate the email first."]
    assert constraint_sentences(text) == ["Always validate the email first."]


def test_bench_constraints_cli_reports_precision_and_recall(tmp_path: Path, capsys) -> None:
    rc = main(["bench", "constraints", "--json", "--events", "200", "--corpus", str(tmp_path / "none")])
    assert rc == 0
    r = json.loads(capsys.readouterr().out)
    assert set(r["parts"]) == {"synthetic", "holdout", "all"}
    assert r["parts"]["all"]["messages"] >= 60
    assert r["cost"]["generated"]["us_per_event"] > 0
    assert main(["bench", "constraints", "--fixtures", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no labelled set" in err and "Traceback" not in err
