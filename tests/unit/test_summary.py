"""The structured summarizer: fixed sections, budget, what is dropped first and what never is."""

from __future__ import annotations

import re

import pytest

from compactor.lifting.lift import (
    Artifact,
    Command,
    Constraint,
    Decision,
    ErrorItem,
    FailedApproach,
    FileRef,
    LastAction,
    LiftedState,
    Request,
    TestRun,
    Todo,
    UnknownAction,
    Url,
)
from compactor.lifting.narrative import Reason, TurnOutcome
from compactor.summarize.structured import (
    COMMANDS,
    CONSTRAINTS,
    DECISIONS,
    ERRORS,
    FILES_CHANGED,
    FILES_READ,
    GOAL,
    LATEST,
    REQUESTS,
    SECTION_NAMES,
    TESTS,
    UNKNOWN,
    render_summary,
    section_names,
)
from compactor.tokens import count_text


def big_state(n_commands: int = 60, n_reads: int = 40) -> LiftedState:
    return LiftedState(
        goal=Request(seq=1, text="Port the CLI to click. Keep the old flags working."),
        requests=[
            Request(seq=1, text="Port the CLI to click. Keep the old flags working."),
            Request(seq=50, text="Also add shell completion for bash."),
            Request(seq=90, text="Middle request number two about docs."),
            Request(seq=400, text="Now write the changelog entry and stop."),
        ],
        constraints=[
            Constraint(seq=1, text="Never change the exit codes of the old commands."),
            Constraint(seq=50, text="Do not add new dependencies besides click."),
        ],
        decisions=[Decision(seq=3 + i, text=f"I'll use click group number {i} instead of argparse.")
                   for i in range(5)],
        files_read=[FileRef(path=f"src/read_{i:03}.py", seq=10 + i, ops=["read"]) for i in range(n_reads)],
        files_changed=[FileRef(path="src/cli.py", seq=300, ops=["edit"], count=4),
                       FileRef(path="CHANGELOG.md", seq=390, ops=["write"])],
        commands=[Command(seq=100 + i, command=f"ls -la build/dir_{i:03}", tool="Bash", tool_use_id=f"c{i}",
                          exit_code=0, status="ok", result_seq=101 + i) for i in range(n_commands)]
        + [Command(seq=350, command="pytest -q", tool="Bash", tool_use_id="ct", exit_code=1,
                   status="failed", result_seq=351)],
        tests=[TestRun(seq=350, command="pytest -q", tool_use_id="ct", status="failed", exit_code=1,
                       summary="1 failed, 40 passed", result_seq=351)],
        errors=[ErrorItem(seq=351, name="AssertionError", message="E   AssertionError: exit 2 != 1",
                          tool_use_id="ct")],
        failed_approaches=[FailedApproach(seq=350, what="pytest -q", error="E   AssertionError",
                                          tool_use_id="ct")],
        unknown_actions=[UnknownAction(seq=399, tool_use_id="toolu_pending", name="Bash", kind="command",
                                       summary="Bash: git push origin main", command="git push origin main")],
        todos=[Todo(text="port commands", status="completed"), Todo(text="changelog", status="in_progress")],
        todos_seq=380,
        artifacts=[Artifact(uri="artifact://sha256/" + "b" * 64, sha256="b" * 64, bytes=123456, seq=120)],
        urls=[Url(url="https://click.palletsprojects.com/en/stable/", seq=1)],
        covers_end=400,
        outcomes=[TurnOutcome(seq=395, request_seq=50, text="Completion for bash works; zsh is left.")],
        reasons=[Reason(seq=310, text="Exit codes stay as they were because scripts depend on them.")],
        last_action=LastAction(seq=399, what="git push origin main", intent="Pushing the branch now.",
                               tool_use_id="toolu_pending"),
    )


def headings(text: str) -> list[str]:
    return re.findall(r"^## (.+)$", text, flags=re.M)


def test_all_sections_in_template_order() -> None:
    r = render_summary(big_state(), 100_000)
    assert headings(r.text) == list(SECTION_NAMES)
    assert section_names == SECTION_NAMES
    assert r.tokens == count_text(r.text)
    assert r.dropped == {}


def test_items_are_rendered() -> None:
    r = render_summary(big_state(), 100_000)
    t = r.text
    for needle in [
        "Port the CLI to click. Keep the old flags working.",
        "Never change the exit codes of the old commands.",
        "Do not add new dependencies besides click.",
        "src/cli.py (edit ×4, last #300)",
        "`pytest -q` → exit 1",
        "→ FAILED (1 failed, 40 passed), at log version 351; files changed since: CHANGELOG.md",
        "AssertionError",
        "[tool_use toolu_pending] Bash: git push origin main",
        "[in_progress] changelog",
        "https://click.palletsprojects.com/en/stable/",
        "Now write the changelog entry and stop.",
        "artifact://sha256/" + "b" * 64,
    ]:
        assert needle in t, needle
    assert r.sections[CONSTRAINTS] == [
        "- Never change the exit codes of the old commands.",
        "- Do not add new dependencies besides click.",
    ]
    # the latest request comes last, after everything else
    assert t.rstrip().endswith("Now write the changelog entry and stop.")


def test_within_budget_and_drops_old_commands_first() -> None:
    state = big_state()
    full = render_summary(state, 100_000)
    budget = full.tokens - 150
    r = render_summary(state, budget)
    assert r.tokens <= budget and r.tokens == count_text(r.text)
    assert r.dropped.get(COMMANDS, 0) > 0
    # only successful listings went; the failing test command stays, files read untouched
    assert "`pytest -q` → exit 1" in r.text
    assert FILES_READ not in r.dropped
    # the oldest listings went first
    assert "dir_000" not in r.text and f"dir_{59:03}" in r.text
    assert "more not shown for space" in r.text


def test_drop_order_commands_then_files_read_then_decisions() -> None:
    state = big_state()
    no_cmds = render_summary(state.model_copy(update={"commands": state.commands[-1:]}), 100_000)
    r = render_summary(state, no_cmds.tokens - 100)
    # the four newest distinct commands that worked are kept longer than files read
    assert r.dropped.get(COMMANDS) == 56
    assert r.dropped.get(FILES_READ, 0) > 0
    assert DECISIONS not in r.dropped and FILES_CHANGED not in r.dropped


@pytest.mark.parametrize("budget", [50, 150, 300, 600])
def test_never_drops_goal_constraints_unknown_latest(budget: int) -> None:
    r = render_summary(big_state(), budget)
    for must in [
        "Port the CLI to click. Keep the old flags working.",
        "Never change the exit codes of the old commands.",
        "Do not add new dependencies besides click.",
        "toolu_pending",
        "Now write the changelog entry and stop.",
    ]:
        assert must in r.text, (budget, must)
    for name in (GOAL, CONSTRAINTS, UNKNOWN, LATEST):
        assert name not in r.dropped


def test_tight_budget_drops_everything_droppable_but_says_so() -> None:
    r = render_summary(big_state(), 180)
    assert FILES_READ in r.dropped and COMMANDS in r.dropped and TESTS in r.dropped
    assert "Not shown for space" in r.text


def test_middle_requests_dropped_before_files_changed() -> None:
    state = big_state(n_commands=0, n_reads=0).model_copy(update={"decisions": []})
    full = render_summary(state, 100_000)
    r = render_summary(state, full.tokens - 10)
    assert r.dropped.get(REQUESTS, 0) >= 1
    assert "src/cli.py" in r.text


def test_long_request_note_points_at_the_log() -> None:
    st = LiftedState(goal=Request(seq=7, text="Head of a long spec", tokens=9000, truncated=True),
                     requests=[Request(seq=7, text="Head of a long spec", tokens=9000, truncated=True)])
    r = render_summary(st, 10_000)
    assert "Head of a long spec" in r.text
    assert "in the log at seq 7" in r.text
    assert "the same as the goal" in r.text


def test_empty_state_renders_empty() -> None:
    r = render_summary(LiftedState(), 1000)
    assert r.text == "" and r.tokens == 0


def test_deterministic() -> None:
    a = render_summary(big_state(), 700)
    b = render_summary(big_state(), 700)
    assert a.text == b.text and a.sections == b.sections


def test_constraints_quoted_in_goal_fold_last_but_stay_verbatim() -> None:
    goal = "Build the exporter. " + " ".join(f"Context sentence {i}." for i in range(80)) + " Never write to /etc."
    st = LiftedState(goal=Request(seq=1, text=goal), requests=[Request(seq=1, text=goal)],
                     constraints=[Constraint(seq=1, text="Never write to /etc.")],
                     files_read=[FileRef(path=f"src/f{i}.py", seq=2 + i) for i in range(10)])
    full = render_summary(st, 100_000)
    assert "- Never write to /etc." in full.text
    no_files = render_summary(st.model_copy(update={"files_read": []}), 100_000)
    # dropping the files read adds a one-line note (~10 tokens): the rule must go too
    r = render_summary(st, no_files.tokens + 4)
    assert r.tokens <= no_files.tokens + 4
    assert r.dropped.get(FILES_READ) == 10
    assert r.dropped.get(CONSTRAINTS) == 1 and "- Never write to /etc." not in r.text
    assert "Never write to /etc." in r.text  # inside the goal, verbatim
    assert "Context sentence 79." in r.text  # the goal was not shortened for it
    # when even the goal must shrink to a head quote, the rule is listed again
    tiny = render_summary(st, 50)
    assert "shortened for space" in tiny.text
    assert "- Never write to /etc." in tiny.text


def test_errors_one_line_per_name() -> None:
    st = LiftedState(goal=Request(seq=1, text="go"), requests=[Request(seq=1, text="go")],
                     errors=[ErrorItem(seq=5, name="KeyError", message="KeyError: 'a'"),
                             ErrorItem(seq=9, name="KeyError", message="KeyError: 'b'"),
                             ErrorItem(seq=12, name="TypeError", message="TypeError: x")])
    r = render_summary(st, 10_000)
    assert r.sections["Errors and failed approaches"] == [
        "- KeyError (#5, #9): KeyError: 'b'", "- TypeError (#12): TypeError: x"]


# --- corpus -----------------------------------------------------------------------------------

from tests.conftest import corpus_files  # noqa: E402

CORPUS = corpus_files()


@pytest.mark.corpus
@pytest.mark.parametrize("budget", [800, 3000])
@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_corpus_summary_keeps_protected(path, budget: int) -> None:
    from compactor import importers
    from compactor.lifting.lift import lift_state

    st = lift_state(importers.import_file(path).events)
    r = render_summary(st, budget)
    norm = " ".join(r.text.split())
    for c in st.constraints:
        assert " ".join(c.text.split()) in norm, c.text
    for u in st.unknown_actions:
        assert u.tool_use_id in r.text
    assert st.goal is not None and " ".join(st.goal.text[:200].split()) in norm
    latest = st.requests[-1]
    assert " ".join(latest.text[:200].split()) in norm
    if r.tokens > budget:
        # only the never-dropped content may exceed the budget, and then nothing droppable is left
        assert all(name in (GOAL, CONSTRAINTS, UNKNOWN, LATEST) for name in r.sections), r.sections.keys()


def test_a_decision_that_is_also_a_reason_is_said_once_even_beside_failures() -> None:
    from compactor.lifting.lift import lift_state
    from tests.unit.engine_fixtures import Conv

    c = Conv()
    c.user("Fix the refill bug.")
    c.call("Bash", {"command": "pytest -q"}, "E   AssertionError: boom\n1 failed", is_error=True)
    c.say("I decided to compute refill from the float elapsed time instead of a sliding window, "
          "because it keeps the public API unchanged.")
    c.call("Bash", {"command": "pytest -q"}, "E   AssertionError: boom again\n1 failed", is_error=True)
    text = render_summary(lift_state(c.events), 10_000).text
    assert text.count("because it keeps the public API unchanged") == 1


# --- what a reader of a small summary needs (issue 14 item 4, round two) -----------------------

LONG_OLD = ("Implement the synthetic data generation script in scripts/generate_data.py\n\n"
            "Using numpy and pandas:\n\n-Generate 1000 rows of a synthetic IoT dataset with these columns: "
            "temperature, humidity, light, co2, and a label such as target\n\n-Use random normal "
            "distribution for the sensor values and target should be computed as a linear combination of "
            "the 4 sensor values. Add some noise to be more realistic.\n-Save the CSV file in data/iot_data.csv")
LONG_LATEST = ("Rewrite drawChart() so that:\n   - The chart has visible X and Y axes.\n   - Axes have labels: "
               "\"Epoch\" (X-axis) and \"MSE\" (Y-axis).\n   - There is enough padding so the labels are not cut "
               "off.\n   - The chart scales correctly even if MSE values are large.")


def _requests_state() -> LiftedState:
    reqs = [Request(seq=1, text="Create the project layout."), Request(seq=7, text=LONG_OLD),
            Request(seq=20, text=LONG_OLD.replace("scripts/generate_data.py", "scripts/other.py")),
            Request(seq=40, text=LONG_LATEST)]
    return LiftedState(goal=reqs[0], requests=reqs,
                       outcomes=[TurnOutcome(seq=8, request_seq=7, text="Wrote scripts/generate_data.py.")])


def test_an_older_answered_request_is_one_line_and_the_latest_stays_verbatim() -> None:
    r = render_summary(_requests_state(), 100_000, latest_full=True)
    (line7, line20) = r.sections[REQUESTS]
    assert "\n" not in line7 and line7.startswith("- #7 (answered at #8; full text at #7): Implement the synthetic")
    assert len(line7) < len(LONG_OLD) * 0.75
    # one no report answered (it may still be pending) says so and keeps more of its words
    assert line20.startswith("- #20 (no closing report in the log") and len(line20) > len(line7)
    assert LONG_LATEST in r.text  # verbatim, line breaks and all
    assert LONG_OLD not in r.text


def test_file_details_outlast_older_requests_and_reports() -> None:
    facts = ["def generate_synthetic_data(num_rows=1000)",
             "target = (0.5 * temperature) + (0.3 * humidity) + (0.1 * light) + (0.1 * co2)",
             "uses data/iot_data.csv"]
    st = _requests_state().model_copy(update={
        "files_changed": [FileRef(path="scripts/generate_data.py", seq=8, ops=["edit"], facts=facts)],
        "outcomes": [TurnOutcome(seq=8, request_seq=7, text="Wrote the generator. " * 30)]})
    full = render_summary(st, 100_000, latest_full=True)
    r = render_summary(st, full.tokens - 60, latest_full=True)
    assert r.dropped  # something had to go ...
    assert "target = (0.5 * temperature) + (0.3 * humidity)" in r.text  # ... not what the file computes
    assert "uses data/iot_data.csv" in r.text


def test_a_failure_fixed_by_a_file_change_names_the_change_and_a_retry_does_not() -> None:
    files = [FileRef(path="pkg/handler.py", seq=20, ops=["edit"])]
    st = LiftedState(
        goal=Request(seq=1, text="Fix the pixel bug."), requests=[Request(seq=1, text="Fix the pixel bug.")],
        files_changed=files,
        failed_approaches=[
            FailedApproach(seq=8, what="python repro.py", tool_use_id="t8", key="python repro.py",
                           cause="AttributeError: PixelRepresentation is missing", resolved_at=22),
            FailedApproach(seq=14, what="edit 287:295 (pkg/handler.py)", tool_use_id="t14", key="edit handler",
                           cause="E999 SyntaxError: unmatched ']'", resolved_at=20)])
    r = render_summary(st, 100_000)
    fixed, retried = r.sections[ERRORS]
    assert "resolved at #22 after changing pkg/handler.py (#20)" in fixed
    assert "resolved at #20:" in retried and "after changing" not in retried  # #20 is the retry itself


def test_a_long_fact_a_newer_file_already_says_is_counted_not_repeated() -> None:
    ua = "session.headers['User-Agent'] = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120.0'"
    st = LiftedState(files_changed=[
        FileRef(path="/tmp/v1.py", seq=10, ops=["write"], facts=[ua, "uses data/videos.json", "TIMEOUT = 30"]),
        FileRef(path="/tmp/v2.py", seq=20, ops=["write"], facts=[ua, "uses data/videos.json", "TIMEOUT = 60"])])
    r = render_summary(st, 100_000)
    assert r.text.count("Mozilla/5.0") == 1
    v1 = r.text.split("- /tmp/v1.py", 1)[1]
    assert "1 more as in /tmp/v2.py" in v1
    assert "uses data/videos.json" in v1 and "TIMEOUT = 30" in v1  # short facts are said for each file


def test_one_sentence_naming_two_files_is_said_once() -> None:
    note = "printenv.pl prints every environment variable so the upload shows what the server runs."
    st = LiftedState(files_changed=[FileRef(path="printenv.pl", seq=17, ops=["create"], note=note),
                                    FileRef(path="/srv/app/printenv.pl", seq=19, ops=["edit"], note=note)])
    r = render_summary(st, 100_000)
    assert r.text.count(note) == 1


def test_a_fix_that_names_the_file_is_not_said_twice() -> None:
    st = LiftedState(
        files_changed=[FileRef(path="tests/api/conftest.py", seq=17, ops=["write"])],
        failed_approaches=[FailedApproach(seq=15, what="pytest -q tests/api", tool_use_id="t15", key="pytest api",
                                          cause="E KeyError: 'offset_id'", resolved_at=19,
                                          next="`cat > tests/api/conftest.py <<'EOF' ...` (#17)")])
    (line,) = render_summary(st, 100_000).sections[ERRORS]
    assert "after changing tests/api/conftest.py (#17)" in line and "next:" not in line
    # still open: the agent's next move is all the reader has
    open_st = st.model_copy(update={"failed_approaches": [st.failed_approaches[0].model_copy(
        update={"resolved_at": None})]})
    assert "next: `cat > tests/api/conftest.py" in render_summary(open_st, 100_000).sections[ERRORS][0]


def test_older_files_details_go_before_the_older_reports_and_the_newest_files_after() -> None:
    files = [FileRef(path=f"src/m{i}.py", seq=10 * i, ops=["write"], facts=[f"LIMIT_{i} = {i * 11}"])
             for i in range(1, 7)]
    reports = [TurnOutcome(seq=10 * i + 5, request_seq=10 * i - 1, text=f"Done: module {i} now batches.")
               for i in range(1, 7)]
    goal = "Build the six modules. " + " ".join(f"Module {i} batches its writes." for i in range(80))
    st = LiftedState(goal=Request(seq=1, text=goal), files_changed=files,
                     requests=[Request(seq=1, text=goal)], outcomes=reports)
    full = render_summary(st, 100_000)
    r = render_summary(st, full.tokens - 30)
    assert "LIMIT_6 = 66" in r.text and "LIMIT_4 = 44" in r.text  # the newest three files
    assert "LIMIT_1 = 11" not in r.text  # the oldest file's detail went first ...
    assert "module 1 now batches" in r.text  # ... before an older report
