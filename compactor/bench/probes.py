"""``compactor bench probes``: can the next turn act on a compacted view?

Lexical recall (``bench fidelity``) says whether names survived a compaction; probes say
whether an agent holding only the view can answer what it needs to continue. The protocol is
``../shared/probes`` (README, writer, reader, judge):

- a fixed **probe file** per transcript, ``tests/probes/<stem>.json`` (stem = the transcript's
  file name up to its first dot): 12 questions over goal, artifacts, errors, decisions and
  state, each with a reference answer and a verbatim evidence quote, written once from the
  full transcript and never about its last quarter;
- per view (``ours`` = ``compactor.engine.compact.compact``, ``truncate`` = newest events that fit,
  both at ``fidelity.target_for``'s target), one **reader** call that sees that view only and
  answers every question or says "not in context";
- per transcript, one **judge** call that grades every view's answers at once, 2/1/0/-1
  against the references, under neutral letters shuffled deterministically by transcript name,
  so the judge cannot favour a method by its name or its place.

Why it is shaped this way:

* Everything the models see is inline in the request (no file paths), views rendered by
  ``probe_text`` exactly as the writer saw the full transcript; session text is quoted data
  inside ``untrusted_data`` fences, as in the summarizer's prompt.
* Replies are JSON, parsed leniently (a ```json fence or prose around the object is fine).
  A reply that still does not parse is asked once more; after that its questions count 0 and
  the report says so, rather than the run dying on one bad reply.
* The client is the real ``anthropic.Anthropic`` with the SDK's own retries on (a benchmark
  has no Temporal to retry for it) and a long timeout, since one reader call carries a whole
  view. Calls are sequential: a run is a few dozen calls, and progress goes to stderr.
* Views whose text is identical (a transcript that fits its target) are read once; the judge
  still grades every label.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from pydantic import ValidationError

from compactor.bench.fidelity import _expand, _ours, target_for, truncate_view
from compactor.bench.probe_protocol import (
    GRADES,
    JUDGE_SYSTEM,
    READER_SYSTEM,
    ProbeFile,
    ProbeQuestion,
    as_int,
    is_not_in_context,
    judge_message,
    neutral_labels,
    parse_answers,
    parse_grades,
    parse_json_reply,
    reader_message,
)
from compactor.bench.probe_text import probe_text
from compactor.errors import CompactorError, InvalidInput
from compactor.events import Event
from compactor.engine.measure import view_tokens
from compactor.tokens import with_tokens

CATEGORIES = ("goal", "artifact", "error", "decision", "state")
METHODS = ("ours", "truncate")
DEFAULT_RATIO = 0.05
DEFAULT_MIN_TARGET = 3_000
DEFAULT_PROBES_DIR = "tests/probes"
DEFAULT_CORPUS = "../shared/corpus"
PROJECT = Path(__file__).resolve().parents[2]


def project_default(value: str, default: str) -> str:
    """A path option left at its default, found from the project's root when the working
    directory is elsewhere (the defaults are written relative to the project's root)."""
    if value == default and not Path(value).exists():
        return os.path.normpath(PROJECT / value)
    return value


DEFAULT_MODEL = "claude-sonnet-5-5"
"""Reader and judge unless --model (or COMPACTOR_ANTHROPIC_MODEL) says otherwise."""
READER_MAX_TOKENS = 4_096
JUDGE_MAX_TOKENS = 8_192
TIMEOUT_S = 300.0
"""Per request: a reader call carries a whole view and writes 12 answers."""
MAX_RETRIES = 4
"""SDK retries (408/409/429/5xx, honouring retry-after); nothing else retries a bench call."""

NO_KEY = ("bench probes calls the Messages API: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL "
          "for another endpoint, e.g. a local test server)")


def stem_of(path: Path | str) -> str:
    """A transcript's probe-file stem: its file name up to the first dot."""
    return Path(path).name.split(".")[0]


def load_probe_dir(directory: Path) -> dict[str, ProbeFile]:
    """Every ``*.json`` probe file in ``directory`` by stem; a bad file is an ``InvalidInput``."""
    files = sorted(directory.glob("*.json")) if directory.is_dir() else []
    if not files:
        raise InvalidInput(f"no probe files in {directory}: write them per ../shared/probes/writer.md "
                           "or pass --probes DIR")
    out: dict[str, ProbeFile] = {}
    for p in files:
        try:
            out[p.stem] = ProbeFile.model_validate_json(p.read_bytes())
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise InvalidInput(f"{p}: not a probe file ({where}: {first['msg']})") from None
    return out


@dataclass(frozen=True)
class Job:
    """One transcript with its probe file."""

    stem: str
    path: Path
    probes: ProbeFile


def find_jobs(paths: Sequence[str], probes: dict[str, ProbeFile]) -> tuple[list[Job], list[str]]:
    """Pair transcripts (files, or corpus dirs searched by the probe's path) with probe files.

    Returns the jobs in probe-stem order and notes about what was skipped.
    """
    jobs: dict[str, Job] = {}
    notes: list[str] = []
    for s in paths:
        p = Path(s)
        if p.is_dir():
            for stem, pf in probes.items():
                hit = p / pf.transcript
                if not hit.is_file():
                    hit = next((f for f in _expand([s]) if stem_of(f) == stem), None)
                if hit is not None:
                    jobs.setdefault(stem, Job(stem, hit, pf))
        elif stem_of(p) in probes:
            jobs.setdefault(stem_of(p), Job(stem_of(p), p, probes[stem_of(p)]))
        else:
            notes.append(f"{p}: no probe file {stem_of(p)}.json, skipped")
    if any(Path(s).is_dir() for s in paths):
        notes.extend(f"probe file {stem}.json: transcript {pf.transcript} not found, skipped"
                     for stem, pf in probes.items() if stem not in jobs)
    return [jobs[k] for k in sorted(jobs)], notes


# --- views -------------------------------------------------------------------------------------


@dataclass
class View:
    """One view of a transcript as the reader will see it."""

    label: str
    method: str
    ratio: float
    target: int
    tokens: int = 0
    over_budget: bool = False
    text: str = ""
    error: str | None = None


def build_views(events: Sequence[Event], methods: Sequence[str], ratios: Sequence[float],
                min_target: int, policy: str) -> list[View]:
    """The views to probe, labelled ``method`` (one ratio) or ``method@ratio``."""
    evs = with_tokens(events)
    tokens = view_tokens(evs)
    out: list[View] = []
    for ratio in ratios:
        target = target_for(tokens, ratio, min_target)
        for m in methods:
            label = m if len(ratios) == 1 else f"{m}@{ratio:g}"
            v = View(label=label, method=m, ratio=ratio, target=target)
            try:
                view = _ours(evs, target, policy)["view"] if m == "ours" else truncate_view(evs, target)
            except Exception as exc:  # noqa: BLE001 - reported per view, the run goes on
                v.error = f"{type(exc).__name__}: {exc}"
                out.append(v)
                continue
            v.tokens = view_tokens(view)
            v.over_budget = v.tokens > target
            if v.over_budget:
                # as in bench fidelity: a request at this budget carries only what fits
                view = truncate_view(view, target)
            v.text = probe_text(view)
            out.append(v)
    return out


# --- the Messages API --------------------------------------------------------------------------


def make_client(base_url: str | None = None) -> Any:
    """A sync ``anthropic.Anthropic`` for the bench, or ``InvalidInput`` naming what is missing."""
    key = os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        raise InvalidInput(NO_KEY)
    import anthropic

    return anthropic.Anthropic(api_key=key, base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
                               max_retries=MAX_RETRIES, timeout=TIMEOUT_S)


class ProviderFailed(CompactorError):
    """A Messages API call failed after the SDK's retries (bad key, endpoint down, ...)."""

    code = "provider_failed"


@dataclass
class Reply:
    """A parsed model reply, or ``None`` after two unparsable ones (raw texts kept)."""

    value: Any
    raw: list[str] = field(default_factory=list)


class Judgement:
    """Reader and judge calls through one client."""

    def __init__(self, client: Any, reader_model: str, judge_model: str) -> None:
        self.client = client
        self.reader_model = reader_model
        self.judge_model = judge_model

    def _text(self, model: str, system: str, user: str, max_tokens: int) -> str:
        import anthropic

        try:
            msg = self.client.messages.create(
                model=model, max_tokens=max_tokens, system=system,
                messages=[{"role": "user", "content": user}])
        except anthropic.APIStatusError as exc:
            raise ProviderFailed(f"Messages API answered {exc.status_code} ({_api_message(exc)}); "
                                 "check ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL and --model") from None
        except anthropic.APIError as exc:
            raise ProviderFailed(f"Messages API call failed: {type(exc).__name__}: {exc}; check "
                                 "ANTHROPIC_BASE_URL and the network") from None
        return "".join(getattr(b, "text", "") for b in msg.content)

    def _ask(self, model: str, system: str, user: str, max_tokens: int, parse: Any) -> Reply:
        raw: list[str] = []
        for _ in range(2):  # a malformed reply is asked once more, then given up
            raw.append(self._text(model, system, user, max_tokens))
            value = parse(parse_json_reply(raw[-1]))
            if value is not None:
                return Reply(value, raw)
        return Reply(None, raw)

    def read(self, view_text: str, questions: Sequence[ProbeQuestion]) -> Reply:
        """One reader call: {question id: answer}, or ``None`` after two malformed replies."""
        return self._ask(self.reader_model, READER_SYSTEM, reader_message(view_text, questions),
                         READER_MAX_TOKENS, parse_answers)

    def judge(self, questions: Sequence[ProbeQuestion], answers: dict[str, dict[int, str]]) -> Reply:
        """One judge call over every label's answers: {question id: grade row}, or ``None``."""
        return self._ask(self.judge_model, JUDGE_SYSTEM, judge_message(questions, answers),
                         JUDGE_MAX_TOKENS, parse_grades)


def _api_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message") or "")[:200]
    return str(exc)[:200]


# --- one transcript ----------------------------------------------------------------------------


def _grade(row: dict[str, Any] | None, letter: str) -> int | None:
    g = as_int((row or {}).get(letter))
    return g if g in GRADES else None


def evaluate(job: Job, events: Sequence[Event], judgement: Judgement, *, methods: Sequence[str],
             ratios: Sequence[float], min_target: int, policy: str = "default",
             progress: Any = None) -> dict[str, Any]:
    """Views, reader answers and judge grades for one transcript; a JSON-safe dict.

    Each view's cell keeps its rendered ``text`` for ``--out``; the caller drops it.
    """
    say = progress or (lambda _msg: None)
    questions = job.probes.questions
    row: dict[str, Any] = {"name": job.stem, "transcript": job.probes.transcript,
                           "tokens": view_tokens(with_tokens(events)),
                           "questions": [q.model_dump() for q in questions], "views": {}}
    answers: dict[str, dict[int, str]] = {}
    read_by_text: dict[str, Reply] = {}
    for v in build_views(events, methods, ratios, min_target, policy):
        cell = row["views"][v.label] = {"method": v.method, "ratio": v.ratio, "target": v.target,
                                        "tokens": v.tokens, "over_budget": v.over_budget,
                                        "text": v.text}
        if v.error:
            cell.update(error=v.error, answers={}, reader_failed=True)
            say(f"{v.label}: compaction failed ({v.error}); its questions count 0")
            continue
        key = hashlib.sha256(v.text.encode()).hexdigest()
        reused = key in read_by_text
        if not reused:
            read_by_text[key] = judgement.read(v.text, questions)
        reply = read_by_text[key]
        got = reply.value or {}
        answers[v.label] = {q.id: got.get(q.id, "") for q in questions}
        cell.update(answers={str(k): a for k, a in answers[v.label].items()},
                    reader_failed=reply.value is None, reader_raw=reply.raw)
        say(_read_line(v, cell, reused))
    _judge_into(row, job.stem, questions, answers, judgement, say)
    return row


def _read_line(v: View, cell: dict[str, Any], reused: bool) -> str:
    head = (f"{v.label}: view {v.tokens:,} tokens (target {v.target:,}"
            + (", over: graded on what fits" if v.over_budget else "") + ") -> ")
    if cell["reader_failed"]:
        return head + "reader reply malformed twice: its questions count 0"
    given = [a for a in cell["answers"].values() if a]
    nic = sum(is_not_in_context(a) for a in given)
    return head + f"{len(given)} answers, {nic} not in context" + (" (same text as an earlier view)" * reused)


def _judge_into(row: dict[str, Any], name: str, questions: Sequence[ProbeQuestion],
                answers: dict[str, dict[int, str]], judgement: Judgement, say: Any) -> None:
    """One judge call for every view that has answers; grades and tallies into ``row``."""
    letters = neutral_labels(name, list(answers))
    to_judge = {lt: {qid: a or "(no answer)" for qid, a in answers[lab].items()} for lt, lab in letters.items()}
    reply = judgement.judge(questions, to_judge) if to_judge else Reply({}, [])
    grades = reply.value or {}
    row["judge"] = {"labels": letters, "failed": reply.value is None, "raw": reply.raw}
    by_label = {lab: lt for lt, lab in letters.items()}
    for label, cell in row["views"].items():
        cell["grades"] = {}
        for q in questions:
            cell["grades"][str(q.id)] = _one_grade(cell, q, grades, by_label.get(label), reply.value is None)
        cell.update(_tally(cell, questions))
    say("judge: " + ("reply malformed twice: every question counts 0" if reply.value is None else
                     ", ".join(f"{lab} {c['points']}/{c['max']}" for lab, c in row["views"].items())))


def _one_grade(cell: dict[str, Any], q: ProbeQuestion, grades: dict[int, dict[str, Any]],
               letter: str | None, judge_failed: bool) -> dict[str, Any]:
    answer = cell["answers"].get(str(q.id), "")
    if cell.get("error"):
        return {"grade": 0, "note": "compaction failed"}
    if cell.get("reader_failed"):
        return {"grade": 0, "note": "reader reply malformed twice"}
    if not answer:
        return {"grade": 0, "note": "reader gave no answer"}
    if judge_failed:
        return {"grade": 0, "note": "judge reply malformed twice", "ungraded": True}
    g = _grade(grades.get(q.id), letter or "")
    if g is None:
        return {"grade": 0, "note": "judge gave no valid grade", "ungraded": True}
    return {"grade": g, "note": str((grades.get(q.id) or {}).get("note") or "")}


def _tally(cell: dict[str, Any], questions: Sequence[ProbeQuestion]) -> dict[str, Any]:
    by_cat = {c: [0, 0] for c in CATEGORIES}
    for q in questions:
        by_cat[q.category][0] += cell["grades"][str(q.id)]["grade"]
        by_cat[q.category][1] += 2
    gs = list(cell["grades"].values())
    return {
        "points": sum(g["grade"] for g in gs),
        "max": 2 * len(questions),
        "by_category": {c: v for c, v in by_cat.items() if v[1]},
        "not_in_context": sum(is_not_in_context(a) for a in cell["answers"].values()),
        "wrong": sum(g["grade"] == -1 for g in gs),
        "ungraded": sum(bool(g.get("ungraded")) or g["note"].startswith(("reader", "compaction"))
                        for g in gs),
    }


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Totals per view label over transcripts: points, max, per category, counts."""
    out: dict[str, Any] = {}
    for r in rows:
        for label, c in r["views"].items():
            s = out.setdefault(label, {"points": 0, "max": 0, "not_in_context": 0, "wrong": 0,
                                       "ungraded": 0, "transcripts": 0, "tokens": 0,
                                       "by_category": {}})
            for k in ("points", "max", "not_in_context", "wrong", "ungraded", "tokens"):
                s[k] += c[k]
            s["transcripts"] += 1
            for cat, (p, m) in c["by_category"].items():
                cell = s["by_category"].setdefault(cat, [0, 0])
                cell[0] += p
                cell[1] += m
    for s in out.values():
        s["share"] = round(s["points"] / s["max"], 4) if s["max"] else None
        s["by_category"] = {c: s["by_category"][c] for c in CATEGORIES if c in s["by_category"]}
    return out


# --- report ------------------------------------------------------------------------------------


def render_report(result: dict[str, Any]) -> str:
    """The plain-text report (format documented in docs/bench-probes.md)."""
    from compactor.cli.common import table

    rows, summary = result["transcripts"], result["summary"]
    labels = list(summary)
    lines = [f"probes: {len(rows)} transcript(s); reader {result['reader_model']}, judge "
             f"{result['judge_model']}; target = max({result['min_target']:,}, ratio x tokens), "
             f"ratio {', '.join(f'{r:g}' for r in result['ratios'])}", ""]
    body = [[r["name"], f"{r['tokens']:,}", len(r["questions"]),
             *(_pts(r["views"].get(lab)) for lab in labels)] for r in rows]
    body.append(["total", "", sum(len(r["questions"]) for r in rows),
                 *(f"{summary[lab]['points']}/{summary[lab]['max']}" for lab in labels)])
    lines += [table(body, ["transcript", "tokens", "questions", *labels]), ""]
    cats = [c for c in CATEGORIES if any(c in summary[lab]["by_category"] for lab in labels)]
    cat_rows = [[c, sum(q["category"] == c for r in rows for q in r["questions"]),
                 *(_pair(summary[lab]["by_category"].get(c)) for lab in labels)] for c in cats]
    lines += [table(cat_rows, ["category", "questions", *labels]), ""]
    view_rows = [[lab, s["points"], s["max"], f"{s['share']:.2f}" if s["share"] is not None else "-",
                  f"{s['tokens'] // max(1, s['transcripts']):,}", s["not_in_context"], s["wrong"], s["ungraded"]]
                 for lab, s in summary.items()]
    lines.append(table(view_rows, ["view", "points", "max", "share", "mean tokens", "not in context",
                                   "wrong (-1)", "ungraded"]))
    lines += _notes(result)
    return "\n".join(lines)


def _pts(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "-"
    return f"{cell['points']}/{cell['max']}" + ("*" if cell.get("over_budget") else "")


def _pair(cell: Sequence[int] | None) -> str:
    return f"{cell[0]}/{cell[1]}" if cell else "-"


def _notes(result: dict[str, Any]) -> list[str]:
    notes: list[str] = []
    for r in result["transcripts"]:
        for lab, c in r["views"].items():
            if c.get("error"):
                notes.append(f"{r['name']} {lab}: compaction failed ({c['error']}): counted 0")
            elif c.get("reader_failed"):
                notes.append(f"{r['name']} {lab}: reader reply malformed twice: counted 0")
        if r["judge"]["failed"]:
            notes.append(f"{r['name']}: judge reply malformed twice: every answer counted 0")
    if any(c.get("over_budget") for r in result["transcripts"] for c in r["views"].values()):
        notes.append("* view over its target: the reader saw what fits (pinned + newest events)")
    notes += result.get("skipped", [])
    return ([""] + notes) if notes else []


# --- CLI ---------------------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("probes", help="blind reader/judge probes over compacted views (Messages API)")
    p.add_argument("files", nargs="*", metavar="PATH",
                   help="corpus directory or transcript files (default $COMPACTOR_CORPUS or "
                        f"{DEFAULT_CORPUS})")
    p.add_argument("--probes", default=DEFAULT_PROBES_DIR, metavar="DIR",
                   help="probe files <stem>.json (default %(default)s)")
    p.add_argument("--ratio", action="append", metavar="R",
                   help=f"target = max(--min-target, R x tokens); repeat or comma-separate for "
                        f"several (default {DEFAULT_RATIO})")
    p.add_argument("--min-target", type=int, default=DEFAULT_MIN_TARGET, help="(default %(default)s)")
    p.add_argument("--views", default=",".join(METHODS),
                   help=f"comma-separated, from {', '.join(METHODS)} (default %(default)s)")
    p.add_argument("--policy", default="default", help="policy preset for ours (default %(default)s)")
    p.add_argument("--model", default=os.environ.get("COMPACTOR_ANTHROPIC_MODEL") or DEFAULT_MODEL,
                   help="model for reader and judge (default %(default)s)")
    p.add_argument("--reader-model", help="reader model (default --model)")
    p.add_argument("--judge-model", help="judge model (default --model)")
    p.add_argument("--base-url", help="Messages API endpoint (default $ANTHROPIC_BASE_URL)")
    p.add_argument("--json", action="store_true", help="print the full result (questions, answers, grades)")
    p.add_argument("--out", metavar="DIR", help="write views, answers, grades and result.json here")
    p.set_defaults(func=run)


def _ratios(values: Sequence[str] | None) -> list[float]:
    out: list[float] = []
    for v in values or [str(DEFAULT_RATIO)]:
        for part in v.split(","):
            try:
                r = float(part)
            except ValueError:
                raise InvalidInput(f"--ratio {part!r} is not a number (e.g. --ratio 0.05)") from None
            if not 0 < r <= 1:
                raise InvalidInput(f"--ratio {part} must be in (0, 1]")
            out.append(r)
    return list(dict.fromkeys(out))


def _methods(spec: str) -> list[str]:
    ms = [m.strip() for m in spec.split(",") if m.strip()]
    bad = [m for m in ms if m not in METHODS]
    if bad or not ms:
        raise InvalidInput(f"--views {spec!r}: choose from {', '.join(METHODS)}")
    return list(dict.fromkeys(ms))


def run(args: argparse.Namespace) -> int:
    from compactor.importers import import_file

    ratios, methods = _ratios(args.ratio), _methods(args.views)
    client = make_client(args.base_url)  # first: no key, no work
    probes = load_probe_dir(Path(project_default(args.probes, DEFAULT_PROBES_DIR)))
    corpus = os.environ.get("COMPACTOR_CORPUS") or project_default(DEFAULT_CORPUS, DEFAULT_CORPUS)
    jobs, skipped = find_jobs(args.files or [corpus], probes)
    if not jobs:
        raise InvalidInput(f"no transcript matches a probe file in {args.probes} "
                           "(pass the corpus dir or the transcript files)")
    judgement = Judgement(client, args.reader_model or args.model, args.judge_model or args.model)
    out_dir = Path(args.out) if args.out else None
    rows = []
    for n, job in enumerate(jobs, 1):
        events = with_tokens(import_file(job.path).events)  # counted once for the three uses
        prefix = f"probes [{n}/{len(jobs)}] {job.stem}"
        print(f"{prefix}: {view_tokens(events):,} tokens, {len(job.probes.questions)} questions",
              file=sys.stderr, flush=True)
        row = evaluate(job, events, judgement, methods=methods, ratios=ratios, min_target=args.min_target,
                       policy=args.policy,
                       progress=lambda msg, p=prefix: print(f"{p} {msg}", file=sys.stderr, flush=True))
        if out_dir is not None:
            _write_transcript(out_dir, row)
        for cell in row["views"].values():
            cell.pop("text", None)  # in --out, not in the result: views are long
        rows.append(row)
    result = {"reader_model": judgement.reader_model, "judge_model": judgement.judge_model,
              "ratios": ratios, "min_target": args.min_target, "views": methods,
              "transcripts": rows, "summary": summarize(rows), "skipped": skipped}
    if out_dir is not None:
        (out_dir / "result.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print(render_report(result))
    return 0


def _write_transcript(out_dir: Path, row: dict[str, Any]) -> None:
    """Per transcript: each view's text, answers and grades, and the judge's letters."""
    d = out_dir / row["name"]
    d.mkdir(parents=True, exist_ok=True)
    for label, cell in row["views"].items():
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", label)
        (d / f"{safe}.view.txt").write_text(cell.get("text", ""), encoding="utf-8")
        (d / f"{safe}.json").write_text(json.dumps(cell, indent=2, ensure_ascii=False), encoding="utf-8")
    (d / "judge.json").write_text(json.dumps(row["judge"], indent=2, ensure_ascii=False), encoding="utf-8")
