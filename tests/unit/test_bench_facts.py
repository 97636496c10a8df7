"""The fidelity benchmark's independent fact extractor, its baselines and its grading."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest

from compactor.bench import facts as facts_mod
from compactor.bench.facts import Fact, cause_line, extract_facts, recall, recalled, view_haystack
from compactor.bench.fidelity import (
    MASK_PLACEHOLDER,
    bench,
    evaluate,
    left_out,
    mask_view,
    register,
    summarize,
    truncate_view,
)
from compactor.bench.synthetic import claude_session, codex_session, synthetic_sessions
from compactor.engine.measure import view_tokens
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.tokens import total_tokens, with_tokens
from tests.conftest import corpus_files


def user(seq: int, text: str, **kw) -> Event:
    return Event(seq=seq, id=f"e{seq}", role="user", blocks=[TextBlock(text=text)], **kw)


def assistant(seq: int, text: str = "", uses: tuple = ()) -> Event:
    blocks: list = [TextBlock(text=text)] if text else []
    blocks += [ToolUseBlock(id=i, name=n, input=inp) for i, n, inp in uses]
    return Event(seq=seq, id=f"e{seq}", role="assistant", blocks=blocks)


def results(seq: int, *res: tuple) -> Event:
    return Event(seq=seq, id=f"e{seq}", role="user", blocks=[
        ToolResultBlock(tool_use_id=i, content=[TextBlock(text=t)], is_error=err) for i, t, err in res])


def session() -> list[Event]:
    return [
        Event(seq=1, id="sys", kind="pinned", role="system", blocks=[TextBlock(text="system rules")]),
        user(2, "Fix the importer. Don\u2019t touch tests/golden/. See https://example.org/bug/7."),
        assistant(3, "", (("u1", "Edit", {"file_path": "src/imp.py", "old_string": "a", "new_string": "b"}),)),
        results(4, ("u1", "The file src/imp.py has been updated successfully.", False)),
        assistant(5, "", (("u2", "Bash", {"command": "pytest -q tests/test_imp.py"}),)),
        results(6, ("u2", "Exit code 1\nTraceback (most recent call last):\nKeyError: 'x'\n1 failed", True)),
        assistant(7, "", (("u3", "apply_patch", {"input": "*** Begin Patch\n*** Add File: src/new.py\n+x\n*** End Patch"}),)),
        results(8, ("u3", "Success", False)),
        assistant(9, "", (("u4", "Edit", {"file_path": "src/bad.py", "old_string": "q", "new_string": "r"}),)),
        results(10, ("u4", "String to replace not found", True)),
        assistant(11, "", (("u5", "Bash", {"command": "pytest -q"}),)),
        results(12, ("u5", "5 passed in 0.1s", False)),
        assistant(13, "", (("u6", "Read", {"file_path": "src/listing.py"}),)),
        results(14, ("u6", "  10  raise ValueError('not an error here')", False)),
        assistant(15, "Fixed: the importer now skips orphaned manifests; pytest is green."),
        user(16, "Now only update the README."),
        assistant(17, "", (("u7", "Bash", {"command": "make release"}),)),
    ]


def by_kind(fs: list[Fact]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in fs:
        out.setdefault(f.kind, []).append(f.key)
    return out


def test_extracts_every_kind() -> None:
    k = by_kind(extract_facts(session()))
    assert k["file_changed"] == ["src/imp.py", "src/new.py"]  # failed edit of src/bad.py is not a change
    assert k["error"] == ["KeyError"]  # the ValueError in a source listing is not an error
    assert k["failed_test"] == ["pytest -q tests/test_imp.py"]
    assert k["last_test"] == ["pytest -q"]
    assert k["constraint"] == ["Don\u2019t touch tests/golden/.", "Now only update the README."]
    assert k["first_request"] == ["Fix the importer. Don\u2019t touch tests/golden/. See https://example.org/bug/7."]
    assert k["latest_request"] == ["Now only update the README."]
    assert k["pending_call"] == ["u7"]
    assert k["user_url"] == ["https://example.org/bug/7"]
    assert k["error_cause"] == ["KeyError: 'x'", "String to replace not found"]
    assert "resolution" not in k  # `pytest -q` never failed; the failed run was another command
    # rarest words of the closing message; "importer" is the user's own word, "pytest" is common
    assert k["turn_outcome"] == ["fixed skips orphaned manifests green"]


def test_facts_do_not_use_lift() -> None:
    """The grader must not share code with the engine it grades."""
    tree = ast.parse(Path(facts_mod.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and (m.startswith("compactor.lifting.lift") or m.startswith("compactor.summarize.structured")
                          or m.startswith("compactor.engine.compact")) for m in imported)


def test_recall_matching_normalizes_whitespace_and_quotes() -> None:
    hay = view_haystack([user(1, "said:  Don't   touch\ntests/golden/.")])
    assert recalled(Fact(kind="constraint", key="Don\u2019t touch tests/golden/."), hay)
    assert not recalled(Fact(kind="constraint", key="Never touch tests/golden/."), hay)


def test_haystack_includes_unescaped_tool_inputs() -> None:
    hay = view_haystack([assistant(1, "", (("x", "Bash", {"command": 'rg -n "class X"'}),))])
    assert 'rg -n "class X"' in hay and "x Bash" in hay


def test_recall_counts_per_kind() -> None:
    fs = [Fact(kind="a", key="alpha"), Fact(kind="a", key="beta"), Fact(kind="b", key="gamma")]
    r, per = recall(fs, "alpha gamma")
    assert r == pytest.approx(2 / 3) and per == {"a": (1, 2), "b": (1, 1)}
    assert recall([], "x")[0] == 1.0


def padded() -> list[Event]:
    evs = session()
    big = "line of output\n" * 400
    evs[5] = results(6, ("u2", "Exit code 1\nKeyError: 'x'\n" + big, True))
    evs[13] = results(14, ("u6", big, False))
    return with_tokens(evs)


def test_truncate_keeps_pinned_whole_pairs_and_fits() -> None:
    evs = padded()
    target = 600
    view = truncate_view(evs, target)
    assert view[0].kind == "pinned"
    assert total_tokens(view) <= target
    uses = {u.id for e in view for u in e.tool_uses}
    assert all(r.tool_use_id in uses for e in view for r in e.tool_results)
    assert view[-1].seq == 17


def test_mask_replaces_old_results() -> None:
    evs = padded()
    view = mask_view(evs, 100_000, keep_results=1)
    texts = [r.text for e in view for r in e.tool_results]
    assert texts[:-1] == [MASK_PLACEHOLDER] * (len(texts) - 1)
    assert texts[-1].startswith("line of output")  # the newest result is kept
    assert total_tokens(view) < total_tokens(evs)


class _Rec:
    layers = ["stub"]


class _Res:
    def __init__(self, view):
        self.view, self.checkpoint, self.record, self.artifacts = view, None, _Rec(), {}


def test_evaluate_grades_each_method(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in engine whose summary names every fact recalls all; truncation does not."""
    import compactor.engine.compact as engine

    def stub(events, policy, target_tokens=None, **kw):
        text = "\n".join(f.key for f in extract_facts(events))
        summary = Event(seq=0, id="s", kind="compaction", role="user", blocks=[TextBlock(text=text)])
        return _Res([e for e in events if e.kind == "pinned"] + [summary])

    monkeypatch.setattr(engine, "compact", stub)
    row = evaluate(padded(), ratio=0.01, min_target=600, name="t")
    ours = row["methods"]["ours"]
    assert ours["recall"] == 1.0 and not ours["over_budget"]
    assert row["methods"]["truncate"]["recall"] < 1.0
    assert row["layers"] == ["stub"]
    assert summarize([row])["ours"]["mean_recall"] == 1.0


def test_over_budget_view_is_graded_on_what_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    import compactor.engine.compact as engine

    monkeypatch.setattr(engine, "compact", lambda events, policy, target_tokens=None, **kw: _Res(list(events)))
    row = evaluate(padded(), ratio=0.01, min_target=600, name="t")
    ours = row["methods"]["ours"]
    assert ours["over_budget"] and ours["recall_unbounded"] == 1.0
    assert ours["recall"] == row["methods"]["truncate"]["recall"] < 1.0
    assert "t (ours)" in summarize([row])["over_budget"]


def test_failed_compaction_counts_as_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    import compactor.engine.compact as engine

    def boom(*a, **k):
        raise RuntimeError("nope")

    monkeypatch.setattr(engine, "compact", boom)
    row = evaluate(padded(), min_target=600, name="t")
    assert row["error"].startswith("RuntimeError")
    assert row["methods"]["ours"]["recall"] == 0.0
    assert summarize([row])["failed"] == ["t"]


def test_cli_registers_fidelity() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers()
    register(sub)
    args = p.parse_args(["fidelity", "a.jsonl", "--target-ratio", "0.2", "--json", "--plot", "x.png"])
    assert args.files == ["a.jsonl"] and args.target_ratio == 0.2 and args.json and args.plot == "x.png"
    args = p.parse_args(["fidelity", "--synthetic", "2", "--ratios", "0.2,0.1"])
    assert args.files == [] and args.synthetic == 2 and args.ratios == [0.2, 0.1] and args.min_target == 3000
    with pytest.raises(SystemExit):
        p.parse_args(["fidelity", "--ratios", "0.2,2"])


def test_cli_runs_synthetic_only(capsys: pytest.CaptureFixture) -> None:
    p = argparse.ArgumentParser()
    register(p.add_subparsers())
    args = p.parse_args(["fidelity", "--synthetic", "2", "--ratios", "0.05"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "synthetic/codex-heredoc-1" in out and "category" in out
    assert "views that fit their target: " in out


# --- corpus -----------------------------------------------------------------------------------

CORPUS = corpus_files()


def _import(path: Path) -> list[Event]:
    from compactor import importers
    return importers.import_file(path).events


@pytest.mark.corpus
@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_corpus_facts(path: Path) -> None:
    fs = extract_facts(_import(path))
    kinds = {f.kind for f in fs}
    assert {"first_request", "latest_request"} <= kinds
    # every fact's identifying string is in the original transcript itself
    hay = view_haystack(_import(path))
    assert all(recalled(f, hay) for f in fs)


@pytest.mark.corpus
def test_corpus_fidelity_goal(corpus_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The benchmark runs both ratios on the corpus; ours stays far above truncation.

    The recall goals themselves (mean >= 0.95, errors >= 0.90 at 5%) are read off
    ``compactor bench fidelity``, not asserted in a timed test.
    """
    pytest.importorskip("compactor.engine.compact")
    _import(CORPUS[0])
    p = argparse.ArgumentParser()
    register(p.add_subparsers())
    plot = tmp_path / "fid.png"
    args = p.parse_args(["fidelity", str(corpus_dir), "--json", "--plot", str(plot)])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["ratio"] for r in out["runs"]] == [0.15, 0.05]
    for run in out["runs"]:
        s = run["summary"]
        assert s["truncate"]["mean_recall"] <= s["ours"]["mean_recall"] - 0.3
        assert not s["failed"]
        assert len(run["files"]) == len(CORPUS)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert plot.stat().st_size > 1000


def test_plot_without_matplotlib_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    import sys

    from compactor.bench.fidelity import _plot

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import now raises ImportError
    out = tmp_path / "x.png"
    _plot([{"ratio": 0.15, "min_target": 3000, "files": [{"file": "a/b", "methods": {"ours": {"recall": 1.0}}}]}], str(out))
    assert not out.exists()
    assert "matplotlib" in capsys.readouterr().err


# --- error causes, resolutions, turn outcomes -------------------------------------------------


def test_cause_line_prefers_the_exception_then_an_error_word() -> None:
    tb = "Exit code 1\nTraceback (most recent call last):\n  File \"a.py\", line 3\nKeyError: 'x'\n"
    assert cause_line(tb, True) == "KeyError: 'x'"
    codex = "Chunk ID: 1\nProcess exited with code 2\nOutput:\nok line\nrg: src/x: No such file or directory\n"
    assert cause_line(codex, False) == "rg: src/x: No such file or directory"
    assert cause_line("E   AssertionError: 3 != 4", False) == "AssertionError: 3 != 4"
    assert cause_line("Process exited with code 1\nOutput:\n", False) is None  # nothing telling
    assert cause_line("=====\n", True) is None


def fixed_later() -> list[Event]:
    return [
        user(1, "Make the build pass."),
        assistant(2, "", (("a", "Bash", {"command": "make build"}),)),
        results(3, ("a", "Exit code 2\ncc: fatal error: zlib.h: No such file or directory", True)),
        assistant(4, "", (("b", "Bash", {"command": "apt-get install -y zlib1g-dev"}),)),
        results(5, ("b", "Setting up zlib1g-dev", False)),
        assistant(6, "", (("c", "Bash", {"command": "make build"}),)),
        results(7, ("c", "built target libfoo", False)),
        assistant(8, "The build links against zlib now; libfoo compiles cleanly."),
    ]


def test_resolution_is_a_failed_command_that_later_succeeds() -> None:
    fs = [f for f in extract_facts(fixed_later()) if f.kind == "resolution"]
    assert [f.key for f in fs] == ["make build"]
    f = fs[0]
    assert recalled(f, view_haystack(fixed_later()[5:]))  # the successful run itself
    assert recalled(f, "- `make build` failed (#3), resolved at #7: exit 0")  # stated by a summary
    assert recalled(f, "resolved: make build")
    # the failed run alone, or the command with a failure after it, is not a resolution
    assert not recalled(f, view_haystack(fixed_later()[:3]))
    assert not recalled(f, "`make build` -> exit 2: fatal error; `make test` passed")
    assert recalled(f, "`make build` -> exit 2: fatal error, later passed")
    assert not recalled(f, "make build")


def test_turn_outcome_needs_most_of_its_words() -> None:
    f = Fact(kind="turn_outcome", key="links zlib libfoo compiles cleanly")
    assert recalled(f, "Outcome: libfoo compiles cleanly against zlib.")
    assert not recalled(f, "Outcome: libfoo builds.")  # 1 of 5
    assert not recalled(f, "zlibfoo compilescleanly")  # whole words only


def test_shell_writes_are_file_changes_but_scratch_is_not() -> None:
    evs = [
        user(1, "Write the config."),
        assistant(2, "", (("a", "exec_command", {"cmd": "cat > app/config.py <<'EOF'\nX = 1\nEOF"}),
                          ("b", "exec_command", {"cmd": "printf 'a\\nb\\n' > notes/todo.txt"}),
                          ("c", "exec_command", {"cmd": "echo x | tee -a docs/log.md"}),
                          ("d", "exec_command", {"cmd": "pytest -q > /tmp/out.log 2>&1"}),
                          ("e", "exec_command", {"cmd": "cat > never.py <<'EOF'\nEOF"}))),
        results(3, ("a", "Process exited with code 0", False), ("b", "", False), ("c", "x", False),
                ("d", "", False), ("e", "Process exited with code 1\nOutput:\nPermission denied", False)),
    ]
    assert by_kind(extract_facts(evs))["file_changed"] == ["app/config.py", "notes/todo.txt", "docs/log.md"]


# --- the bench on synthetic sessions ----------------------------------------------------------


def test_synthetic_sessions_are_deterministic_and_shaped() -> None:
    a, b = claude_session(3), claude_session(3)
    assert [e.model_dump() for e in a] == [e.model_dump() for e in b]
    assert claude_session(4)[1].text != a[1].text
    evs = with_tokens(a)
    last = max(i for i, e in enumerate(evs) if e.is_user_request)
    # the final turn alone is larger than the 15% target of the whole session
    assert view_tokens(evs[last:]) > 0.15 * view_tokens(evs)
    kinds = {f.kind for f in extract_facts(a)}
    assert {"error_cause", "resolution", "turn_outcome", "failed_test", "pending_call"} <= kinds
    cmds = [u.input["cmd"] for e in codex_session(1) for u in e.tool_uses]
    assert any("<<'EOF'" in c for c in cmds) and any(c.startswith("printf '") for c in cmds)
    assert any("| tee -a" in c for c in cmds)
    assert [n for n, _ in synthetic_sessions(3, seed=5)] == [
        "synthetic/claude-5", "synthetic/codex-heredoc-6", "synthetic/claude-7"]


def test_bench_report_shape_on_synthetic_sessions() -> None:
    named = list(synthetic_sessions(2))
    report = bench(named, [0.15, 0.05])
    assert [r["ratio"] for r in report["runs"]] == [0.15, 0.05]
    assert report["views"] == 2 * 2 * 3
    assert report["views_fit"] == sum(r["summary"]["views_fit"] for r in report["runs"])
    for run in report["runs"]:
        s = run["summary"]
        assert {"errors", "outcomes", "files", "requests"} <= set(s["by_category"])
        assert s["by_category"]["errors"]["ours"]["facts"] == sum(
            s["by_kind"][k]["ours"][1] for k in ("error", "error_cause", "resolution") if k in s["by_kind"])
        for row in run["files"]:
            assert row["target"] == max(3000, int(run["ratio"] * row["tokens"]))
            for m in ("truncate", "mask"):
                assert row["methods"][m]["fits_target"]  # the baselines always fit
                assert row["methods"][m]["tokens"] <= row["target"]
            assert isinstance(row["left_out"], dict)
    json.dumps(report)  # --json prints it as is


def test_a_view_that_drops_a_fact_is_graded_as_missing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in engine whose summary names every fact but one kind recalls all but those."""
    import compactor.engine.compact as engine

    evs = with_tokens(claude_session(0))

    def stub(events, policy, target_tokens=None, **kw):
        text = "\n".join(f.key for f in extract_facts(events) if f.kind != "error_cause")
        summary = Event(seq=0, id="s", kind="compaction", role="user", blocks=[TextBlock(text=text)])
        return _Res([e for e in events if e.kind == "pinned"] + [summary])

    monkeypatch.setattr(engine, "compact", stub)
    row = evaluate(evs, ratio=0.15, name="t")
    ours = row["methods"]["ours"]
    n_cause = ours["by_kind"]["error_cause"][1]
    assert ours["by_kind"]["error_cause"] == [0, n_cause] and n_cause > 0
    assert {m["kind"] for m in ours["missed"]} >= {"error_cause"}
    assert summarize([row])["by_category"]["errors"]["ours"]["recall"] < 1.0


def test_left_out_reads_the_record_or_the_summary_notes() -> None:
    class Rec:
        left_out = {"errors": 3, "files read": 0}

    assert left_out(Rec(), []) == {"errors": 3}
    note = user(1, "## Errors\n- a\n- (4 more not shown for space; they are in the full log)\n\n"
                   "(Not shown for space, in the full log: files read 34, commands run 2.)")
    assert left_out(object(), [note]) == {"(more not shown)": 4, "files read": 34, "commands run": 2}


def test_constants_and_data_files_the_agent_wrote_are_facts() -> None:
    from compactor.bench.facts import extract_facts, recalled
    from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock

    code = 'MAX_RETRIES = 5\nAPI_URL = "https://x.test/v1"\ndf = load("data/iot.csv")\nx = 3\n'
    evs = [
        Event(seq=1, id="u", role="user", blocks=[TextBlock(text="write the loader")]),
        Event(seq=2, id="a", role="assistant", blocks=[
            ToolUseBlock(id="t1", name="Write", input={"file_path": "load.py", "content": code})]),
        Event(seq=3, id="r", role="user", blocks=[ToolResultBlock(tool_use_id="t1", content=[TextBlock(text="ok")])]),
    ]
    facts = {f.key: f for f in extract_facts(evs) if f.kind in ("constant", "data_file")}
    assert set(facts) == {"MAX_RETRIES = 5", "API_URL = https://x.test/v1", "data/iot.csv"}
    c = facts["MAX_RETRIES = 5"]
    assert recalled(c, "load.py holds: MAX_RETRIES = 5 · def load()")
    assert not recalled(c, "MAX_RETRIES is set in load.py") and not recalled(c, "retries: 5")
