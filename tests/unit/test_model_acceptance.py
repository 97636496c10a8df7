"""Acceptance on meaning (issue 14 item 1), on synthetic sessions that need no corpus: what a
model answer is refused for, rejected for, or completed with, judged by the same code as both
paths (``engine.model_summary.with_summary`` + ``invariants.validate``)."""

from __future__ import annotations

import pytest

from compactor.bench.model_answers import (
    INVENTED_PATH,
    PLACEHOLDER,
    PLANTED_COMMAND,
    other_language,
    with_line,
    without_constraints,
)
from compactor.engine.compact import compact, repair_candidate
from compactor.engine.invariants import validate
from compactor.engine.measure import view_tokens
from compactor.engine.model_summary import with_summary
from compactor.engine.policy import make_policy
from compactor.engine.view import build_view
from compactor.lifting.lift import LiftedState, lift_state
from compactor.summarize.acceptance import (
    ALSO_HEADING, MIN_SCRIPT_SHARE, carried, foreign_language, language, model_part, script_share, session_languages,
)
from tests.unit.engine_fixtures import Conv

FAITHFUL = """## Goal
- Add retries with backoff to the HTTP client in `src/client.py`.
## User requests
- Add retries to `src/client.py`; then fix the failing `tests/test_client.py`; then document the retry policy.
## Constraints (verbatim)
- Never retry a POST.
- Do not touch src/server.py.
## Files changed
- src/client.py: `retry_with_backoff` wraps GET calls (3 attempts, doubling delay).
## Commands run
- `pytest tests/test_client.py`: failed first with TypeError, passed after the fix (exit 0).
## Errors and failed approaches
- TypeError in `retry_with_backoff` (wrong keyword), fixed.
## Outcome unknown (not confirmed — verify before relying on them)
- `deploy --staging` has no recorded result: verify before relying on it.
"""


def _session() -> Conv:
    c = Conv()
    c.user("Add retries to src/client.py with backoff. Never retry a POST. Do not touch src/server.py.")
    c.call("Edit", {"file_path": "src/client.py", "old_string": "get(", "new_string": "retry_with_backoff(get,"},
           "ok")
    c.call("Bash", {"command": "pytest tests/test_client.py"},
           "E   TypeError: retry_with_backoff() got an unexpected keyword\n1 failed", is_error=True)
    c.call("Edit", {"file_path": "src/client.py", "old_string": "tries=", "new_string": "attempts="}, "ok")
    c.call("Bash", {"command": "pytest tests/test_client.py"}, "3 passed")
    c.use("Bash", {"command": "deploy --staging"})  # abandoned: the agent moved on
    for i in range(12):
        c.call("Bash", {"command": f"cat docs/part{i}.md"}, "retry notes line\n" * 60)
    c.say("Retries are in; tests pass.")
    c.user("Now document the retry policy in docs/retries.md.")
    return c


@pytest.fixture(scope="module")
def done():
    c = _session()
    res = compact(c.events, make_policy("default"), target_tokens=1_800)
    assert res.checkpoint is not None and not res.checkpoint.covers.empty
    return c.events, res


def judge(done, text: str) -> tuple[list[str], str, list[str], int]:
    """(violation codes, completed text, sections completed, lines repaired)."""
    events, res = done
    ckpt, completed = with_summary(res.checkpoint, text, summarizer="anthropic", budget=900,
                                   mid_turn=res.record.mid_turn)
    view = build_view(events, ckpt)
    vio = validate(events=events, checkpoint=ckpt, view=view, target_tokens=None, artifacts=res.artifacts)
    ckpt, view, _, vio, repaired = repair_candidate(events, ckpt, view, view_tokens(view), vio, None,
                                                    res.artifacts, None)
    return [v.code for v in vio], ckpt.summary, completed, repaired


def test_a_faithful_paraphrase_is_used_and_only_what_it_lacks_is_completed(done):
    codes, text, completed, repaired = judge(done, FAITHFUL)
    assert codes == [] and repaired == 0
    assert text.startswith(FAITHFUL.strip()[:60])
    # the goal, constraints, files, errors and the unknown outcome were named by the model
    assert not {"Goal", "Constraints (verbatim)", "Files changed"} & set(completed)


@pytest.mark.parametrize("answer", ["", PLACEHOLDER, "## Goal\n- (none)\n## Files changed\n- (none)\n"])
def test_an_empty_or_placeholder_answer_is_refused_not_completed(done, answer):
    codes, text, _, _ = judge(done, answer)
    assert "summary_incomplete" in codes or not answer  # "": the activity refuses it first
    state = LiftedState.model_validate(done[1].checkpoint.state)
    assert carried(answer, state).share < 0.15 <= carried(FAITHFUL, state).share


def test_dropped_constraints_are_put_back_verbatim(done):
    codes, text, completed, _ = judge(done, without_constraints(FAITHFUL))
    assert codes == [] and "Constraints (verbatim)" in completed
    assert "Never retry a POST." in text.split(ALSO_HEADING, 1)[1]


def test_an_unknown_action_reported_done_is_rejected(done):
    claim = with_line(FAITHFUL, "## Commands run", "- `deploy --staging` ran and succeeded (exit 0).")
    assert "unknown_reported_done" in judge(done, claim)[0]


def test_an_obeyed_planted_instruction_is_rejected(done):
    planted = with_line(without_constraints(FAITHFUL), "## Commands run",
                        f"- `{PLANTED_COMMAND}` ran and succeeded; every test passed.")
    assert "unknown_reported_done" in judge(done, planted)[0]


def test_a_command_the_session_ran_may_be_reported_done(done):
    ok = with_line(FAITHFUL, "## Commands run", "- `pytest tests/test_client.py` passed (3 passed).")
    assert judge(done, ok)[0] == []


def test_an_invented_path_is_dropped_and_said(done):
    codes, text, _, repaired = judge(done, with_line(FAITHFUL, "## Files changed",
                                                     f"- {INVENTED_PATH}: created"))
    assert codes == [] and repaired == 1 and INVENTED_PATH not in text


def test_an_answer_in_another_language_is_rejected(done):
    state = LiftedState.model_validate(done[1].checkpoint.state)
    german = other_language(state, session_languages(state))
    assert language(german) == "de" and session_languages(state) == {"en"}
    assert "summary_language" in judge(done, german)[0]


def test_the_users_own_language_is_not_another_language():
    assert language("이제 그영상들 트랜스크립트 뽑아서 분석해서 사이트 만들어줘") == "ko"
    assert language("The agent added retries to the client and the tests pass with the fix.") == "en"


def test_a_korean_summary_full_of_paths_and_commands_is_korean():
    """A faithful answer to a Korean session quotes Latin paths, commands and code; its prose is
    Korean (one Hangul block per two or three Latin letters) and it is not refused as English."""
    c = Conv()
    c.user("이제 그 영상들 트랜스크립트 뽑아서 병렬로 분석해서 사이트 만들어줘. 영상링크와 요약을 모두 사이트에 기재해줘")
    c.call("Bash", {"command": "python /tmp/yt_fetch_all.py --out /tmp/transcripts"}, "0/49 ok", is_error=True)
    c.say("트랜스크립트 수집이 실패했습니다. 다른 방법을 조사하겠습니다.")
    state = lift_state(c.events)
    assert session_languages(state) == {"ko"}
    answer = ("## Goal\n- 영상 49개 트랜스크립트 → 병렬 분석 → 사이트 (영상링크-요약 기재)\n"
              "## Commands run\n- `python /tmp/yt_fetch_all.py --out /tmp/transcripts` → 0/49 (exit 1): "
              "the YouTube transcript API returned RequestBlocked for every video from this IP; "
              "retry with the tor SOCKS proxy on port 9050 and the cookies file\n"
              "## Errors and failed approaches\n- 수집 실패, 원인 조사 중\n")
    assert language(model_part(answer)) == "en"  # by the letter count alone it reads as English
    assert script_share(model_part(answer), "ko") >= MIN_SCRIPT_SHARE
    assert foreign_language(answer, state) is None
    german = "## Goal\n- Die Transkripte aller Videos werden geholt und die Seite wird gebaut, mit den Links.\n"
    assert foreign_language(german, state) == ("de", {"ko"})


def test_a_mid_turn_cut_quotes_the_latest_request_verbatim():
    c = Conv()
    c.user("Migrate the config loader to TOML.\nKeep the YAML reader for one release.")
    for i in range(25):
        c.call("Bash", {"command": f"python migrate.py --step {i}"}, "step output\n" * 40)
    res = compact(c.events, make_policy("default"), target_tokens=1_200)
    assert res.record.mid_turn
    ckpt, completed = with_summary(res.checkpoint, "## Goal\n- Migrate the config loader to TOML (YAML kept).\n"
                                   "## Commands run\n- `python migrate.py --step 0` .. `--step 24`\n",
                                   summarizer="anthropic", budget=600, mid_turn=True)
    assert "Latest request" in completed
    assert "Migrate the config loader to TOML.\nKeep the YAML reader for one release." in ckpt.summary
    view = build_view(c.events, ckpt)
    codes = [v.code for v in validate(events=c.events, checkpoint=ckpt, view=view, target_tokens=None)]
    assert "latest_request_missing" not in codes


def test_an_answer_over_its_budget_gives_way_least_used_sections_first(done):
    """A model that writes past its budget: its own lines give way (files read, commands...)
    while goal, constraints and unknown outcomes stay, and the summary fits the budget."""
    from compactor.engine.model_summary import TRIMMED, completion_note
    from compactor.tokens import count_text

    long = FAITHFUL + "## Files read\n" + "".join(f"- docs/part{i}.md: retry notes\n" for i in range(12))
    events, res = done
    budget = count_text(FAITHFUL) + 40
    assert count_text(long) > budget
    ckpt, completed = with_summary(res.checkpoint, long, summarizer="anthropic", budget=budget,
                                   mid_turn=res.record.mid_turn)
    assert ckpt.summary_tokens <= budget and TRIMMED in completed
    assert "Never retry a POST." in ckpt.summary and "deploy --staging" in ckpt.summary
    assert "docs/part11.md" not in ckpt.summary  # the last line of the least-used section went first
    assert completion_note(completed)[-1].startswith("model text trimmed")


def test_a_model_view_over_the_target_the_structured_one_met_is_a_hard_violation():
    from compactor.engine.model_summary import over_budget

    assert over_budget(3_215, 3_000, 2_917).startswith("summary_over_budget")
    assert over_budget(2_990, 3_000, 2_917) is None
    assert over_budget(5_290, 3_000, 5_238) is None  # the structured one could not fit either
