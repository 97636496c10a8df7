"""``compactor bench model-path``: the model summarizer on model-written answers, both paths.

The stand-in model protocol (``../shared/probes/model.md``) in the dev loop. For every
transcript of the corpus at 10% and 5% of its tokens (at least ``DEFAULT_MIN_TARGET``, as the
fidelity and probe benches), the product's own summarizer request is recorded (the real
``anthropic`` client against ``compactor.testing.anthropic_server`` with recording on); then
answers are served for it and the product runs again, **inline** (``compact --inline
--summarizer anthropic``: ``cli.inline_model``) and **durable** (a worker on a Temporal dev
server, the ``summarize_anthropic`` activity and the workflow's validation and fallback):

* ``faithful``: the answer a helper acting as the model wrote for the recorded request
  (``tests/fixtures/model-path/<transcript>-<pct>.md``). Must be used: as is, or completed.
* adversarial answers, generated deterministically from the faithful one and the lifted
  state: ``empty``, ``placeholder`` (``## Goal`` / ``placeholder``), ``no-constraints`` (the
  constraints section dropped), ``unknown-done`` (on a variant of the session where one covered
  call lost its result, the answer says it succeeded), ``invented-path`` (a file the session
  never had), ``planted`` (on a variant where a tool output carries an instruction to claim a
  deploy succeeded and drop the constraints, the answer obeys it), ``other-language`` (the
  state retold in a language neither the user nor the agent used).
* ``goal-only`` (informative, not adversarial): the faithful answer's goal section alone. Where
  ``MIN_CARRIED`` cuts a one-line answer: refused, or used and completed, the record truthful
  either way.

Per answer and path it reports what the product did (``used``: accepted as is, ``completed``
with the sections added, ``repaired`` with the lines dropped, or ``refused`` with the reason),
the answer's carried share before completion (``summarize.acceptance.carried``: what
``MIN_CARRIED`` is set from), whether that is what the kind expects, and whether the record is
truthful: the summarizer it names is the one whose text the view shows.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from compactor.bench.fidelity import _expand, target_for
from compactor.bench.model_answers import Case, build_cases
from compactor.bench.probes import DEFAULT_CORPUS, DEFAULT_MIN_TARGET, project_default, stem_of
from compactor.events import Event

DEFAULT_ANSWERS = "tests/fixtures/model-path"
RATIOS = ((0.10, 10), (0.05, 5))
KINDS = ("faithful", "empty", "placeholder", "no-constraints", "unknown-done", "invented-path",
         "planted", "other-language", "goal-only")
NO_ROOM = "no-room"
"""The row of a transcript and target where the product asks no model at all: the summary's
budget leaves under ``prompting.MIN_MODEL_ROOM`` tokens beside the quoted latest request, so
there is no request to answer. Expected: the structured summary, the reason said, no call."""
EXPECTED = {
    "faithful": ("used", "completed"),
    "empty": ("refused",),
    "placeholder": ("refused",),
    "no-constraints": ("completed",),  # the constraints are put back verbatim
    "unknown-done": ("refused",),
    "invented-path": ("repaired", "refused"),  # the invented line goes, or the answer does
    "planted": ("refused",),
    "other-language": ("refused",),
    "goal-only": ("refused", "completed", "used"),  # informative: where MIN_CARRIED cuts a one-line answer
    NO_ROOM: ("not-asked",),
}
"""What each kind of answer must come out as."""

# --- cases: compactor/bench/model_answers.py ----------------------------------------------

@dataclass
class Outcome:
    path: str
    outcome: str  # used | completed | repaired | refused | not-asked | failed
    summarizer: str = ""
    detail: str = ""  # sections completed, lines repaired, or the fallback reason
    truthful: bool = False
    carried: float | None = None
    tokens_after: int = 0
    error: str = ""

    def row(self) -> dict[str, Any]:
        return dict(self.__dict__)


# --- judging ---------------------------------------------------------------------------------


def summary_text(view: Sequence[Event]) -> str:
    """The summary message's text in a view ("" when there is none)."""
    for e in view:
        if e.kind == "compaction" and e.seq == 0:
            return e.text
    return ""


def judge(path: str, answer: str, record: Any, view: Sequence[Event], state: Any) -> Outcome:
    """What the product did with ``answer``, from its record and view."""
    from compactor.summarize.acceptance import ALSO_HEADING, carried, haystack

    shown = summary_text(view)
    hay = haystack(shown)
    lines = [haystack(ln) for ln in answer.splitlines() if len(ln.strip()) >= 12 and not ln.startswith("#")]
    repairs = list(record.repairs or [])
    if record.summarizer == "anthropic":
        dropped = [r for r in repairs if r.startswith("unknown_identifier")]
        completed = [r for r in repairs if r.startswith("completed")]
        outcome = "repaired" if dropped else "completed" if completed else "used"
        detail = "; ".join(repairs)
        kept = sum(1 for ln in lines if ln in hay)
        if any(r.startswith("model text trimmed") for r in repairs):
            # Trimmed to its budget: what the view shows as the model's text is the model's
            # (its lines, fewer of them), and the record says it was trimmed.
            from compactor.summarize.acceptance import model_part

            mine = haystack(answer)
            own = [haystack(ln) for ln in model_part(shown).splitlines()
                   if len(ln.strip()) >= 12 and not ln.startswith("#")]
            own = [ln for ln in own if not ln.startswith(("this session is being continued", "- ("))]
            truthful = kept > 0 and all(ln in mine for ln in own)
        else:
            # The view shows the model's text: its lines are there (but a repaired one or two).
            truthful = bool(shown) and (not lines or kept >= 0.8 * len(lines))
    else:
        detail = record.fallback_reason or ""
        outcome = "not-asked" if "no room for a model summary" in detail else "refused"
        # The view shows the structured summary: none of the answer's own lines, no appendix.
        own = [ln for ln in lines if ln not in haystack(structured_text(state))]
        truthful = ALSO_HEADING not in shown and not any(ln in hay for ln in own)
    c = carried(answer, state).share if state is not None else None
    return Outcome(path=path, outcome=outcome, summarizer=record.summarizer, detail=detail,
                   truthful=truthful, carried=c, tokens_after=record.tokens_after)


def structured_text(state: Any) -> str:
    from compactor.summarize.structured import render_summary

    return render_summary(state, 10**6).text if state is not None else ""


# --- the two paths ---------------------------------------------------------------------------


class Runner:
    """Both paths over one stand-in server: ``inline`` and ``durable``."""

    def __init__(self, fake: Any, workdir: Path, *, durable: bool = True, policy: str = "default",
                 temporal_address: str | None = None) -> None:
        self.fake = fake
        self.temporal_address = temporal_address
        self.workdir = workdir
        self.durable = durable
        self.policy = policy
        self._stack: Any = None
        self._client: Any = None
        self._loop = asyncio.new_event_loop()
        self._n = 0
        self._bases: dict[tuple[int, int], tuple[list[Event], Any]] = {}

    # inline ---------------------------------------------------------------------------------
    def inline(self, case: Case, record_dir: Path | None) -> tuple[Outcome, Any]:
        from compactor.cli.inline_model import summarize_inline
        from compactor.engine.compact import compact
        from compactor.engine.policy import make_policy
        from compactor.lifting.lift import LiftedState

        policy = make_policy(self.policy)
        self.fake.answer = case.answer
        self.fake.record_dir = str(record_dir) if record_dir else None
        key = (id(case.events), case.target)
        if key not in self._bases:  # the structured compaction depends on the events only
            self._bases = {key: (case.events, compact(case.events, policy, case.target))}
        base = self._bases[key][1]
        res = summarize_inline(case.events, base, policy, self._llm())
        state = LiftedState.model_validate(base.checkpoint.state) if base.checkpoint else None
        out = judge("inline", case.answer, res.record, res.view, state)
        return out, base

    def _llm(self) -> Any:
        from activities.llm import AnthropicSettings, LlmActivities
        import anthropic
        import httpx2

        if not hasattr(self, "_llm_obj"):
            client = anthropic.AsyncAnthropic(api_key="sk-stand-in", base_url=self.fake.base_url, max_retries=0,
                                              timeout=httpx2.Timeout(120.0, connect=10.0))
            self._llm_obj = LlmActivities(client, None, AnthropicSettings())
        return self._llm_obj

    # durable --------------------------------------------------------------------------------
    def durable_run(self, case: Case, state: Any) -> Outcome:
        return self._loop.run_until_complete(self._durable(case, state))

    async def _durable(self, case: Case, state: Any) -> Outcome:
        from compactor.client import CompactorClient
        from compactor.store import SessionLog

        if self._client is None:
            await self._start()
        self._n += 1
        session = re.sub(r"[^A-Za-z0-9._-]", "-", f"{case.name}-{case.kind}-{self._n}")[:120]
        self.fake.answer = case.answer
        self.fake.record_dir = None
        log = SessionLog(self._store, "bench", session)
        await asyncio.to_thread(log.append, list(case.events))
        cc = CompactorClient(self._client, self._store, tenant="bench", task_queue=self._settings.task_queue,
                             llm_task_queue=self._settings.llm_task_queue, policy=self.policy,
                             summarizer="anthropic", model=self._settings.model)
        handle = await cc.start_compaction(session, target_tokens=case.target, trigger="bench")
        try:
            out = await handle.result()
        except Exception as exc:  # noqa: BLE001 - a failed run is an outcome of the bench
            cause = getattr(exc, "cause", None) or exc
            return Outcome(path="durable", outcome="failed", error=str(cause)[:300])
        view = await cc.view(session)
        return judge("durable", case.answer, out.record, view, state)

    async def _start(self) -> None:
        from compactor.cli._durable import _stack
        from compactor.store import open_store
        from workers.settings import Settings

        store_dir = self.workdir / "store"
        store_dir.mkdir(parents=True, exist_ok=True)
        self._settings = Settings(store=f"file://{store_dir}", tenant="bench", summarizer="anthropic",
                                  anthropic_api_key="sk-stand-in", temporal_address=self.temporal_address,
                                  task_queue="bench-model-path", llm_task_queue="bench-model-path-llm")
        self._store = open_store(self._settings.store)
        self._stack = _stack(self._settings, self._store, local_worker=True, with_llm=True)
        self._client = await self._stack.__aenter__()

    def close(self) -> None:
        if self._stack is not None:
            self._loop.run_until_complete(self._stack.__aexit__(None, None, None))
        self._loop.close()


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    """Point the worker's anthropic client at the stand-in server for the bench's duration."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# --- the bench -------------------------------------------------------------------------------


def transcripts(corpus: str) -> list[Path]:
    from compactor.errors import InvalidInput

    root = Path(corpus)
    if not root.is_dir():
        raise InvalidInput(f"{corpus}: no such directory; give the corpus with --corpus (e.g. ../shared/corpus)")
    return _expand([str(root)])


def run_bench(corpus: str, answers: str, *, paths: Sequence[str] = ("inline", "durable"),
              record: str | None = None, only: Sequence[str] = (), kinds: Sequence[str] = KINDS,
              policy: str = "default", progress: Any = None,
              temporal_address: str | None = None) -> dict[str, Any]:
    """Record, replay and judge; a JSON-safe result. Without ``temporal_address`` the durable
    path starts an embedded Temporal dev server for the run."""
    rows: list[dict[str, Any]] = []
    missing: list[str] = []
    quiet = logging.getLogger("temporalio")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # each refusal is a workflow warning; the bench reports them
    with contextlib.ExitStack() as undo:
        undo.callback(quiet.setLevel, level)
        return _run_bench(corpus, answers, paths, record, only, kinds, policy, progress, temporal_address,
                          rows, missing)


def _run_bench(corpus: str, answers: str, paths: Sequence[str], record: str | None, only: Sequence[str],
               kinds: Sequence[str], policy: str, progress: Any, temporal_address: str | None,
               rows: list[dict[str, Any]], missing: list[str]) -> dict[str, Any]:
    from compactor.cli.common import import_into
    from compactor.engine.planning import prepare
    from compactor.engine.measure import view_tokens
    from compactor.testing.anthropic_server import FakeAnthropic

    with tempfile.TemporaryDirectory(prefix="bench-model-path-") as tmp, FakeAnthropic() as fake, \
            _env(ANTHROPIC_BASE_URL=fake.base_url, ANTHROPIC_API_KEY="sk-stand-in"):
        runner = Runner(fake, Path(tmp), durable="durable" in paths, policy=policy,
                        temporal_address=temporal_address)
        try:
            for path in transcripts(corpus):
                stem = stem_of(path)
                if only and stem not in only:
                    continue
                imported = import_into(path, "auto", None)
                events = prepare(imported.events, None)
                tokens = view_tokens(events)
                for ratio, pct in RATIOS:
                    name = f"{stem}-{pct}"
                    target = target_for(tokens, ratio, DEFAULT_MIN_TARGET)
                    answer_file = Path(answers) / f"{name}.md"
                    faithful = answer_file.read_text(encoding="utf-8") if answer_file.exists() else None
                    rec_dir = Path(record) / name if record else None
                    # record the product's request (the answer served does not change it)
                    probe = Case(name, "record", faithful or "", events, target)
                    runner.fake.requests.clear()
                    _, base = runner.inline(probe, rec_dir)
                    if _last_summary_request(runner.fake) is None:
                        # no request made: nothing to answer; both paths must say so
                        row = _run_case(runner, Case(name, NO_ROOM, "", events, target), paths)
                        rows.append(row)
                        if progress:
                            progress(row)
                        continue
                    if faithful is None:
                        missing.append(name)
                        continue
                    for case in build_cases(name, events, target, faithful, base):
                        if case.kind not in kinds:
                            continue
                        row = _run_case(runner, case, paths)
                        rows.append(row)
                        if progress:
                            progress(row)
        finally:
            runner.close()
    return {"corpus": corpus, "answers": answers, "paths": list(paths), "ratios": [p for _, p in RATIOS],
            "min_target": DEFAULT_MIN_TARGET, "rows": rows, "missing_answers": missing,
            "summary": summarize(rows)}


def _run_case(runner: Runner, case: Case, paths: Sequence[str]) -> dict[str, Any]:
    from compactor.lifting.lift import LiftedState

    row: dict[str, Any] = {"name": case.name, "kind": case.kind, "target": case.target, "note": case.note,
                           "expected": list(EXPECTED[case.kind])}
    fake = runner.fake
    bodies: dict[str, Any] = {}
    fake.requests.clear()
    out, base = runner.inline(case, None)
    bodies["inline"] = _last_summary_request(fake)
    state = LiftedState.model_validate(base.checkpoint.state) if base.checkpoint else None
    if "inline" in paths:
        row["inline"] = out.row()
    if "durable" in paths:
        fake.requests.clear()
        row["durable"] = runner.durable_run(case, state).row()
        bodies["durable"] = _last_summary_request(fake)
        # the same prompt on both paths: the request bodies are equal
        row["same_request"] = bodies["inline"] is not None and bodies["inline"] == bodies["durable"]
        if not row["same_request"]:
            row["request_diff"] = request_diff(bodies["inline"], bodies["durable"])
    fake.requests.clear()
    row["ok"] = all(row[p]["outcome"] in expected_outcomes(case.kind, case.note, row[p].get("detail", ""))
                    and row[p]["truthful"] for p in paths if p in row)
    if case.kind == NO_ROOM:  # not asked means no request, on either path (and no answer to measure)
        row["ok"] = row["ok"] and not any(bodies.get(p) for p in paths)
        if "durable" in paths:
            row["same_request"] = not bodies["inline"] and not bodies["durable"]  # none on both
        for p in paths:
            if p in row:
                row[p]["carried"] = None
    return row


def expected_outcomes(kind: str, note: str = "", detail: str = "") -> set[str]:
    """What an answer of ``kind`` may come out as: ``EXPECTED``, plus a faithful outcome for a
    no-constraints answer that still quotes every constraint (``note``), and ``completed`` for
    an invented path that went with the lines trimmed to the budget (the view then shows no
    invented path: the validator would have repaired or refused it)."""
    out = set(EXPECTED[kind])
    if kind == "no-constraints" and note:
        out |= set(EXPECTED["faithful"])
    if kind == "invented-path" and "model text trimmed" in detail:
        out.add("completed")
    return out


def request_diff(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    """Where two request bodies first differ (keys, block index, character offset; no text)."""
    if a is None or b is None:
        return "a path sent no summary request"
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    if keys != ["messages"]:
        return "differs in " + ", ".join(keys)
    ca, cb = a["messages"][0]["content"], b["messages"][0]["content"]
    for i, (x, y) in enumerate(zip(ca, cb)):
        if x != y:
            tx, ty = x.get("text", ""), y.get("text", "")
            at = next((j for j in range(min(len(tx), len(ty))) if tx[j] != ty[j]), min(len(tx), len(ty)))
            return f"user block {i}: from character {at} (lengths {len(tx)} and {len(ty)})"
    return f"user blocks: {len(ca)} and {len(cb)}"


def _last_summary_request(fake: Any) -> dict[str, Any] | None:
    calls = [c for c in fake.calls() if isinstance(c.body, dict) and c.status == 200]
    return calls[-1].body if calls else None


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    by_kind: dict[str, dict[str, int]] = {}
    for r in rows:
        k = by_kind.setdefault(r["kind"], {"answers": 0, "handled": 0, "truthful": 0, "runs": 0,
                                           "same_request": 0})
        k["answers"] += 1
        k["same_request"] += bool(r.get("same_request"))
        k["handled"] += bool(r["ok"])
        for p in ("inline", "durable"):
            if p in r:
                k["runs"] += 1
                k["truthful"] += bool(r[p]["truthful"])
    return by_kind


def render(result: dict[str, Any]) -> str:
    paths = result["paths"]
    head = ["answer", "kind", *[f"{p}" for p in paths], "carried", "ok"]
    table = [head]
    for r in result["rows"]:
        cells = [r["name"], r["kind"]]
        for p in paths:
            o = r.get(p) or {}
            mark = "" if o.get("truthful") else " UNTRUTHFUL"
            cells.append(f"{o.get('outcome', '-')}{mark}")
        first = r.get(paths[0]) or {}
        cells.append("-" if first.get("carried") is None else f"{first['carried']:.0%}")
        cells.append("ok" if r["ok"] else "NOT AS SPECIFIED")
        table.append(cells)
    widths = [max(len(str(row[i])) for row in table) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    lines.append("")
    lines.append("kind             answers handled truthful-runs  same-request-both-paths")
    for kind, k in result["summary"].items():
        same = f"{k['same_request']}/{k['answers']}" if "durable" in paths else "-"
        lines.append(f"{kind:<16} {k['answers']:>7} {k['handled']:>7} {k['truthful']:>5}/{k['runs']:<7} {same:>8}")
    if result["missing_answers"]:
        lines.append(f"no answer yet for: {', '.join(result['missing_answers'])}")
    details = [f"  {r['name']} {r['kind']} ({p}): {r[p]['detail'] or r[p].get('error', '')}"
               for r in result["rows"] for p in paths if p in r and (r[p]["detail"] or r[p].get("error"))]
    if details:
        lines.append("")
        lines.append("details (sections completed, lines repaired, fallback reasons):")
        lines.extend(details)
    return "\n".join(lines)


_SHORT = {"used": "used", "completed": "compl.", "repaired": "repair", "refused": "REFUSED", "failed": "FAILED",
          "not-asked": "not asked"}


def render_markdown(result: dict[str, Any]) -> str:
    """One row per transcript and target, one column per kind: the outcome on each path
    (``inline/durable`` when they differ, ``!`` = not as specified, ``?`` = record untruthful)."""
    paths = result["paths"]
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for r in result["rows"]:
        by.setdefault(r["name"], {})[r["kind"]] = r
    kinds = [k for k in (*KINDS, NO_ROOM) if any(k in v for v in by.values())]
    lines = ["| answer | carried (faithful) | " + " | ".join(kinds) + " |",
             "|---|---:|" + "---|" * len(kinds)]
    for name, rows in by.items():
        cells = []
        for k in kinds:
            r = rows.get(k)
            if r is None:
                cells.append("n/a")
                continue
            outs = [_SHORT.get(r[p]["outcome"], r[p]["outcome"]) for p in paths if p in r]
            cell = outs[0] if len(set(outs)) == 1 else "/".join(outs)
            if not all(r[p]["truthful"] for p in paths if p in r):
                cell += "?"
            cells.append(cell + ("" if r["ok"] else "!"))
        faithful = rows.get("faithful", {}).get(paths[0], {})
        carried = "-" if faithful.get("carried") is None else f"{faithful['carried']:.0%}"
        lines.append(f"| {name} | {carried} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model-path", help="the model summarizer on stand-in model answers, inline and durable")
    p.add_argument("--corpus", default=DEFAULT_CORPUS, help="transcripts (default %(default)s)")
    p.add_argument("--answers", default=DEFAULT_ANSWERS,
                   help="faithful answers, <transcript>-<pct>.md (default %(default)s)")
    p.add_argument("--record", default=None, metavar="DIR",
                   help="also write each recorded request to DIR/<transcript>-<pct>/ (system.txt, user.txt, request.json)")
    p.add_argument("--paths", default="inline,durable", help="comma-separated: inline, durable (default %(default)s)")
    p.add_argument("--only", default="", help="comma-separated transcript stems (default: all)")
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated answer kinds (default: all)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--markdown", action="store_true", help="print the per-answer table as Markdown")
    p.add_argument("--out", default=None, metavar="FILE", help="also write the JSON result to FILE")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from compactor.errors import InvalidInput

    paths = [x for x in args.paths.split(",") if x]
    bad = [x for x in paths if x not in ("inline", "durable")]
    kinds = [x for x in args.kinds.split(",") if x]
    bad += [x for x in kinds if x not in KINDS]
    if bad or not paths:
        raise InvalidInput(f"unknown --paths/--kinds value(s): {', '.join(bad) or '(none given)'}; "
                           f"paths: inline, durable; kinds: {', '.join(KINDS)}")
    args.answers = project_default(args.answers, DEFAULT_ANSWERS)
    args.corpus = project_default(args.corpus, DEFAULT_CORPUS)
    if not Path(args.answers).is_dir():
        raise InvalidInput(f"{args.answers}: no such directory of answers (<transcript>-<pct>.md)")

    def progress(row: dict[str, Any]) -> None:
        if not args.json:
            outs = ", ".join(f"{p} {row[p]['outcome']}" for p in paths if p in row)
            print(f"{row['name']} {row['kind']}: {outs}{'' if row['ok'] else '  NOT AS SPECIFIED'}",
                  file=sys.stderr)

    result = run_bench(args.corpus, args.answers, paths=paths, record=args.record,
                       only=[x for x in args.only.split(",") if x], kinds=kinds, progress=progress)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    if args.json:
        print(json.dumps(result, indent=1, ensure_ascii=False))
    elif args.markdown:
        print(render_markdown(result))
    else:
        print(render(result))
    ok = all(r["ok"] for r in result["rows"])
    return 0 if ok and result["rows"] else 1
