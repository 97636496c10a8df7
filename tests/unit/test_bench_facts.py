"""The fidelity benchmark's independent fact extractor, its baselines and its grading."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest

from compactor.bench import facts as facts_mod
from compactor.bench.facts import Fact, extract_facts, recall, recalled, view_haystack
from compactor.bench.fidelity import MASK_PLACEHOLDER, evaluate, mask_view, register, summarize, truncate_view
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
        user(15, "Now only update the README."),
        assistant(16, "", (("u7", "Bash", {"command": "make release"}),)),
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


def test_facts_do_not_use_lift() -> None:
    """The grader must not share code with the engine it grades."""
    tree = ast.parse(Path(facts_mod.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and (m.startswith("compactor.lift") or m.startswith("compactor.summary")
                          or m.startswith("compactor.engine")) for m in imported)


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
    assert view[-1].seq == 16


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
    import compactor.engine as engine

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
    import compactor.engine as engine

    monkeypatch.setattr(engine, "compact", lambda events, policy, target_tokens=None, **kw: _Res(list(events)))
    row = evaluate(padded(), ratio=0.01, min_target=600, name="t")
    ours = row["methods"]["ours"]
    assert ours["over_budget"] and ours["recall_unbounded"] == 1.0
    assert ours["recall"] == row["methods"]["truncate"]["recall"] < 1.0
    assert "t (ours)" in summarize([row])["over_budget"]


def test_failed_compaction_counts_as_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    import compactor.engine as engine

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
    """The benchmark's headline: ours >= 0.95 mean recall, truncation far below."""
    pytest.importorskip("compactor.engine")
    _import(CORPUS[0])
    p = argparse.ArgumentParser()
    register(p.add_subparsers())
    plot = tmp_path / "fid.png"
    args = p.parse_args(["fidelity", str(corpus_dir), "--json", "--plot", str(plot)])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    s = out["summary"]
    assert s["ours"]["mean_recall"] >= 0.95
    assert s["truncate"]["mean_recall"] <= s["ours"]["mean_recall"] - 0.3
    assert not s["failed"]
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
    _plot([{"file": "a/b", "methods": {"ours": {"recall": 1.0}}}], str(out))
    assert not out.exists()
    assert "matplotlib" in capsys.readouterr().err
