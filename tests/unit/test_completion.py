"""A model summary is completed from the lifted state on meaning; one that names almost nothing
by itself is a placeholder (issue 14: a paraphrase was rejected, a placeholder accepted)."""

from __future__ import annotations

from compactor.lifting.lift import lift_state
from compactor.summarize.acceptance import MIN_CARRIED, carried, is_placeholder, named, terms
from compactor.summarize.completion import ALSO_HEADING, complete_from_state
from compactor.tokens import count_text
from tests.unit.engine_fixtures import Conv


def _session() -> Conv:
    c = Conv()
    c.user("Add retries to src/client.py. Never retry a POST.")
    c.call("Edit", {"file_path": "src/client.py", "old_string": "x", "new_string": "y"}, "ok")
    c.call("Bash", {"command": "pytest tests/test_client.py"}, "E   TypeError: bad\n1 failed", is_error=True)
    c.use("Bash", {"command": "deploy --prod"})  # abandoned: outcome unknown
    for i in range(15):
        c.call("Bash", {"command": f"ls dir{i}"}, "file\n" * 80)
    c.user("Now document it.")
    return c


def test_a_stub_answer_is_completed_with_what_the_state_says_the_next_turn_needs():
    c = _session()
    state = lift_state(c.events[:-1])
    text, added = complete_from_state("## Goal\n- stub", state, 2_000)
    assert ALSO_HEADING in text
    assert "Add retries to src/client.py." in text and "Never retry a POST." in text
    assert "src/client.py" in text and "deploy --prod" in text
    assert "Goal" in added and "Files changed" in added
    # ... and it is a placeholder: measured on the model's own text, not the completed one
    assert is_placeholder(text, state) is not None
    assert carried(text, state).share > MIN_CARRIED  # the completed text itself would pass


def test_a_complete_model_summary_is_left_as_written():
    c = _session()
    state = lift_state(c.events[:-1])
    full, _ = complete_from_state("", state, 10_000)
    written = full.split(ALSO_HEADING, 1)[1]  # every item, as a model might have listed them
    again, added = complete_from_state(written, state, 10_000)
    assert added == [] and again == written


def test_a_paraphrase_in_another_wording_names_the_request():
    c = _session()
    state = lift_state(c.events[:-1])
    para = ("## Goal\n- The user wants retries added to the HTTP client in `src/client.py`; a POST "
            "must never be retried (\"Never retry a POST.\").\n"
            "## Files changed\n- src/client.py: retry logic\n"
            "## Errors and failed approaches\n- `pytest tests/test_client.py` failed with TypeError\n"
            "## Outcome unknown (not confirmed — verify before relying on them)\n"
            "- `deploy --prod` has no result: verify before relying on it\n")
    text, added = complete_from_state(para, state, 2_000)
    assert "Goal" not in added and "Files changed" not in added and "Constraints (verbatim)" not in added
    assert "Outcome unknown (not confirmed — verify before relying on them)" not in added
    assert is_placeholder(para, state) is None


def test_terms_work_in_any_language_and_ignore_rendering_decorations():
    assert "영상" in terms("영상들 트랜스크립트 뽑아서")
    assert named(terms("- #12 `pytest tests/test_client.py` → exit 1"), "ran test_client.py again")
    assert not terms("- #12 → exit 0")
    assert not named(terms("Add retries to src/client.py"), "## goal placeholder")


def test_a_changed_file_the_model_left_out_comes_back_with_what_it_holds():
    """Completion adds a file the answer did not name together with its detail lines (the
    constants it defines), never those details alone under no file."""
    from compactor.lifting.lift import lift_state
    from compactor.summarize.completion import complete_from_state
    from tests.unit.engine_fixtures import Conv

    c = Conv()
    c.user("Write the scoring module.")
    c.call("Write", {"file_path": "src/score.py",
                     "content": "WEIGHT_RECENCY = 0.35\nMAX_SCORE = 100\n\ndef score(item):\n    return 1\n"}, "ok")
    state = lift_state(c.events)
    text, added = complete_from_state("## Goal\n- Write the scoring module.\n", state, 2_000)
    assert "Files changed" in added
    item = text[text.index("src/score.py"):]
    assert "WEIGHT_RECENCY" in item.split("\n- ", 1)[0]  # on the file's own item


def test_after_a_mid_turn_cut_a_constraint_inside_the_quoted_request_is_not_repeated():
    c = Conv()
    c.user("Fix the flaky upload test in tests/test_upload.py. Never retry a POST. Keep the public API.")
    c.call("Bash", {"command": "pytest tests/test_upload.py"}, "1 failed", is_error=True)
    state = lift_state(c.events)
    assert any(x.text == "Never retry a POST." for x in state.constraints)
    answer = "## Goal\n- Fix the flaky upload test\n## Errors and failed approaches\n- pytest tests/test_upload.py: 1 failed"
    text, added = complete_from_state(answer, state, 2_000, latest_full=True)
    request = c.events[1].text  # (events[0]: Conv's pinned system prompt)
    assert request in text  # quoted whole, so the constraint is there word for word ...
    assert text.count("Never retry a POST.") == 1  # ... and only there
    assert "Latest request" in added


def _failed_migration() -> Conv:
    c = Conv()
    c.user("Get the migrations running against the staging database.")
    c.call("Bash", {"command": "alembic upgrade head"},
           "sqlalchemy.exc.OperationalError: connection to server at 10.0.4.12, port 5432 failed: "
           "FATAL: password authentication failed for user migrator_svc", is_error=True)
    c.user("ok")
    return c


def test_room_left_goes_to_an_error_the_summary_names_only_in_part():
    """The model named the failed call (so completion's first pass has nothing to add), but not
    why it failed: with room left in its budget the lifted error line is added in full; without
    room the summary stays as written."""
    state = lift_state(_failed_migration().events[:-1])
    summary = ("## Goal\n- Get the migrations running against the staging database.\n"
               "## Errors and failed approaches\n- `alembic upgrade head` failed: no server connection.\n")
    text, added = complete_from_state(summary, state, 2_000)
    assert "Errors and failed approaches" in added
    also = text.split(ALSO_HEADING, 1)[1]
    assert "password authentication failed for user migrator_svc" in also and "10.0.4.12" in also

    tight = count_text(summary) + 20
    text, added = complete_from_state(summary, state, tight)
    assert "Errors and failed approaches" not in added and "migrator_svc" not in text


def test_an_error_the_summary_carries_whole_is_not_added_again():
    state = lift_state(_failed_migration().events[:-1])
    summary = ("## Goal\n- Get the migrations running against the staging database.\n"
               "## Errors and failed approaches\n- `alembic upgrade head` failed: sqlalchemy.exc.OperationalError, "
               "connection to 10.0.4.12 port 5432: FATAL password authentication failed for user "
               "migrator_svc. Still open.\n")
    text, added = complete_from_state(summary, state, 2_000)
    assert "Errors and failed approaches" not in added


def test_room_left_goes_to_what_a_fetch_returned_when_the_summary_names_only_the_call():
    c = Conv()
    c.user("Find hackathon projects about tokenized invoices.")
    c.call("Bash", {"command": 'curl -s -X POST "$API/search/projects" -d \'{"query": "invoice factoring"}\''},
           '{"results": [{"name": "CargoBill", "slug": "cargobill"}, {"name": "InvoiceChain", "slug": '
           '"invoicechain"}, {"name": "Factorly", "slug": "factorly"}], "total": 3}')
    c.user("ok")
    state = lift_state(c.events[:-1])
    summary = ("## Goal\n- Find hackathon projects about tokenized invoices.\n"
               "## Commands run\n- `curl` POST to $API/search/projects for invoice factoring: ok.\n")
    text, added = complete_from_state(summary, state, 2_000)
    assert added == ["Commands run"]
    assert "CargoBill, InvoiceChain, Factorly" in text.split(ALSO_HEADING, 1)[1]


def test_empty_sections_of_a_tight_answer_give_their_room_to_what_it_names_only_in_part():
    """A model answer at a tight budget that keeps the template's empty sections ("- (none)"):
    they go, as the structured summary leaves them out, and the room they took carries the
    error line the answer names only in part (Soul at 10%: five empty sections, about a
    tenth of a 449-token answer)."""
    from compactor.engine.model_summary import fit_completed, without_empty_sections

    state = lift_state(_failed_migration().events[:-1])
    named = ("## Goal\n- Get the migrations running against the staging database.\n"
             "## Errors and failed approaches\n- `alembic upgrade head` failed: no server connection.\n")
    empty = "".join(f"## {name}\n- (none)\n" for name in (
        "Constraints (verbatim)", "Tests", "Outcome unknown (not confirmed — verify before relying on them)",
        "Artifacts", "Links the user gave", "Files read"))
    answer = named + empty
    assert without_empty_sections(answer) == named.rstrip("\n")
    budget = count_text(answer) + 30  # the answer fits; no room for the error line beside its empty sections
    assert "migrator_svc" not in complete_from_state(answer, state, budget)[0]
    text, added = fit_completed(answer, state, budget)
    assert "- (none)" not in text and "## Tests" not in text
    assert "Errors and failed approaches" in added and "migrator_svc" in text.split(ALSO_HEADING, 1)[1]
    assert count_text(text) <= budget
    assert without_empty_sections(named) == named  # nothing to drop: the text as written
