"""Failure lines of the structured summary: what was attempted, its cause, what came next, the outcome."""

from __future__ import annotations

from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.lifting.failures import declined_commands
from compactor.lifting.lift import lift_state
from compactor.summarize.structured import ERRORS, render_summary

SANDBOX = "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted"


def _call(seq: int, uid: str, command: str, out: str, failed: bool, **extra: object) -> list[Event]:
    return [Event(seq=seq, id=f"a{seq}", role="assistant", blocks=[
                ToolUseBlock(id=uid, name="exec_command", input={"cmd": command, **extra})]),
            Event(seq=seq + 1, id=f"r{seq}", role="user", blocks=[ToolResultBlock(
                tool_use_id=uid, content=[TextBlock(text=out)], is_error=failed)])]


def _user(seq: int, text: str) -> Event:
    return Event(seq=seq, id=f"u{seq}", role="user", blocks=[TextBlock(text=text)])


def test_a_read_a_rerun_fixed_is_not_hidden_behind_commands_still_failing_with_its_cause() -> None:
    # a Codex sandbox refuses every command with one line; the read worked when rerun escalated
    evs = [_user(1, "Help me apply for the grant.")]
    evs += _call(2, "c1", "sed -n '1,220p' /home/u/.codex/skills/apply-grant/SKILL.md",
                 f"Exit code: 1\n{SANDBOX}", True)
    evs += _call(4, "c2", "sed -n '1,220p' /home/u/.codex/skills/apply-grant/SKILL.md", "# apply-grant\n...", False,
                 sandbox_permissions="require_escalated")
    evs += _call(6, "c3", "git log --oneline -20", f"Exit code: 1\n{SANDBOX}", True)
    evs += _call(8, "c4", "git remote -v", f"Exit code: 1\n{SANDBOX}", True)
    lines = render_summary(lift_state(evs), 3_000).sections[ERRORS]
    (line,) = [ln for ln in lines if SANDBOX in ln]
    read = line.split("SKILL.md", 1)[1].split(";", 1)[0]
    assert "resolved at #4 (rerun with sandbox_permissions=require_escalated)" in read  # its own outcome and fix
    assert "`git log --oneline -20` (#6, open)" in line and "`git remote -v` (#8, open)" in line
    assert "3 calls failed with the same cause" in line


def test_an_edit_rejected_three_times_keeps_the_first_cause_and_the_fix() -> None:
    evs = [_user(1, "Fix the handler.")]
    for seq, uid, bracket in ((2, "e1", "]"), (4, "e2", ")"), (6, "e3", ")")):
        evs += [Event(seq=seq, id=f"a{seq}", role="assistant", blocks=[ToolUseBlock(
                    id=uid, name="str_replace_editor", input={"command": "edit", "path": "/repo/handler.py",
                                                              "old_str": "x = [1]", "new_str": f"x = [1{bracket}"})]),
                Event(seq=seq + 1, id=f"r{seq}", role="user", blocks=[ToolResultBlock(tool_use_id=uid, content=[
                    TextBlock(text=f"Your proposed edit has introduced new syntax error(s).\n"
                                   f"ERRORS:\n- E999 SyntaxError: unmatched '{bracket}'\n")], is_error=True)])]
    evs += [Event(seq=8, id="a8", role="assistant", blocks=[ToolUseBlock(
                id="e4", name="str_replace_editor", input={"command": "edit", "path": "/repo/handler.py",
                                                         "old_str": "x = [1]", "new_str": "x = [1, 2]"})]),
            Event(seq=9, id="r9", role="user", blocks=[ToolResultBlock(tool_use_id="e4", content=[
                TextBlock(text="File updated.")])])]
    st = lift_state(evs)
    lines = render_summary(st, 3_000).sections[ERRORS]
    (line,) = [ln for ln in lines if "×3" in ln]
    assert "unmatched ']' (#2)" in line and "unmatched ')' (#4, #6)" in line
    assert "resolved at #8" in line
    assert line.index("unmatched ']'") < line.index("unmatched ')'")  # the first attempt's cause first


def test_commands_the_user_declined_are_failures_that_never_ran() -> None:
    out = ("Applied edit to scripts/make.py\nCommit abc123 chore: layout\nmkdir data\n"
           "Run shell command? (Y)es/(N)o/(S)kip all/(D)on't ask again [Yes]: n\nmkdir results\n"
           "Run shell command? (Y)es/(N)o/(S)kip all/(D)on't ask again [Yes]: n\nmkdir docs\n"
           "Run shell command? (Y)es/(N)o/(S)kip all/(D)on't ask again [Yes]: y\n")
    assert [c for c, _ in declined_commands(out)] == ["mkdir data", "mkdir results"]
    evs = [_user(1, "Create the layout with empty data/ and results/ folders."),
           Event(seq=2, id="a2", role="assistant", blocks=[
               TextBlock(text="scripts/make.py\n```bash\nmkdir data\n```"),
               ToolUseBlock(id="aider-1", name="apply_edit", input={"path": "scripts/make.py"})]),
           Event(seq=3, id="r3", role="user", blocks=[ToolResultBlock(tool_use_id="aider-1",
                                                                      content=[TextBlock(text=out)])])]
    (line,) = render_summary(lift_state(evs), 3_000).sections[ERRORS]
    assert "`mkdir data`" in line and "`mkdir results`" in line and "mkdir docs" not in line
    assert "not run" in line and "answered \"n\"" in line


def test_a_yes_or_an_unrelated_question_is_not_a_declined_command() -> None:
    assert declined_commands("Run shell command? (Y)es/(N)o [Yes]: y") == []
    assert declined_commands("ls\nRun shell command? (Y)es/(N)o [Yes]: y\nok") == []
    assert declined_commands("Create new file? (Y)es/(N)o [Yes]: n") == []


def test_an_install_says_what_it_brought_in_and_its_warning_and_outlives_other_listings() -> None:
    from compactor.summarize.structured import COMMANDS

    pip_out = ("Requirement already satisfied: pytest in /env/lib (8.3.3)\nSuccessfully installed marshmallow-3.13.0\n"
               "WARNING: Running pip as the 'root' user can result in broken permissions\n")
    evs = [_user(1, "Reproduce the rounding bug.")]
    evs += _call(2, "i1", "pip install -e .[dev]", pip_out, False)
    evs += _call(4, "i2", "pip3 install -q --upgrade yt-dlp 2>&1 | tail -5",
                 "error: externally-managed-environment\n", False)
    for k in range(6, 30, 2):  # later listings that worked
        evs += _call(k, f"l{k}", f"ls -la dir{k}", "total 0", False)
    st = lift_state(evs)
    lines = render_summary(st, 100_000).sections[COMMANDS]
    (dev,) = [ln for ln in lines if ".[dev]" in ln]
    assert "Successfully installed marshmallow-3.13.0" in dev and "WARNING: Running pip as the 'root' user" in dev
    (yt,) = [ln for ln in lines if "yt-dlp" in ln]
    assert "error: externally-managed-environment" in yt  # exit 0 through the pipe, yet it did not install
    small = render_summary(st, 260)
    assert any(".[dev]" in ln for ln in small.sections.get(COMMANDS, []))
    assert not any("ls -la dir6" in ln for ln in small.sections.get(COMMANDS, []))


def test_a_batch_that_exits_0_but_got_nothing_is_a_failure_with_its_cause_and_the_agents_next_move() -> None:
    from compactor.lifting.failures import zero_tally

    out = ("[1/3] abc...\n  ERROR: Could not retrieve a transcript\nYouTube is blocking requests from your IP.\n"
           "[2/3] def...\n  ERROR: Could not retrieve a transcript\n[3/3] ghi...\n  ERROR: Could not retrieve\n\n"
           "DONE: 0/3 transcripts extracted\n\n[Showing lines 1-9 of 9]")
    evs = [_user(1, "Get the transcripts of the three videos.")]
    evs += _call(2, "b1", "cd /tmp && python3 fetch_all.py", out, False)
    evs += [Event(seq=4, id="a4", role="assistant", blocks=[TextBlock(text="The API IP is blocked; switching to the browser session.")])]
    (line,) = render_summary(lift_state(evs), 3_000).sections[ERRORS]
    assert "`cd /tmp && python3 fetch_all.py` → failed" in line and "DONE: 0/3 transcripts extracted" in line
    assert "switching to the browser session" in line
    assert zero_tally("collected 12 items\n0/12 failed\n") == ""  # zero failures is a success
    assert zero_tally("DONE: 10/49 transcripts extracted") == ""


def test_a_tool_answering_with_an_error_failed_and_the_agents_next_words_say_what_it_does_about_it() -> None:
    evs = [_user(1, "Build the comparison page.")]
    evs += [Event(seq=2, id="a2", role="assistant", blocks=[ToolUseBlock(id="b1", name="browser", input={
                "action": "run", "code": "eval(script.textContent)"})]),
            Event(seq=3, id="r3", role="user", blocks=[ToolResultBlock(tool_use_id="b1", content=[
                TextBlock(text="EVAL ERROR: Invalid or unexpected token at line undefined")])]),
            Event(seq=4, id="a4", role="assistant", blocks=[TextBlock(
                text="There is a JS parse error. I will rewrite the page with the data separated from the code.")])]
    (line,) = render_summary(lift_state(evs), 3_000).sections[ERRORS]
    assert "→ failed" in line and "EVAL ERROR: Invalid or unexpected token" in line
    assert "rewrite the page with the data separated from the code" in line  # the second sentence too


def test_a_fetch_whose_response_says_it_was_cut_says_so_and_paging_search_results_do_not() -> None:
    from compactor.lifting.failures import partial_result
    from compactor.summarize.structured import COMMANDS

    article = '{"id":"a1","content":"' + "words " * 300 + '","restricted":true,"offset":0,"maxChars":8000,' \
              '"totalChars":20526,"nextOffset":8000,"hasMore":true}\n[result-id: r12]'
    search = '{"results":[{"id":1}],"totalFound":144,"totalMatched":144,"hasMore":true}'
    assert partial_result(search) == ""
    evs = [_user(1, "Dig into the articles on gap 1.")]
    evs += _call(2, "f1", 'curl -s "$API/archives/bc41"', article, False)
    (line,) = render_summary(lift_state(evs), 3_000).sections[COMMANDS]
    assert ('→ ok: partial: "restricted":true,"offset":0,"maxChars":8000,"totalChars":20526,'
            '"nextOffset":8000,"hasMore":true; got: id=a1') in line  # the limit, then what came back


def test_a_failed_run_the_errors_section_tells_leaves_the_command_list_before_an_older_request() -> None:
    from compactor.summarize.structured import COMMANDS, REQUESTS

    evs = [_user(1, "Get the transcripts of every video in the list."),
           _user(2, "Also keep a copy of each transcript as plain text next to the JSON.")]
    for k in range(3, 23, 2):
        evs += _call(k, f"f{k}", f"python3 fetch_{k}.py", f"Traceback (most recent call last):\nRuntimeError: blocked {k}\n"
                     "Exit code: 1", True)
    evs += [_user(23, "Now write the README.")]
    st = lift_state(evs)
    full = render_summary(st, 100_000)
    assert any("fetch_3.py" in ln for ln in full.sections[COMMANDS])
    need = full.tokens - sum(len(ln) for ln in full.sections[COMMANDS]) // 4 + 20
    small = render_summary(st, need)
    assert small.sections.get(REQUESTS)  # the older request stays
    assert len(small.sections[ERRORS]) == 10  # every failure, with its cause
    assert len(small.sections.get(COMMANDS, [])) < 10  # their bare command lines went first


def test_a_failures_params_survive_a_checkpoints_sorted_json_round_trip_unchanged() -> None:
    import json

    from compactor.lifting.lift import LiftedState

    evs = [_user(1, "Help me apply for the grant.")]
    evs += _call(2, "c1", "git log -5", f"Exit code: 1\n{SANDBOX}", True, workdir="/w", yield_time_ms=1000,
                 max_output_tokens=4000)
    st = lift_state(evs)
    stored = LiftedState.model_validate(json.loads(json.dumps(st.model_dump(), sort_keys=True)))
    # the model request quotes the state as it is: the same bytes inline and after a checkpoint
    assert json.dumps(stored.model_dump()) == json.dumps(st.model_dump())
