"""compactor.breaker: 3 consecutive failures stop automatic triggers until cleared."""

from __future__ import annotations

from datetime import datetime, timezone

from compactor import breaker

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _fail(st, n=1, trigger="threshold"):
    for _ in range(n):
        st = breaker.record(st, tenant="t", session="s", ok=False, at=T0, trigger=trigger, error="boom")
    return st


def test_opens_after_three_consecutive_failures():
    st = _fail(None, 2)
    assert not st.open and breaker.check(st, "threshold").allowed
    st = _fail(st)
    assert st.open and st.consecutive_failures == 3 and st.opened_at == T0
    d = breaker.check(st, "threshold")
    assert not d.allowed and "3 consecutive failures" in d.reason


def test_a_success_resets_the_streak():
    st = _fail(None, 2)
    st = breaker.record(st, tenant="t", session="s", ok=True, at=T0)
    st = _fail(st, 2)
    assert not st.open and st.consecutive_failures == 2


def test_manual_request_runs_through_an_open_breaker_and_success_closes_it():
    st = _fail(None, 3)
    d = breaker.check(st, "manual")
    assert d.allowed and d.clears
    assert breaker.check(st, "sweep").allowed is False
    st2 = breaker.record(st, tenant="t", session="s", ok=True, at=T0, trigger="manual")
    assert not st2.open and st2.consecutive_failures == 0
    assert breaker.transition(st, st2) == "closed"


def test_operator_clear():
    st = _fail(None, 4)
    st2 = breaker.clear(st, tenant="t", session="s", by="operator alice", at=T0)
    assert not st2.open and st2.consecutive_failures == 0 and st2.cleared_by == "operator alice"
    assert breaker.check(st2, "threshold").allowed


def test_failures_while_open_stay_open_and_keep_opened_at():
    st = _fail(None, 3)
    st2 = _fail(st, 1, trigger="manual")
    assert st2.open and st2.opened_at == st.opened_at and st2.consecutive_failures == 4
    assert breaker.transition(None, st) == "opened" and breaker.transition(st, st2) == "unchanged"


def test_history_is_bounded_and_key_layout():
    st = _fail(None, 25)
    assert len(st.history) == breaker.MAX_HISTORY
    assert breaker.breaker_key("t", "s") == "t/t/s/s/breaker.json"
    assert breaker.is_manual("manual:cli") and not breaker.is_manual("sweep")


def test_recording_the_same_run_twice_counts_it_once():
    # record_breaker is retried when its write landed but the reply was lost (a lost worker, or
    # S3 answering a retried conditional PUT with 412): one failed run must not count twice.
    st = None
    for run in ("r1", "r2"):
        for _ in range(2):
            st = breaker.record(st, tenant="t", session="s", ok=False, at=T0, trigger="threshold",
                                run_id=run, error="boom")
    assert st.consecutive_failures == 2 and not st.open and len(st.history) == 2


def test_operator_rejections_do_not_count():
    st = _fail(None, 2)
    for reason in ("NotApproved: swap not approved: rejected by an operator; the session is unchanged",
                   "NotApproved: swap not approved: no approval within 3600s; the session is unchanged"):
        st = breaker.record(st, tenant="t", session="s", ok=False, at=T0, trigger="manual", error=reason)
    assert st.consecutive_failures == 2 and not st.open
    st = breaker.record(st, tenant="t", session="s", ok=False, at=T0, error="SummarizerFailed: 400")
    assert st.open  # a real failure still counts
