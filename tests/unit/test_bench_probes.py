"""``compactor bench probes`` end to end: the real anthropic client over HTTP against the local
fake Messages API (a deterministic word-overlap reader and judge), on a small transcript of our
own whose early goal, constraint and error survive our compaction but not truncation."""

from __future__ import annotations

import json

import pytest

from compactor.bench.probe_protocol import neutral_labels, parse_json_reply
from compactor.cli import main
from compactor.testing import FakeAnthropic, Fault
from tests.conftest import FIXTURES

CORPUS = FIXTURES / "probes" / "corpus"
PROBES = FIXTURES / "probes" / "probe-files"
TRANSCRIPT = CORPUS / "anthropic" / "billing-export.messages.json"
BASE = ["bench", "probes", str(CORPUS), "--probes", str(PROBES), "--min-target", "600"]


@pytest.fixture
def fake(monkeypatch):
    with FakeAnthropic() as f:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-unit")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f.base_url)
        yield f


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys, *extra: str) -> dict:
    rc, out, _ = run(capsys, *BASE, "--json", *extra)
    assert rc == 0
    return json.loads(out)


def test_report_compares_views_and_the_view_that_kept_the_answers_wins(fake, capsys):
    rc, out, err = run(capsys, *BASE)
    assert rc == 0
    header = next(line for line in out.splitlines() if line.startswith("transcript"))
    assert "ours" in header and "truncate" in header
    assert "billing-export" in out and "not in context" in out and "wrong (-1)" in out
    for category in ("goal", "error", "decision", "state"):
        assert any(line.startswith(category) for line in out.splitlines())
    # progress: one line per view and one for the judge
    assert "billing-export ours: view" in err and "billing-export judge:" in err
    # two reader calls (one per view) and one judge call for both views
    assert len(fake.calls()) == 3


def test_json_result_has_grades_in_range_and_ours_scores_higher(fake, capsys):
    res = run_json(capsys)
    (row,) = res["transcripts"]
    ours, trunc = row["views"]["ours"], row["views"]["truncate"]
    for cell in (ours, trunc):
        assert len(cell["grades"]) == len(row["questions"]) == 5
        assert all(g["grade"] in (-1, 0, 1, 2) for g in cell["grades"].values())
    assert res["summary"]["ours"]["points"] > res["summary"]["truncate"]["points"]
    # the user's constraint is early: in our summary, gone from the truncated tail
    assert ours["grades"]["2"]["grade"] == 2 and trunc["grades"]["2"]["grade"] == 0
    assert trunc["answers"]["2"] == "not in context"
    # the last exchange is in both views, so both readers answer it
    assert ours["grades"]["5"]["grade"] == trunc["grades"]["5"]["grade"] == 2
    assert res["summary"]["truncate"]["not_in_context"] > res["summary"]["ours"]["not_in_context"]


def test_judge_sees_neutral_labels_and_everything_inline(fake, capsys):
    res = run_json(capsys)
    judge = fake.calls()[-1].body
    request = judge["messages"][0]["content"]
    assert set(res["transcripts"][0]["judge"]["labels"]) == {"A", "B"}
    assert '\\"ours\\"' not in request and '\\"truncate\\"' not in request
    assert "invoices.json must never change" in request  # the reference, not a file path
    assert "FULL_FILE" not in judge["system"] and "OUT_FILE" not in judge["system"]
    # the shuffle is a function of the transcript name: the same on every run
    assert res["transcripts"][0]["judge"]["labels"] == neutral_labels("billing-export", ["ours", "truncate"])


def test_out_dir_holds_views_answers_and_grades(fake, capsys, tmp_path):
    res = run_json(capsys, "--out", str(tmp_path))
    d = tmp_path / "billing-export"
    assert "invoices.json" in (d / "ours.view.txt").read_text()
    assert "invoices.json" not in (d / "truncate.view.txt").read_text()
    assert json.loads((d / "truncate.json").read_text())["grades"]["2"]["grade"] == 0
    assert json.loads((tmp_path / "result.json").read_text())["summary"] == res["summary"]


def test_malformed_reply_is_asked_again_once(fake, capsys):
    fake.push(Fault.malformed())
    res = run_json(capsys)
    assert len(fake.calls()) == 4  # the first reader call repeated, then as usual
    assert res["summary"]["ours"]["points"] > res["summary"]["truncate"]["points"]


def test_twice_malformed_reader_counts_zero_and_says_so(fake, capsys):
    fake.push(Fault.malformed(), Fault.malformed())  # the first view's reader, both tries
    rc, out, _ = run(capsys, *BASE)
    assert rc == 0
    assert "billing-export ours: reader reply malformed twice: counted 0" in out
    res = run_json(capsys)  # a clean run for comparison
    assert res["summary"]["ours"]["points"] > 0
    fake.push(Fault.malformed(), Fault.malformed())
    bad = run_json(capsys)["transcripts"][0]["views"]["ours"]
    assert bad["points"] == 0 and bad["reader_failed"]
    assert {g["note"] for g in bad["grades"].values()} == {"reader reply malformed twice"}


def test_several_ratios_are_separate_views_under_one_judge_call(fake, capsys):
    res = run_json(capsys, "--ratio", "0.05,0.5")
    assert list(res["summary"]) == ["ours@0.05", "truncate@0.05", "ours@0.5", "truncate@0.5"]
    assert len(fake.calls()) == 5  # four readers, one judge
    views = res["transcripts"][0]["views"]
    assert views["truncate@0.5"]["target"] > views["truncate@0.05"]["target"]


def test_a_transcript_that_fits_is_read_once_for_identical_views(fake, capsys):
    res = run_json(capsys, "--min-target", "100000")
    assert len(fake.calls()) == 2  # one reader for the shared text, one judge
    s = res["summary"]
    assert s["ours"]["points"] == s["truncate"]["points"] > 0


def test_no_key_exits_2_saying_what_is_needed(monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    rc, out, err = run(capsys, *BASE)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "ANTHROPIC_API_KEY" in lines[0] and "ANTHROPIC_BASE_URL" in lines[0]


def test_no_matching_probe_file_is_an_input_error(fake, capsys, tmp_path):
    rc, _, err = run(capsys, "bench", "probes", str(TRANSCRIPT), "--probes", str(tmp_path))
    assert rc == 2 and "no probe files" in err
    other = tmp_path / "other.messages.json"
    other.write_text(TRANSCRIPT.read_text())
    rc, _, err = run(capsys, "bench", "probes", str(other), "--probes", str(PROBES))
    assert rc == 2 and "no transcript matches" in err
    assert fake.calls() == []


def test_api_error_is_one_line_not_a_traceback(fake, capsys):
    fake.push(Fault.bad_request("invalid x-api-key", status=401))
    rc, _, err = run(capsys, *BASE)
    assert rc == 1 and "401" in err and "Traceback" not in err


@pytest.mark.parametrize("text", [
    '{"answers": [{"id": 1, "answer": "x"}]}',
    'Sure:\n```json\n{"answers": [{"id": 1, "answer": "x"}]}\n```\nDone.',
    'Here you go. {"answers": [{"id": 1, "answer": "x"}]} Hope it helps.',
])
def test_replies_parse_bare_fenced_or_amid_prose(text):
    assert parse_json_reply(text) == {"answers": [{"id": 1, "answer": "x"}]}


def test_a_reply_without_json_does_not_parse():
    assert parse_json_reply("I could not do it.") is None
    assert parse_json_reply("[1, 2]") is None
