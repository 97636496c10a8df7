"""The agent's reports and reasons: lifted per turn, merged across compactions, rendered in a share."""

from __future__ import annotations

from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.engine.invariants import identifiers
from compactor.lifting.lift import (
    Command,
    Decision,
    FileRef,
    LiftedState,
    Request,
    lift_state,
    reconcile,
)
from compactor.lifting.narrative import (
    MAX_OUTCOMES,
    MAX_REASONS,
    REPORT_SHARE,
    Reason,
    TurnOutcome,
    clip_report,
    cut_words,
    reason_sentences,
    report_units,
)
from compactor.summarize.structured import ARTIFACT_SHARE, DECISIONS, LATEST, REASONS, REPORTS, render_summary
from compactor.tokens import count_text


def user(seq: int, text: str) -> Event:
    return Event(seq=seq, id=f"e{seq}", role="user", blocks=[TextBlock(text=text)])


def assistant(seq: int, text: str = "", uses: tuple = ()) -> Event:
    blocks: list = [TextBlock(text=text)] if text else []
    blocks += [ToolUseBlock(id=i, name=n, input=inp) for i, n, inp in uses]
    return Event(seq=seq, id=f"e{seq}", role="assistant", blocks=blocks)


def result(seq: int, tool_use_id: str, text: str) -> Event:
    return Event(seq=seq, id=f"e{seq}", role="user",
                 blocks=[ToolResultBlock(tool_use_id=tool_use_id, content=[TextBlock(text=text)])])


def two_turns() -> list[Event]:
    return [
        user(1, "Add a settings page."),
        assistant(2, "Let me look at the layout first.", (("t1", "Bash", {"command": "ls src"}),)),
        result(3, "t1", "pages\ncomponents"),
        assistant(4, "The project is Vite + React, not Next.js, so pages go under src/pages. "
                     "Added the settings page; the route is registered in the router."),
        user(5, "Now review it."),
        assistant(6, "Reviewing.", (("t2", "Bash", {"command": "npm run lint"}),)),
        result(7, "t2", "ok"),
        assistant(8, "The review scored it 50/110 and named three fixes: labels, focus order and "
                     "error text. Still left: the focus order fix."),
    ]


# --- lifting ----------------------------------------------------------------------------------


def test_each_turn_keeps_its_closing_message() -> None:
    st = lift_state(two_turns())
    assert [(o.request_seq, o.seq) for o in st.outcomes] == [(1, 4), (5, 8)]
    assert "pages go under src/pages" in st.outcomes[0].text
    assert "50/110" in st.outcomes[1].text
    # an interim message is not the turn's report
    assert not any("Let me look" in o.text for o in st.outcomes)


def test_reason_and_number_sentences_are_kept() -> None:
    st = lift_state(two_turns())
    texts = [r.text for r in st.reasons]
    assert "The project is Vite + React, not Next.js, so pages go under src/pages." in texts
    assert any("50/110" in t for t in texts)
    assert "Reviewing." not in texts


def test_reason_detection() -> None:
    text = ("I switched to httpx because requests has no HTTP/2. The cache expires after 300 seconds. "
            "Looks good. Should I also update the docs?")
    assert reason_sentences(text) == [
        "I switched to httpx because requests has no HTTP/2.",
        "The cache expires after 300 seconds.",
    ]


def test_merges_across_compactions_and_a_split_turn_keeps_its_latest_report() -> None:
    evs = two_turns()
    first = lift_state(evs[:6])  # the second turn is cut after "Reviewing."
    assert [o.seq for o in first.outcomes] == [4, 6]
    merged = lift_state(evs, prev=first)
    assert [(o.request_seq, o.seq) for o in merged.outcomes] == [(1, 4), (5, 8)]
    assert merged.outcomes == lift_state(evs).outcomes
    assert [r.text for r in merged.reasons] == [r.text for r in lift_state(evs).reasons]


def test_state_is_bounded_newest_kept() -> None:
    evs: list[Event] = []
    for i in range(MAX_OUTCOMES + 5):
        evs.append(user(10 * i + 1, f"Task number {i}."))
        evs.append(assistant(10 * i + 2, f"Done with task {i} because the rule says {i} per 60 seconds."))
    st = lift_state(evs)
    assert len(st.outcomes) == MAX_OUTCOMES
    assert st.outcomes[-1].text.startswith(f"Done with task {MAX_OUTCOMES + 4} ")
    assert "task 0 " not in " ".join(o.text for o in st.outcomes)
    many = [assistant(i, f"Step {i} uses {i} workers because the limit is {i}.") for i in range(1, 3 * MAX_REASONS)]
    st2 = lift_state(many)
    assert len(st2.reasons) == MAX_REASONS and st2.reasons[-1].seq == 3 * MAX_REASONS - 1


def test_outcomes_survive_a_round_trip_through_json() -> None:
    st = lift_state(two_turns())
    assert LiftedState.model_validate_json(st.model_dump_json()) == st
    assert LiftedState.model_validate({}).outcomes == []  # old checkpoints load


# --- clipping ---------------------------------------------------------------------------------


def test_clip_keeps_whole_sentences_and_prefers_what_is_left() -> None:
    report = ("Summary of the work. " + " ".join(f"Filler sentence number {i} here." for i in range(30))
              + " Remaining: migrate src/app/db.py to the new pool.")
    text, clipped = clip_report(report, 160)
    assert clipped and len(text) <= 160
    assert text.startswith("Summary of the work.")
    assert "Remaining: migrate src/app/db.py to the new pool." in text
    assert "…" in text


def test_markdown_is_flattened_without_breaking_paths() -> None:
    units = report_units("## Done\n- **Fixed** `src/**/*.py` globs\n```\ncode line\n```\n---\n1. Next: tests.")
    assert units == ["Fixed `src/**/*.py` globs", "Next: tests."]


def test_a_cut_never_states_half_a_path() -> None:
    cut = cut_words("Moved everything into src/components/settings/SettingsPage.tsx today", 40)
    assert cut.endswith("…") and len(cut) <= 40
    assert identifiers(cut) <= identifiers("Moved everything into src/components/settings/SettingsPage.tsx")


# --- rendering --------------------------------------------------------------------------------


def crowded(n: int = 200) -> LiftedState:
    """A state whose lists alone are far over a small budget."""
    st = lift_state(two_turns())
    return st.model_copy(update={
        "files_changed": [FileRef(path=f"src/mod_{i:03}.py", seq=100 + i, ops=["edit"]) for i in range(n)],
        "commands": [Command(seq=100 + i, command=f"ls build/dir_{i:03}", status="ok", exit_code=0,
                             tool_use_id=f"c{i}") for i in range(n)],
        "decisions": [Decision(seq=50 + i, text=f"I'll use strategy number {i} instead of the old one.")
                      for i in range(30)],
    })


def test_reports_render_newest_first() -> None:
    r = render_summary(lift_state(two_turns()), 10_000)
    items = r.sections[REPORTS]
    assert items[0].startswith("- #8 (answering #5):") and items[1].startswith("- #4 (answering #1):")
    assert r.text.index("## " + REPORTS) < r.text.index("## " + LATEST)


def test_small_budget_keeps_the_newest_report() -> None:
    st = crowded()
    for budget in (600, 1000, 1500):
        r = render_summary(st, budget)
        assert r.tokens <= budget
        assert REPORTS in r.sections, budget
        assert "50/110" in r.sections[REPORTS][0]


def test_reports_take_only_their_share_of_a_large_budget() -> None:
    long_report = " ".join(f"Changed module {i} and it now passes {i} checks." for i in range(400))
    st = crowded(20).model_copy(update={"outcomes": [TurnOutcome(seq=300, request_seq=5, text=long_report)]})
    budget = 4_000
    r = render_summary(st, budget)
    report_tokens = count_text("\n".join(r.sections[REPORTS]))
    # the files hold no detail lines here: their unused share goes to the reports
    assert report_tokens <= (REPORT_SHARE + ARTIFACT_SHARE + 0.05) * budget
    assert len(r.sections["Files changed"]) == 20  # the lifted list is not crowded out


def test_reports_keep_their_own_share_when_files_hold_details() -> None:
    long_report = " ".join(f"Changed module {i} and it now passes {i} checks." for i in range(400))
    st = crowded(20).model_copy(update={"outcomes": [TurnOutcome(seq=300, request_seq=5, text=long_report)]})
    facts = [f"LIMIT_{k} = {k * 7}" for k in range(10)] + ["uses data/input.csv"]
    st = st.model_copy(update={"files_changed": [f.model_copy(update={"facts": facts})
                                                 for f in st.files_changed]})
    budget = 4_000
    r = render_summary(st, budget)
    assert count_text("\n".join(r.sections[REPORTS])) <= (REPORT_SHARE + 0.05) * budget
    assert "LIMIT_9 = 63" in r.text  # the files' detail lines got their share


def test_the_same_sentence_is_not_rendered_twice() -> None:
    sentence = "I'll use SQLite instead of Postgres because the tests run offline."
    st = LiftedState(
        requests=[Request(seq=1, text="Set up storage.")],
        decisions=[Decision(seq=2, text=sentence)],
        reasons=[Reason(seq=2, text=sentence), Reason(seq=4, text="The pool holds at most 8 connections.")],
        outcomes=[TurnOutcome(seq=4, request_seq=1, text="Storage works. The pool holds at most 8 connections.")],
    )
    r = render_summary(st, 10_000)
    assert r.text.count(sentence) == 1
    assert r.text.count("at most 8 connections") == 1
    assert DECISIONS not in r.sections and REASONS in r.sections


def test_reconcile_keeps_reports_and_reasons() -> None:
    evs = two_turns() + [assistant(9, "", (("t9", "Bash", {"command": "npm test"}),))]
    st = lift_state(evs)
    after, resolved = reconcile(st, [result(10, "t9", "ok")])
    assert resolved == ["t9"]
    assert after.outcomes == st.outcomes and after.reasons == st.reasons


def test_a_report_skips_aider_boilerplate_and_bare_path_lines() -> None:
    text = ("To fix the frontend UI so that it does not use Chart.js, I will modify `frontend/ui.ts` to draw "
            "the chart on a `<canvas>`. Here are the *SEARCH/REPLACE* blocks:\n\nfrontend/ui.ts\n```typescript\n"
            "<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n```\n\nfrontend/ui.ts\n```typescript\nx\n```\n\n"
            "Please confirm if you would like to proceed with these changes.")
    clipped, _ = clip_report(text, 1500)
    assert clipped == ("To fix the frontend UI so that it does not use Chart.js, I will modify `frontend/ui.ts` "
                       "to draw the chart on a `<canvas>`.")
    # a message that is nothing but boilerplate is kept as it is (there is nothing better to say)
    assert clip_report("Please confirm if you would like to proceed with these changes.", 500)[0].startswith("Please")


def test_a_clipped_report_leaves_out_filler() -> None:
    text = ("Now I have everything I need. Private credit on Solana is $14B tokenized globally. That's it. "
            + " ".join(f"Finding {i} is that pool {i} holds {i * 3} loans." for i in range(30)))
    clipped, cut = clip_report(text, 400)
    assert cut and "Private credit on Solana is $14B" in clipped
    assert "That's it." not in clipped and "everything I need" not in clipped


def test_a_clipped_report_keeps_what_the_agent_ruled_out() -> None:
    report = ("Here is the picture. The tokenization cluster is crowded with generic platforms. "
              "Several teams are shipping dashboards this year. "
              "But none reached the accelerator, and no RWA project has won a first prize. "
              "Teams mostly build on the usual stack.")
    text, clipped = clip_report(report, 130)
    assert clipped and text.startswith("Here is the picture.")
    assert "But none reached the accelerator, and no RWA project has won a first prize." in text


def test_a_clipped_report_keeps_the_question_it_asked_the_user() -> None:
    report = ("Here is the picture. " + " ".join(f"Gap {i} is a market of some size." for i in range(8))
              + " What's your background — are you coming from TradFi or DeFi?")
    text, clipped = clip_report(report, 120)
    assert clipped and text.startswith("Here is the picture.")
    assert text.endswith("What's your background — are you coming from TradFi or DeFi?")
