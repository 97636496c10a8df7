"""The summary steps of ``StoreActivities``: externalize (layers a/b and the summary ladder),
lift_state, summarize_structured, validate_candidate, finish_structured (the last three in
one step) and externalize_finish (externalize and finish_structured in one step). A mixin: the store plumbing (``_run``, ``log``, work objects) is ``StoreActivities``'."""

from __future__ import annotations

import time
from typing import Any

from temporalio import activity

from activities.contracts import (
    ActivityName,
    ExternalizeFinishInput,
    ExternalizeFinishOutput,
    ExternalizeInput,
    ExternalizeOutput,
    FinishStructuredInput,
    FinishStructuredOutput,
    LiftInput,
    LiftOutput,
    SummarizeInput,
    SummarizeOutput,
    ValidateInput,
    ValidateOutput,
    finish_follows,
    finish_structured_input,
)
from activities.merge import SOFT_VIOLATIONS
from activities.step_support import PlannedWork, paused, policy_of
from compactor import errors
from compactor.records import Checkpoint


class SummarySteps:
    """Steps of ``StoreActivities`` (see the module docstring); mixed into it."""

    # --- 3. externalize (layers a/b + the summary ladder) -------------------------------------
    @activity.defn(name=ActivityName.EXTERNALIZE)
    async def externalize(self, inp: ExternalizeInput) -> ExternalizeOutput:
        """Run ``engine.apply_layers``: store the artifacts it makes, keep the candidate.

        Large tool results go to the content-addressed artifact store (idempotent); the layer
        result (candidate checkpoint with its replacements, cut and structured summary) is
        written to ``layers_key``.
        """
        meta = self._meta()
        return await self._run(lambda: paused(self._externalize, inp, meta))

    def _externalize(self, inp: ExternalizeInput, meta: dict[str, Any],
                     work: PlannedWork | None = None) -> ExternalizeOutput:
        """externalize's work (``work``: what the plan learnt on the snapshot's events, when it
        ran in the same step: ``apply_layers`` then starts from it, as inline)."""
        from compactor.engine.compact import apply_layers
        from compactor.engine.planning import Plan
        from compactor.tokens import count_event

        t = time.perf_counter()
        snap = inp.snapshot
        log = self.log(snap.tenant, snap.session)
        prev = self._prev(log, snap)
        shared = work is not None and work.serves(inp.plan_key, prev.id if prev is not None else None)
        # (the prepared events: the same events as engine_events gives, in the same order)
        evs = work.events if shared and work is not None else self.engine_events(log, snap)
        policy = policy_of(inp.policy)
        p = Plan.model_validate(self._get_json(inp.plan_key))
        res = apply_layers(
            evs, p, policy, prev=prev, now=inp.now, tenant=snap.tenant, session=snap.session,
            **(work.layer_args() if shared and work is not None else {}),
        )
        ckpt = res.checkpoint
        assert ckpt is not None
        # Content-addressed, create-only: a retry re-finds them. Written concurrently, while the
        # layers document below is made and written (their fsyncs, ~13 at 100k tokens, off the
        # step's critical path); the step returns, or fails, only once every one is stored.
        stored = self._io_pool.map(log.put_artifact, res.artifacts.values())
        self._remember_artifacts(res.artifacts)
        end = 0 if ckpt.covers.empty else ckpt.covers.end
        covered_tokens = sum(count_event(e) for e in evs if e.kind != "pinned" and snap.prev_covers_end < e.seq <= end)
        # Room an LLM summary may take: what the structured one had, up to the target.
        from compactor.engine.model_summary import summary_budget

        budget = summary_budget(policy, target_tokens=p.target_tokens, tokens_after=res.tokens_after,
                                summary_tokens=res.summary_tokens, covered_tokens=covered_tokens)
        # The state is already JSON data (the engine's dump): not copied by model_dump.
        ckpt_doc = ckpt.model_dump(mode="json", exclude={"state"})
        ckpt_doc["state"] = ckpt.state
        doc = {
            "checkpoint": ckpt_doc,
            "layers": res.layers,
            "freed_by_layer": res.freed_by_layer,
            "tokens_after": res.tokens_after,
            "summary_tokens": res.summary_tokens,
            "retained_tail_tokens": res.retained_tail_tokens,
            "violations": [str(v) for v in res.violations],
            "validated": {
                "hard": [str(v) for v in res.violations if v.code not in SOFT_VIOLATIONS],
                "soft": [str(v) for v in res.violations if v.code in SOFT_VIOLATIONS],
            },
            "artifacts": sorted(res.artifacts),
            "candidates": res.candidates,
            "covered_tokens": covered_tokens,
            "summary_budget": budget,
            "mid_turn": res.mid_turn,
        }
        # Parsed here once, as every reader would parse it (sorted keys: the candidate and
        # the checkpoint written from it keep that order), so the next steps of this worker
        # read it unparsed: lift, summary and validation, then commit_swap's candidate. The
        # checkpoint and its state are dumped once; finish_structured publishes them as the
        # state and the candidate with those bytes (same bytes as dumping them again).
        self._put_parsed(inp.layers_key, doc, ("checkpoint", "state"))
        list(stored)  # (raises the first failed write's error, as before)
        return ExternalizeOutput(
            layers_key=inp.layers_key,
            artifacts_written=len(res.artifacts),
            replacements=len(ckpt.replacements),
            freed_by_layer=dict(res.freed_by_layer),
            layers=list(res.layers),
            checkpoint_id=ckpt.id,
            covers_end=end,
            covered_tokens=covered_tokens,
            summary_budget=budget,
            tokens_after=res.tokens_after,
            retained_tail_tokens=res.retained_tail_tokens,
            mid_turn=res.mid_turn,
            left_out=dict(res.left_out),
            repaired=res.repaired,
            ms=(time.perf_counter() - t) * 1000,
            **meta,
        )

    # --- 4. lift_state ----------------------------------------------------------------------
    @activity.defn(name=ActivityName.LIFT_STATE)
    async def lift_state(self, inp: LiftInput) -> LiftOutput:
        """Publish the lifted state of 1..covers_end (on top of the previous checkpoint's) at
        ``state_key`` for the summarizers.

        The summary ladder already lifted the chosen range with ``lift.lift_state`` (the
        candidate's ``state``); it is reused when it covers exactly this range, else lifted here.
        """
        meta = self._meta()
        return await self._run(lambda: self._lift(inp, meta))

    def _lift(self, inp: LiftInput, meta: dict[str, Any], layers: Any = None,
              docs: dict[str, Any] | None = None) -> LiftOutput:
        """lift_state's work (``layers``: the layers document when the caller has it parsed;
        ``docs["state"]`` receives the state document written)."""
        from compactor.lifting.lift import LiftedState, dump_state, lift_state

        t = time.perf_counter()
        snap = inp.snapshot
        if layers is None:
            layers = self._get_json(inp.layers_key) if inp.layers_key else None
        state_doc = (layers or {}).get("checkpoint", {}).get("state") or None
        if not state_doc or state_doc.get("covers_end") != inp.covers_end:
            log = self.log(snap.tenant, snap.session)
            prev = self._prev(log, snap)
            prev_state = LiftedState.model_validate(prev.state) if prev and prev.state else None
            covered = [
                e
                for e in self.engine_events(log, snap)
                if e.kind != "pinned" and e.seq <= inp.covers_end
            ]
            state_doc = dump_state(lift_state(covered, prev_state))
            self._put_json(inp.state_key, state_doc)
        else:
            # The ladder's state of exactly this range, published as the layers document holds
            # it (parsed): the engine's JSON dump of the LiftedState, which a parse and a dump
            # give back unchanged. It grows with the session (~100 KB after eight compactions).
            self._put_json(inp.state_key, state_doc, parsed=state_doc)
        if docs is not None:
            docs["state"] = state_doc
        return LiftOutput(
            state_key=inp.state_key,
            requests=len(state_doc.get("requests") or ()),
            constraints=len(state_doc.get("constraints") or ()),
            unknown_actions=len(state_doc.get("unknown_actions") or ()),
            todos=len(state_doc.get("todos") or ()),
            ms=(time.perf_counter() - t) * 1000,
            **meta,
        )

    # --- 5. summarize (structured) ----------------------------------------------------------
    @activity.defn(name=ActivityName.SUMMARIZE_STRUCTURED)
    async def summarize_structured(self, inp: SummarizeInput) -> SummarizeOutput:
        """The deterministic structured summary of the state at ``state_key``.

        Rendered by ``summary.render_summary``; when the summary ladder already rendered this
        same state (the layer candidate), that text is used, so durable == inline exactly.
        """
        meta = self._meta()
        return await self._run(lambda: self._summarize(inp, meta))

    def _summarize(self, inp: SummarizeInput, meta: dict[str, Any], state_doc: Any = None,
                   layers: Any = None, docs: dict[str, Any] | None = None) -> SummarizeOutput:
        """summarize_structured's work (``state_doc``, ``layers``: parsed by the caller;
        ``docs["summary"]`` receives the summary document written)."""
        from compactor.lifting.lift import LiftedState
        from compactor.summarize.structured import render_summary

        if state_doc is None:
            state_doc = self._get_json(inp.state_key)
        ckpt_doc: dict[str, Any] = {}
        if layers is None:
            layers_key = inp.state_key.rsplit("/", 1)[0] + "/layers.json"
            try:
                layers = self._get_json(layers_key)
            except errors.NotFound:
                layers = {}
        ckpt_doc = layers.get("checkpoint", {})
        if ckpt_doc.get("state") == state_doc and ckpt_doc.get("summary"):
            doc = {"summary": ckpt_doc["summary"], "sections": ckpt_doc.get("sections", {}), "native": None}
            tokens = int(ckpt_doc.get("summary_tokens", 0))
        else:
            rendered = render_summary(LiftedState.model_validate(state_doc), inp.budget_tokens)
            doc = {"summary": rendered.text, "sections": dict(rendered.sections), "native": None}
            tokens = rendered.tokens
        if docs is not None:
            docs["summary"] = self._put_parsed(inp.output_key, doc)  # what validate_candidate reads back
        else:
            self._put_json(inp.output_key, doc)
        return SummarizeOutput(
            output_key=inp.output_key, summary_tokens=tokens, model="structured", attempts=meta["attempt"]
        )

    # --- 6. validate ------------------------------------------------------------------------
    def candidate(
        self, inp: ValidateInput, layer_doc: dict[str, Any] | None = None, summ: Any = None
    ) -> tuple[Checkpoint, bool, list[str]]:
        """The layer candidate with the chosen summarizer's summary swapped in (a model summary
        completed from the lifted state), whether it is the layer candidate itself
        (unchanged), and the sections the completion added."""
        layer_doc = layer_doc if layer_doc is not None else self._get_json(inp.layers_key)
        base = Checkpoint.model_validate(layer_doc["checkpoint"])
        if not inp.summary_key:
            return base, True, []  # replacement layers only: no summary to swap in
        if summ is None:
            summ = self._get_json(inp.summary_key)
        if summ.get("summary") == base.summary and summ.get("native") is None and (
            not inp.checkpoint_id or inp.checkpoint_id == base.id
        ):
            return base, True, []
        from compactor.engine.model_summary import with_summary

        ckpt, completed = with_summary(
            base, summ.get("summary") or "", summarizer=inp.summarizer,
            budget=int(layer_doc.get("summary_budget") or 0), mid_turn=bool(layer_doc.get("mid_turn")),
            sections=summ.get("sections") or {}, native=summ.get("native"),
            checkpoint_id=inp.checkpoint_id or base.id,
        )
        return ckpt, False, completed

    @activity.defn(name=ActivityName.VALIDATE_CANDIDATE)
    async def validate_candidate(self, inp: ValidateInput) -> ValidateOutput:
        """Every invariant (DESIGN §7) on the candidate view; the candidate is stored for
        ``commit_swap``. Violations are returned (the workflow falls back or fails)."""
        meta = self._meta()
        return await self._run(lambda: self._validate(inp, meta))

    def _validate(self, inp: ValidateInput, meta: dict[str, Any], layer_doc: Any = None,
                  summ: Any = None) -> ValidateOutput:
        """validate_candidate's work (``layer_doc``, ``summ``: parsed by the caller)."""
        from compactor.engine.invariants import validate
        from compactor.engine.measure import view_tokens
        from compactor.engine.view import build_view

        t = time.perf_counter()
        snap = inp.snapshot
        log = self.log(snap.tenant, snap.session)
        prev = self._prev(log, snap)
        from compactor.engine.planning import prepare

        if layer_doc is None:
            layer_doc = self._get_json(inp.layers_key)
        ckpt, unchanged, completed = self.candidate(inp, layer_doc, summ)
        repaired = 0
        if unchanged and "validated" in layer_doc:
            # The summary ladder validated exactly this candidate with the same function
            # on the same events (engine.apply_layers); its verdict stands.
            hard = list(layer_doc["validated"]["hard"])
            soft = list(layer_doc["validated"]["soft"])
            n_tokens = int(layer_doc["tokens_after"])
        else:
            evs = prepare(self.engine_events(log, snap), prev)
            view = build_view(evs, ckpt)
            arts = self._view_artifacts(log, evs, ckpt, view)
            target = self._get_json(inp.plan_key)["target_tokens"]
            vio = validate(
                events=evs, checkpoint=ckpt, view=view, target_tokens=target, artifacts=arts,
                prev_checkpoint=prev,
            )
            n_tokens = view_tokens(view)
            from compactor.engine.compact import repair_candidate

            ckpt, view, n_tokens, vio, repaired = repair_candidate(
                evs, ckpt, view, n_tokens, vio, target, arts, prev)
            hard = [str(v) for v in vio if v.code not in SOFT_VIOLATIONS]
            soft = [str(v) for v in vio if v.code in SOFT_VIOLATIONS]
            if inp.summarizer != "structured":
                from compactor.engine.model_summary import over_budget

                too_big = over_budget(n_tokens, target, int(layer_doc["tokens_after"]))
                if too_big is not None:
                    hard.append(too_big)
        # The layer candidate unchanged: its document as the layers document holds it (parsed;
        # a model_dump of the same checkpoint gives the same data), not dumped again.
        if unchanged and not repaired:
            self._put_json(inp.candidate_key, layer_doc["checkpoint"], parsed=layer_doc["checkpoint"])
        else:
            self._put_json(inp.candidate_key, ckpt.model_dump(mode="json"))
        return ValidateOutput(
            candidate_key=inp.candidate_key,
            checkpoint_id=ckpt.id,
            violations=hard,
            warnings=soft,
            view_tokens=n_tokens,
            summary_tokens=ckpt.summary_tokens,
            repaired=repaired,
            completed=completed,
            ms=(time.perf_counter() - t) * 1000,
            **meta,
        )

    # --- 4-6 in one step (structured summarizer) ------------------------------------------------
    @activity.defn(name=ActivityName.FINISH_STRUCTURED)
    async def finish_structured(self, inp: FinishStructuredInput) -> FinishStructuredOutput:
        """lift_state, summarize_structured and validate_candidate in one call, in that order.

        The same work as the three steps, on one worker: the layers document is parsed once and
        the state and summary each step writes are handed to the next in memory (they are
        still written, so a later step or an operator finds the same work objects). One
        local activity instead of three: measured, each costs the worker ~3.7 ms of SDK CPU
        (an activation, its dispatch, the core's side) besides its own work.
        """
        meta = self._meta()
        return await self._run(lambda: paused(self._finish_structured, inp, meta))

    def _finish_structured(self, inp: FinishStructuredInput, meta: dict[str, Any]) -> FinishStructuredOutput:
        """finish_structured's work."""
        t = time.perf_counter()
        layers = self._get_json(inp.lift.layers_key)
        docs: dict[str, Any] = {}
        lift = self._lift(inp.lift, meta, layers, docs)
        t1 = time.perf_counter()
        same_state = inp.summarize.state_key == inp.lift.state_key
        same_layers = inp.summarize.state_key.rsplit("/", 1)[0] + "/layers.json" == inp.lift.layers_key
        summ = self._summarize(inp.summarize, meta, docs["state"] if same_state else None,
                               layers if same_layers else None, docs)
        t2 = time.perf_counter()
        same_summary = inp.check.summary_key == inp.summarize.output_key
        check = self._validate(inp.check, meta, layers if inp.check.layers_key == inp.lift.layers_key else None,
                               docs["summary"] if same_summary else None)
        return FinishStructuredOutput(
            lift=lift, summarize=summ, check=check, summarize_ms=(t2 - t1) * 1000,
            ms=(time.perf_counter() - t) * 1000, **meta,
        )

    # --- 3-6 in one step (structured summarizer) ------------------------------------------------
    @activity.defn(name=ActivityName.EXTERNALIZE_FINISH)
    async def externalize_finish(self, inp: ExternalizeFinishInput) -> ExternalizeFinishOutput:
        """externalize, then finish_structured when the layers summarize and shrink the view.

        The same two steps with the inputs the workflow would give them
        (``contracts.finish_structured_input``), on one worker: one local activity instead of
        two (an activation, its dispatch and the gap between the steps). When the layers do not
        summarize, or do not shrink the view (the workflow then ends noop), only externalize
        runs and ``finish`` is None: the workflow goes on as after externalize alone.
        """
        meta = self._meta()
        return await self._run(lambda: paused(self._externalize_finish, inp, meta))

    def _externalize_finish(self, inp: ExternalizeFinishInput, meta: dict[str, Any],
                            work: PlannedWork | None = None) -> ExternalizeFinishOutput:
        t = time.perf_counter()
        ext = self._externalize(inp.externalize, meta, work)
        finish = None
        if finish_follows(inp, ext):
            finish = self._finish_structured(finish_structured_input(inp, ext), meta)
        return ExternalizeFinishOutput(externalize=ext, finish=finish, ms=(time.perf_counter() - t) * 1000, **meta)
