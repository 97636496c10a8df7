"""A call that ran yet did nothing the agent wanted is a failure, told in the agent's own words."""

from __future__ import annotations

from compactor.lifting.failures import SOFT_ERROR
from compactor.lifting.lift import lift_state
from compactor.summarize.structured import ERRORS, render_summary
from tests.unit.test_lift import assistant, results, user

PAGE = "<html><body><h1>Upload</h1><form></form></body></html>"


def _session() -> list:
    return [
        user(1, "Find the flag on the upload service."),
        assistant(2, "I'll upload the script twice.", (("u1", "bash", {"command": "curl -F 'f=7' -F 'f=@a.pl' http://svc.test/up"}),)),
        results(3, ("u1", PAGE, False)),
        assistant(4, "That ran without an error. However, the file `a.pl` was not echoed back this time. "
                     "This is probably because param() keeps only the first value of f. Let's swap the two values.",
                  (("u2", "bash", {"command": "curl -F 'f=@a.pl' -F 'f=7' http://svc.test/up"}),)),
        results(5, ("u2", PAGE + "\n#!/usr/bin/perl", False)),
        assistant(6, "Our guess is confirmed! Swapping the two values printed the file again.",
                  (("u3", "bash", {"command": "curl http://svc.test/hello"}),)),
        results(7, ("u3", "Hello", False)),
        assistant(8, "The hello page only greets; nothing to see there."),
    ]


def test_the_agents_words_make_a_call_that_did_nothing_a_failure_with_its_why_and_what_confirmed_it() -> None:
    state = lift_state(_session())
    (soft,) = [fa for fa in state.failed_approaches if fa.error == SOFT_ERROR]
    assert soft.tool_use_id == "u1" and soft.seq == 2 and soft.result_seq == 3
    assert "was not echoed back" in soft.cause and "param() keeps only the first value" in soft.cause
    assert soft.next.startswith("then #6: \"Our guess is confirmed!")
    line = next(ln for ln in render_summary(state, 2_000).sections[ERRORS] if ln.startswith("- #2 "))
    assert "→ ran, no visible effect: the agent: \"However, the file `a.pl` was not echoed back" in line
    assert "why: \"This is probably because param() keeps only the first value of f." in line
    assert line.endswith("then #6: \"Our guess is confirmed! Swapping the two values printed the file again.\"")


def test_words_that_report_no_error_or_only_describe_are_not_a_failure() -> None:
    evs = [
        user(1, "Check the service."),
        assistant(2, "", (("u1", "bash", {"command": "curl http://svc.test/"}),)),
        results(3, ("u1", PAGE, False)),
        assistant(4, "The request did not produce any errors and the page lists the upload form."),
    ]
    assert not [fa for fa in lift_state(evs).failed_approaches if fa.error == SOFT_ERROR]


# --- a line-range edit: what a rejected attempt got wrong, and what the lines held before ---------

_LISTING = "[File: /r/calc.py (40 lines total)]\n(9 more lines above)\n10:    limits = [\n11:        'a', 'b', 'c',\n12:    ]\n13:    return limits\n"
_REJECTED = ("Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry your edit commmand.\n\n"
             "ERRORS:\n- E999 SyntaxError: unmatched ']'\n\nThis is how your edit would have looked if applied\n"
             "-------------------------------------------------\n[File: /r/calc.py (40 lines total)]\n"
             "10:        'a', 'b',\n11:    ]\n12:    return limits\n-------------------------------------------------\n\n"
             "This is the original code before your edit\n-------------------------------------------------\n"
             "[File: /r/calc.py (40 lines total)]\n10:    limits = [\n11:        'a', 'b', 'c',\n12:    ]\n"
             "-------------------------------------------------\nYour changes have NOT been applied.")


def test_a_rejected_range_edit_says_which_line_it_got_wrong_and_the_edit_that_worked_what_it_replaced() -> None:
    evs = [
        user(1, "Drop 'c' from the limits."),
        assistant(2, "", (("s1", "bash", {"command": "open calc.py 10"}),)),
        results(3, ("s1", _LISTING, False)),
        assistant(4, "", (("s2", "bash", {"command": "edit 10:12\n        'a', 'b',\n    ]\nend_of_edit"}),)),
        results(5, ("s2", _REJECTED, False)),
        assistant(6, "", (("s3", "bash", {"command": "edit 10:12\n    limits = [\n        'a', 'b',\n    ]\nend_of_edit"}),)),
        results(7, ("s3", "[File: /r/calc.py (40 lines total)]\n10:    limits = [\n11:        'a', 'b',\n12:    ]\n"
                          "File updated. Please review the changes.", False)),
    ]
    state = lift_state(evs)
    (fa,) = [f for f in state.failed_approaches if f.tool_use_id == "s2"]
    assert fa.cause.endswith("line 10 would be `'a', 'b',`, not `limits = [`") and fa.resolved_at == 6
    (f,) = [f for f in state.files_changed if f.path == "/r/calc.py"]
    assert f.facts[0] == "was (lines 10-12): limits = [ ⏎ 'a', 'b', 'c', ⏎ ]"
    line = next(ln for ln in render_summary(state, 2_000).sections[ERRORS] if "edit 10:12" in ln)
    assert "resolved at #6" in line and "line 10 would be `'a', 'b',`, not `limits = [`" in line


def test_a_bare_symptom_without_why_or_confirmation_stays_the_agents_finding() -> None:
    evs = [
        user(1, "Try the form."),
        assistant(2, "", (("u1", "bash", {"command": "curl -d 'name=x;id' http://svc.test/form"}),)),
        results(3, ("u1", PAGE, False)),
        assistant(4, "The injection did not yield any additional output, suggesting the input is not run in a shell."),
    ]
    state = lift_state(evs)
    assert [fa.tool_use_id for fa in state.failed_approaches if fa.error == SOFT_ERROR] == ["u1"]  # kept in the state
    text = render_summary(state, 2_000).text
    assert "no visible effect" not in text
    assert "The injection did not yield any additional output" in text  # (its report)


def test_the_next_call_reads_the_same_from_the_call_as_written() -> None:
    """The lifter keeps a call's text as written (issue 17) and ``soft_next`` one-lines it: the same
    line as from the text one-lined to 200 characters first, as the lifter kept it before."""
    from compactor.lifting.actions import _one_line
    from compactor.lifting.failures import soft_next

    texts = ["curl -s https://x.test/file.pl", "python -c 'print(1)'\n  && echo   done\t`x`",
             "a " * 150, " ".join(f"w{i}" for i in range(60)) + "\n\n" + "tail " * 30, "x" * 500, "é  ü\n" * 40]
    for text in texts:
        calls = [(3, "ls"), (9, text.strip()), (12, "pwd")]
        kept = [(s, _one_line(t, 200)) for s, t in calls]
        for after in (0, 3, 8, 9, 12):
            assert soft_next(calls, after) == soft_next(kept, after), (text[:40], after)
    assert soft_next([(9, "a\n  b")], 3) == "next call: `a b` (#9)"
