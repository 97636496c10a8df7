"""The compaction workflow's paths: its patch ids and the choice of a run's path.

Every change to the workflow's commands since its first recorded histories sits behind a patch
id (``workflow.patched``), so a history recorded by an older worker replays the path it took.
The newest patches each imply the ones before (``STEPS_PATCH`` .. ``FREEZE_COMMIT_PATCH``: one
marker per run), and since ``FREEZE_COMMIT_PATCH`` a client may ask for the newest path in the
input (``CompactSessionInput.paths``), which a fresh execution takes with no marker at all
(``path_level``). Deterministic: only ``workflow.patched`` and ``workflow.unsafe.is_replaying``.
"""

from __future__ import annotations

from temporalio import workflow

# Circuit breaker (compactor/breaker.py): 3 consecutive failed compactions of a session stop
# automatic triggers until an operator clears it or a manual request comes in. Behind a patch
# so recorded histories without it still replay.
BREAKER_PATCH = "circuit-breaker"

# Measured (compactor bench perf): with commit_swap and write_record local too, a compaction
# is one workflow task instead of three round trips through the server; both are idempotent,
# so a retry after a lost worker is safe. Behind a patch: older histories ran them as
# ordinary activities.
LOCAL_COMMIT_PATCH = "local-commit-record"

# A held compaction (pause_before_commit) gives up after approval_timeout_s, so a forgotten
# approval cannot hold the session's workflow id (and every request attached to it) forever.
APPROVAL_TIMEOUT_PATCH = "approval-timeout"

# With the structured summarizer, lift_state + summarize_structured + validate_candidate run as
# one step (finish_structured: the same work, in order, on one worker; each part still writes
# its work object and reports its duration under its own name). Measured (docs/bench-perf.md):
# each local activity costs the worker ~3.7 ms of SDK CPU besides its work. Runs before it
# took three steps.
ONE_STEP_PATCH = "structured-one-step"

# The input is checked (ids, numbers; pure, no I/O) before anything else, so a request that
# slipped past the client's own check fails at once, non-retryable, with nothing read or
# written. Behind a patch: older histories went straight to the search attributes.
INPUT_CHECK_PATCH = "check-input"

# Exactly once per run: a run executed again after its commit (a worker lost after commit_swap
# but before the workflow task was recorded, or "Workflow task not found" under load) finds its
# own commit in freeze_snapshot (the head names the run) and reports it instead of planning
# again, so it never reports noop/failed for a committed swap nor commits a second checkpoint.
EXACTLY_ONCE_PATCH = "exactly-once-commit"

# A failure at freeze_snapshot ends like every other failure: status "failed", a record and a
# breaker count (before, the run closed with CompactorStatus "running" and no record).
FREEZE_FAILURE_PATCH = "freeze-failure-record"

# A run whose layers cannot shrink the view ends noop without writing a checkpoint (before, it
# committed a same-content checkpoint under a new id: a paid summary and a new object per
# sweep); the head is marked so sweeps and ensure_budget wait until the view has grown.
UNSHRINKABLE_PATCH = "unshrinkable-noop"

# Model calls carry the tenant as Temporal's fairness key: the LLM task queue's one rate limit
# is shared fairly between tenants (docs/runbook.md). Runs before it set no priority.
LLM_FAIRNESS_PATCH = "llm-fairness-key"

# The circuit breaker is checked inside freeze_snapshot and counted inside write_record (two
# local activities fewer per run: each costs the worker ~4 ms of SDK CPU and the server a
# marker; docs/bench-perf.md, round four). A run that records this patch takes every patch
# above as recorded too, without a marker (and the SDK's TemporalChangeVersion upsert) each:
# the same code paths. Runs without it ask each patch as before, so recorded histories replay
# unchanged. A structured run's history: 15 events instead of 24.
STEPS_PATCH = "breaker-in-steps"

# freeze_snapshot plans the compaction too (FreezeInput.plan_policy -> SnapshotRef.plan, written
# under the same work prefix): one local activity fewer per run, and the view counted once (both
# steps counted it). The record keeps both durations. Implies every patch above, as STEPS_PATCH
# does (one marker per run); a plan that failed inside freeze is run as its own step, which
# reports the failure as before.
FREEZE_PLAN_PATCH = "freeze-plans"

# With the structured summarizer, externalize and finish_structured run as one step
# (externalize_finish: the same two steps in order on one worker, finish only when the layers
# summarize and shrink the view); one local activity fewer per run (an activation, its
# dispatch and the gap between them). The record keeps every part's duration under its own
# name. Implies every patch above, as FREEZE_PLAN_PATCH does (one marker per run).
EXTERNALIZE_FINISH_PATCH = "externalize-finishes"

# A committing run's commit_swap and write_record run as one step (commit_record: the commit, then
# the record of the committed run - contracts.committed_record - written and counted on the
# breaker by the same worker); one local activity fewer per run. A retry of the step whose commit
# went through takes commit_swap's own-commit path, then writes the record. Noop and failed runs
# still end with write_record alone. The record keeps both parts' durations under their own
# names. Implies every patch above, as EXTERNALIZE_FINISH_PATCH does (one marker per run).
COMMIT_RECORD_PATCH = "commit-records"

# With the structured summarizer, freeze_snapshot runs externalize_finish too when its plan needs a
# compaction (FreezeInput.finish_now -> SnapshotRef.finished, under the same work prefix): one local
# activity fewer per committing run (an activation, its dispatch and the gaps around it). The
# workflow's branches after freeze (breaker refusal, own commit, plan failed or not needed) get no
# finish and go on as before; a finish that failed inside freeze (or a worker whose externalize
# parts are replaced) is run as its own step, which reports the failure as before. A run started
# with its tenant, session and "running" status as search attributes (the client's) does not
# upsert them again. Implies every patch above, as COMMIT_RECORD_PATCH does (one marker per run).
FREEZE_FINISH_PATCH = "freeze-finishes"

# With the structured summarizer and no approval asked, freeze_snapshot commits too when its
# candidate validates (FreezeInput.commit_as -> SnapshotRef.committed: commit_record's work, the
# record built by activities.freeze_commit as this workflow builds it): a committing run is one
# local activity instead of two. A candidate with violations, or a commit that failed inside freeze
# (a moved head, a failed record write after the swap) leaves commit_record to its own step, which
# reports the failure - or the commit that went through - as before. Implies every patch above, as
# FREEZE_FINISH_PATCH does (one marker per run).
FREEZE_COMMIT_PATCH = "freeze-commits"

# Since FREEZE_COMMIT_PATCH a client asks for the newest path in the input (CompactSessionInput.paths
# = contracts.WORKFLOW_PATHS, CompactorClient): a worker that has that path takes it with no patch
# marker (``path_level``). Needs workers at STEPS_PATCH or later for such clients: a worker older
# than that records no marker this code asks first, and its history would replay as the newest path.
# A later path raises WORKFLOW_PATHS and keeps this one for histories without a marker whose input
# says 8 (they ran the v8 path).
_PATHS_V8 = 8


# The paths that imply every patch before them, newest first: (level, patch id).
_PATH_PATCHES = (
    (8, FREEZE_COMMIT_PATCH),
    (7, FREEZE_FINISH_PATCH),
    (6, COMMIT_RECORD_PATCH),
    (5, EXTERNALIZE_FINISH_PATCH),
    (4, FREEZE_PLAN_PATCH),
    (3, STEPS_PATCH),
)


def path_level(paths: int) -> int:
    """The run's path: 8 (``FREEZE_COMMIT_PATCH``) down to 3 (``STEPS_PATCH``), or 2 for a run
    that asks each older patch on its own. Asked of the patch markers, newest first (stopping at
    the first one recorded, as the calls always have) - unless the input asks for this code's
    newest path (``paths``): a fresh execution then takes it without a marker (and without the
    SDK's TemporalChangeVersion upsert: two history events fewer per run); a replay finds no
    marker and takes it too, while a history an older worker recorded for such an input holds
    its marker and replays its path."""
    if paths >= _PATHS_V8 and not workflow.unsafe.is_replaying():
        return 8
    for level, patch_id in _PATH_PATCHES:
        if workflow.patched(patch_id):
            return level
    return 8 if paths >= _PATHS_V8 else 2  # no marker: recorded by a fresh execution above
