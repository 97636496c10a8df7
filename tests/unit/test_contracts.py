"""Payload contracts: exact shapes others depend on, forward compatibility, deterministic keys."""

from __future__ import annotations

from activities.contracts import (
    CompactSessionInput,
    SnapshotRef,
    SummarizeInput,
    SummarizeOutput,
    params_hash,
    work_prefix,
)


def test_summarize_contract_fields_are_exact():
    assert list(SummarizeInput.model_fields) == [
        "tenant", "session", "snapshot_version", "covers_end", "prev_checkpoint",
        "prev_checkpoint_sha256", "state_key", "budget_tokens", "model", "mode", "output_key",
        "latest_full",
    ]
    out = SummarizeOutput(output_key="k", summary_tokens=10, model="m")
    assert (out.input_tokens, out.attempts, out.dropped_rounds) == (0, 1, 0)


def test_payloads_from_a_newer_deployment_still_decode():
    raw = '{"tenant":"t","session":"s","version":3,"etag":"e","field_added_later":1}'
    snap = SnapshotRef.model_validate_json(raw)
    assert snap.version == 3 and snap.checkpoint is None


def test_work_keys_are_deterministic_and_scoped_to_the_session():
    a = params_hash(policy={"preset": "default", "window": 1}, summarizer="structured", prev=None)
    b = params_hash(summarizer="structured", prev=None, policy={"window": 1, "preset": "default"})
    assert a == b and len(a) == 12
    assert a != params_hash(policy={"preset": "default", "window": 2}, summarizer="structured", prev=None)
    assert work_prefix("t1", "s1", 42, a) == f"t/t1/s/s1/work/000000000042-{a}/"


def test_workflow_input_defaults_are_the_embedded_defaults():
    inp = CompactSessionInput(tenant="t", session="s")
    assert inp.summarizer == "structured" and inp.policy == "default"
    assert inp.local_steps and not inp.pause_before_commit and inp.max_merges == 20
