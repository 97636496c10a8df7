"""``compactor bench perf``'s scale table: the session it generates, ``--sizes``, one real run."""

from __future__ import annotations

import json

import pytest

from compactor.bench import scale
from compactor.cli import main
from compactor.importers import import_file


def test_generated_session_has_the_asked_number_of_small_events(tmp_path) -> None:
    f = tmp_path / "s.jsonl"
    scale.write_session(f, 333)
    events = import_file(f).events
    assert len(events) == 333
    assert sum(1 for e in events if e.is_user_request) == 4  # one request per 100 events
    assert max(len(e.text) for e in events) < 120  # small events
    assert [ln for ln in scale.small_session_lines(50)] == [ln for ln in scale.small_session_lines(50)]


def test_sizes_parse_and_bad_sizes_are_usage_errors(capsys) -> None:
    assert scale.parse_sizes("1k,10k,100000") == (1_000, 10_000, 100_000)
    assert scale.parse_sizes("none") == ()
    for bad in ("ten", "5"):
        assert main(["bench", "perf", "--no-durable", "--sizes", bad]) == 2
        err = capsys.readouterr().err
        assert "--sizes" in err and "Traceback" not in err


@pytest.mark.parametrize("size", [150])
def test_scale_table_measures_each_command_in_its_own_process(size, capsys) -> None:
    assert main(["bench", "perf", "--no-durable", "--sizes", str(size), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["scale"]
    assert row["events"] == size
    for op in scale.OPS:
        cell = row[op]
        assert cell["exit"] == 0, cell
        assert cell["s"] > 0 and 20 < cell["peak_mb"] < 2_000
        assert cell["us_per_event"] == pytest.approx(cell["s"] * 1e6 / size, rel=0.01)
    assert row["inline"]["status"] in ("committed", "noop")


def test_a_commands_peak_memory_is_its_own_not_the_benchs(tmp_path) -> None:
    # Linux carries the starting process's high-water RSS into a child across exec: a bench
    # holding 400 MB would have reported every command at >= 400 MB (the 1k row said 179 MB
    # after the durable part had run in the same process).
    held = b"x" * (400 << 20)  # written, so resident
    f = tmp_path / "s.jsonl"
    scale.write_session(f, 100)
    store = f"file://{tmp_path}/store"
    imported = scale.measure_one("import", f, store, "s")
    viewed = scale.measure_one("view", f, store, "s")
    missing = scale.measure_one("view", f, store, "no-such-session")
    assert len(held) == 400 << 20
    assert imported["exit"] == 0 and imported["events"] == 100
    assert viewed["exit"] == 0
    for cell in (imported, viewed):
        assert 20 < cell["peak_mb"] < 300, cell
        assert 0 < cell["cpu_s"] <= cell["s"] * 2.5
    assert missing["exit"] == 2 and missing["error"], missing  # the command's own exit code
