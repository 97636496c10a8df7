"""``compactor bench constraints``: precision and recall of the constraint classifier.

The labelled set is in ``tests/fixtures/constraints/``:

- ``synthetic.json``: user messages written for this bench (pasted linter, compiler, CI,
  wallet/UI and API error text, tracebacks, questions, statements, long wrapped requests and
  genuine rules), each with the sentences that must become constraints;
- ``holdout.json``: more of the same, written after the classifier was tuned on the first
  file and never used to tune it (its score is the honest one for unseen pastes);
- ``corpus.json``: the user messages of ``../shared/corpus``, referenced by transcript, seq and
  a hash of the text (no corpus text is stored), each with the hashes of the sentences that
  must become constraints. Skipped when the corpus is not there.

A predicted constraint is right when it is one of the labelled sentences (whitespace-
normalized). Precision = right / predicted, recall = right / labelled, over all messages.
The bench also times the classification (``is_genuine_request`` on every event,
``constraint_sentences`` and ``user_urls`` on each request, ``split_sentences`` on assistant
text: what the lifter runs per event) over the corpus events and ``--events`` generated ones.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from compactor.events import Event
from compactor.lifting.constraints import (
    constraint_sentences,
    is_genuine_request,
    split_sentences,
    user_urls,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "constraints"
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus"
TARGET_PRECISION = 0.95
TARGET_RECALL = 0.90


def text_hash(text: str) -> str:
    """The label key of a text: sha256 (first 16 hex) of its whitespace-normalized form."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:16]


class LabelError(ValueError):
    """The labelled set does not match the corpus it references."""


def _load(name: str, fixtures: Path) -> list[dict[str, Any]]:
    return json.loads((fixtures / name).read_text(encoding="utf-8"))["messages"]


def synthetic_cases(fixtures: Path = FIXTURES, name: str = "synthetic.json") -> list[tuple[str, str, set[str]]]:
    """(id, text, expected keys) of the synthetic messages (``holdout.json``: the held-out ones)."""
    return [(m["id"], m["text"], {text_hash(c) for c in m["constraints"]})
            for m in _load(name, fixtures)]


def corpus_cases(corpus: Path, fixtures: Path = FIXTURES) -> list[tuple[str, str, set[str]]]:
    """(transcript#seq, text, expected keys) of the labelled corpus messages.

    Raises LabelError when a referenced message is missing or its text changed.
    """
    from compactor.importers import import_file

    labels = _load("corpus.json", fixtures)
    by_file: dict[str, dict[int, Event]] = {}
    out: list[tuple[str, str, set[str]]] = []
    for m in labels:
        rel = m["transcript"]
        if rel not in by_file:
            by_file[rel] = {e.seq: e for e in import_file(corpus / rel).events}
        e = by_file[rel].get(m["seq"])
        ref = f"{rel}#{m['seq']}"
        if e is None or text_hash(e.text) != m["sha256"]:
            raise LabelError(f"labelled message {ref} is not in the corpus as labelled")
        out.append((ref, e.text, set(m["constraints"])))
    return out


def score(cases: list[tuple[str, str, set[str]]]) -> dict[str, Any]:
    """Precision/recall of ``constraint_sentences`` on ``cases``, with the misclassified items."""
    predicted = right = labelled = 0
    wrong: list[dict[str, str]] = []
    missed: list[dict[str, str]] = []
    for ref, text, expected in cases:
        got = {text_hash(s): s for s in constraint_sentences(text)}
        predicted += len(got)
        labelled += len(expected)
        right += len(expected & got.keys())
        wrong += [{"message": ref, "sentence": s} for k, s in got.items() if k not in expected]
        missed += [{"message": ref, "key": k} for k in sorted(expected - got.keys())]
    return {
        "messages": len(cases), "labelled": labelled, "predicted": predicted, "right": right,
        "precision": right / predicted if predicted else 1.0,
        "recall": right / labelled if labelled else 1.0,
        "false_constraints": wrong, "missed": missed,
    }


def classification_cost(events: list[Event], repeat: int = 5) -> dict[str, float]:
    """Best-of-``repeat`` CPU time of what the lifter's text rules run per event, in microseconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for e in events:
            if e.kind != "message":
                continue
            if is_genuine_request(e):
                text = e.text
                constraint_sentences(text)
                user_urls(text)
            elif e.role == "assistant":
                text = e.text
                if text:
                    split_sentences(text)
        best = min(best, time.process_time() - t0)
    return {"events": len(events), "us_per_event": best * 1e6 / max(1, len(events))}


def measure(corpus: Path | None, fixtures: Path = FIXTURES, gen_events: int = 10_000) -> dict[str, Any]:
    parts: dict[str, Any] = {}
    cases = synthetic_cases(fixtures)
    parts["synthetic"] = score(cases)
    all_cases = list(cases)
    if (fixtures / "holdout.json").is_file():
        held = synthetic_cases(fixtures, "holdout.json")
        parts["holdout"] = score(held)
        all_cases += held
    corpus_events: list[Event] = []
    if corpus is not None and corpus.is_dir():
        ccases = corpus_cases(corpus, fixtures)
        parts["corpus"] = score(ccases)
        all_cases += ccases
        from compactor.importers import import_file

        for rel in sorted({m["transcript"] for m in _load("corpus.json", fixtures)}):
            corpus_events += import_file(corpus / rel).events
    parts["all"] = score(all_cases)
    cost: dict[str, Any] = {}
    if corpus_events:
        cost["corpus"] = classification_cost(corpus_events)
    if gen_events:
        from compactor.bench.perf import turns

        cost["generated"] = classification_cost(turns(max(1, gen_events // 2 - 2)))
    return {"parts": parts, "cost": cost,
            "targets": {"precision": TARGET_PRECISION, "recall": TARGET_RECALL}}


def report(r: dict[str, Any]) -> str:
    lines = ["part        messages  labelled  predicted  right  precision  recall"]
    for name, p in r["parts"].items():
        lines.append(f"{name:<11} {p['messages']:>8}  {p['labelled']:>8}  {p['predicted']:>9}  "
                     f"{p['right']:>5}  {p['precision']:>9.3f}  {p['recall']:>6.3f}")
    a = r["parts"]["all"]
    ok = a["precision"] >= TARGET_PRECISION and a["recall"] >= TARGET_RECALL
    lines.append(f"targets: precision >= {TARGET_PRECISION}, recall >= {TARGET_RECALL}: "
                 + ("met" if ok else "NOT met"))
    for w in a["false_constraints"]:
        lines.append(f"  false constraint in {w['message']}: {w['sentence'][:100]}")
    for m in a["missed"]:
        lines.append(f"  missed in {m['message']}: labelled sentence {m['key']}")
    for name, c in r["cost"].items():
        lines.append(f"cost ({name}, {c['events']} events): {c['us_per_event']:.2f} us per event")
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("constraints", help="precision/recall of constraint classification on the labelled set")
    p.add_argument("--corpus", default=str(DEFAULT_CORPUS), metavar="DIR",
                   help="the corpus the labels reference (default ../shared/corpus; skipped if absent)")
    p.add_argument("--fixtures", default=str(FIXTURES), metavar="DIR", help="the labelled set")
    p.add_argument("--events", type=int, default=10_000, metavar="N",
                   help="also time the classification on N generated events (0: none)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    fixtures = Path(args.fixtures)
    if not (fixtures / "synthetic.json").is_file():
        print(f"compactor bench constraints: no labelled set in {fixtures}", file=sys.stderr)
        return 2
    corpus = Path(args.corpus)
    try:
        r = measure(corpus if corpus.is_dir() else None, fixtures, args.events)
    except LabelError as exc:
        print(f"compactor bench constraints: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(r, indent=2) if args.json else report(r))
    a = r["parts"]["all"]
    return 0 if a["precision"] >= TARGET_PRECISION and a["recall"] >= TARGET_RECALL else 1
