"""Limitations a tool's answer stated about itself, and approaches the agent gave up on, as failure lines."""

from __future__ import annotations

import json

from compactor.lifting.failures import PARTIAL_ERROR
from compactor.lifting.lift import lift_state
from compactor.summarize.structured import ERRORS, render_summary
from tests.unit.test_lift import assistant, results, user


def _article(title: str, total: int, restricted: bool, offset: int = 0) -> str:
    more = offset + 8000 < total
    return json.dumps({"title": title, "source": "acme_research", "content": "x" * 300, "restricted": restricted,
                       "offset": offset, "maxChars": 8000, "totalChars": total, "nextOffset": offset + 8000,
                       "hasMore": more})


def _fetch(uid: str, doc: str, extra: str = "") -> tuple:
    return (uid, "bash", {"command": f'curl -s -H "Authorization: Bearer $TOKEN" "$API/archives/{doc}{extra}"'})


def _research(page_on: bool) -> list:
    evs = [
        user(1, "Research the state of onchain credit and report the gaps."),
        assistant(2, "Fetching the two reports.", (_fetch("f1", "d1"), _fetch("f2", "d2"))),
        results(3, ("f1", _article("Onchain Credit Markets", 20526, True), False),
                ("f2", _article("Price Feeds Today", 12000, False), False)),
    ]
    if page_on:
        evs += [assistant(4, "Reading the rest of the first report.", (_fetch("f3", "d1", "?offset=8000"),)),
                results(5, ("f3", _article("Onchain Credit Markets", 16000, False, 8000), False))]
    return evs + [
        assistant(6, "Now let me pull more depth with targeted web searches.",
                  (("w1", "WebSearch", {"query": "onchain credit gaps"}),)),
        results(7, ("w1", "1. Credit gaps in 2026 ...", False)),
        assistant(8, "Here is the picture: private credit is thin onchain."),
    ]


def test_a_fetch_whose_answer_says_it_is_cut_is_a_limitation_with_what_came_back_and_what_the_agent_did() -> None:
    st = lift_state(_research(page_on=False))
    cut = [fa for fa in st.failed_approaches if fa.error == PARTIAL_ERROR]
    assert [fa.tool_use_id for fa in cut] == ["f1", "f2"] and all(fa.resolved_at is None for fa in cut)
    [line] = [ln for ln in render_summary(st, 2_000).sections[ERRORS] if "partial" in ln]
    assert line.startswith("- #2 2 answers came back partial (their own fields), the rest never fetched: ")
    assert "\"Onchain Credit Markets (acme_research)\": restricted, 8000 of 20526 chars (#2)" in line
    assert "\"Price Feeds Today (acme_research)\": 8000 of 12000 chars (#2)" in line
    assert line.endswith("next: \"Now let me pull more depth with targeted web searches.\" (#6)")
    # the fetch worked: it is still an ok command (nothing to rerun)
    assert {c.tool_use_id: c.status for c in st.commands}["f1"] == "ok"


def test_a_later_call_for_the_rest_of_a_cut_answer_is_its_resolution() -> None:
    st = lift_state(_research(page_on=True))
    first = next(fa for fa in st.failed_approaches if fa.tool_use_id == "f1")
    assert first.resolved_at == 4
    [line] = [ln for ln in render_summary(st, 2_000).sections[ERRORS] if "partial" in ln]
    assert "1 never fetched further" in line and "8000 of 20526 chars (#2, rest fetched at #4)" in line


FORM = "<html><body><p>Your name is test.</p></body></html>"


def _probing() -> list:
    return [
        user(1, "Find the flag on the shop service."),
        assistant(2, "Trying a shell payload in the name field.",
                  (("p1", "bash", {"command": "curl -X POST -d 'name=x;id' http://shop.test/cgi/form.pl"}),)),
        results(3, ("p1", FORM, False)),
        assistant(4, "The attempt to inject `id` did not yield any additional output. Trying a print payload.",
                  (("p2", "bash", {"command": "curl -X POST -d 'name=x\";print 1' http://shop.test/cgi/form.pl"}),)),
        results(5, ("p2", FORM, False)),
        assistant(6, "The print payload did not yield any additional output, suggesting that the bug is not on this "
                     "page.Moving on to the upload page.",
                  (("p3", "bash", {"command": "curl http://shop.test/cgi/upload.pl"}),)),
        results(7, ("p3", "<form enctype='multipart/form-data'></form>", False)),
        assistant(8, "In Perl, `<>` doesn't work with strings, unless the string is `ARGV`. The upload page takes a file."),
    ]


def test_tries_at_one_target_that_did_nothing_are_one_line_with_the_agents_conclusion_and_where_it_went() -> None:
    st = lift_state(_probing())
    lines = render_summary(st, 2_000).sections[ERRORS]
    [line] = [ln for ln in lines if "form.pl" in ln]
    assert line.startswith("- #2 `curl -X POST -d 'name=x;id' http://shop.test/cgi/form.pl` → ran, no visible effect: "
                           "the agent: \"The attempt to inject `id` did not yield any additional output.\"")
    assert "; then #4 `curl -X POST -d 'name=x\";print 1' …` → no visible effect either: the agent: \"The print payload " \
           "did not yield any additional output, suggesting that the bug is not on this page.\";" in line  # (not the next sentence)
    assert line.endswith("next call: `curl http://shop.test/cgi/upload.pl` (#6)")
    # how a thing behaves ("doesn't work with strings, unless ...") is no failed approach
    assert not any("the agent said" in ln for ln in lines)


def test_one_call_that_did_nothing_without_a_why_stays_a_finding() -> None:
    st = lift_state(_probing()[:4] + [assistant(4, "The attempt to inject `id` did not yield any additional output.")])
    assert not render_summary(st, 2_000).sections.get(ERRORS)


def test_a_search_answer_says_what_it_was_filtered_for() -> None:
    from compactor.lifting.outputs import output_gist
    answer = json.dumps({"results": [{"name": "DeVolt", "similarity": 0.07}, {"name": "CargoBill", "similarity": 0.06}],
                         "filtersApplied": {"filters": {"acceleratorOnly": True}}, "totalFound": 9, "hasMore": True})
    assert output_gist(answer) == "got: for acceleratorOnly=true; results (2): DeVolt, CargoBill"


def test_what_a_run_printed_in_one_short_line_is_kept_with_the_command() -> None:
    from compactor.summarize.structured import COMMANDS
    st = lift_state([
        user(1, "Fix the rounding of the duration field."),
        assistant(2, "Reproducing first.", (("r1", "bash", {"command": "python repro.py"}),)),
        results(3, ("r1", "344\n(Open file: /repo/repro.py)\n(Current directory: /repo)\nbash-$", False)),
        assistant(4, "", (("r2", "bash", {"command": "touch done.txt"}),)),
        results(5, ("r2", "Your command ran successfully and did not produce any output.", False)),
    ])
    lines = render_summary(st, 2_000).sections[COMMANDS]
    assert "- #2 `python repro.py` → ok: printed: 344" in lines
    assert "- #4 `touch done.txt` → ok" in lines  # (a harness note is no output)


def test_a_search_answer_counts_its_items_once() -> None:
    from compactor.lifting.outputs import output_gist
    answer = json.dumps({"results": [{"name": f"P{i}"} for i in range(7)]})
    assert output_gist(answer) == "got: results (7): P0, P1, P2, P3, P4, …"


def test_a_cut_answers_command_line_goes_before_an_older_request_its_errors_line_repeats_it() -> None:
    from compactor.summarize.structured import COMMANDS, REQUESTS
    older = [user(0, "How big is onchain credit?"), assistant(0, "About $2B across three protocols."),
             user(0, "Which lenders dominate the undercollateralized pools today?"),
             assistant(0, "Two lenders hold most of it.")]
    evs = [*older, *_research(page_on=False)]
    evs = [e.model_copy(update={"seq": k, "id": f"e{k}"}) for k, e in enumerate(evs)]
    st = lift_state(evs)
    full = render_summary(st, 5_000)
    assert any("archives/d1" in ln for ln in full.sections[COMMANDS])
    tight = render_summary(st, full.tokens - 40)
    assert any("came back partial" in ln for ln in tight.sections[ERRORS])
    assert any("Which lenders dominate" in ln for ln in tight.sections[REQUESTS])
    assert not any("archives/d1" in ln for ln in tight.sections.get(COMMANDS, []))
