"""State lifting on hand-built events (every category), merging, reconcile, and the corpus."""

from __future__ import annotations

import pytest

from compactor.events import ArtifactRefBlock, Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.lifting.lift import (
    LONG_REQUEST_TOKENS,
    LiftedState,
    constraint_sentences,
    error_names,
    lift_state,
    load_state,
    dump_state,
    parse_exit_code,
    reconcile,
    split_sentences,
)
from tests.conftest import corpus_files


def user(seq: int, text: str, **kw) -> Event:
    return Event(seq=seq, id=f"e{seq}", role="user", blocks=[TextBlock(text=text)], **kw)


def assistant(seq: int, text: str = "", uses: tuple = ()) -> Event:
    blocks: list = [TextBlock(text=text)] if text else []
    blocks += [ToolUseBlock(id=i, name=n, input=inp) for i, n, inp in uses]
    return Event(seq=seq, id=f"e{seq}", role="assistant", blocks=blocks)


def results(seq: int, *res: tuple) -> Event:
    blocks = [
        ToolResultBlock(tool_use_id=i, content=[TextBlock(text=t)], is_error=err) for i, t, err in res
    ]
    return Event(seq=seq, id=f"e{seq}", role="user", blocks=blocks)


GOAL = (
    "Fix the failing parser tests in src/parse.py. Never touch the vendored code under vendor/. "
    "See https://example.com/issue/42 for details."
)


def session() -> list[Event]:
    return [
        Event(seq=1, id="sys", kind="pinned", role="system", blocks=[TextBlock(text="You must obey.")]),
        user(2, GOAL),
        assistant(3, "I'll use the stdlib tokenize module instead of regexes.",
                  (("t1", "Read", {"file_path": "/r/src/parse.py"}),)),
        results(4, ("t1", "     1\u2192import re", False)),
        assistant(5, "", (("t2", "Bash", {"command": "pytest -q tests/test_parse.py"}),)),
        results(6, ("t2", "Exit code 1\nE   TypeError: bad operand\n===== 2 failed, 5 passed in 0.3s =====", True)),
        assistant(7, "", (
            ("t3", "Edit", {"file_path": "/r/src/parse.py", "old_string": "a", "new_string": "b"}),
            ("t4", "TodoWrite", {"todos": [{"content": "fix parser", "status": "in_progress"},
                                            {"content": "run tests", "status": "pending"}]}),
        )),
        results(8, ("t3", "The file /r/src/parse.py has been updated successfully.", False), ("t4", "ok", False)),
        assistant(9, "", (("t5", "apply_patch", {"input": "*** Begin Patch\n*** Update File: src/lex.py\n@@\n-a\n+b\n*** End Patch"}),)),
        results(10, ("t5", "Success. Updated the following files:\nM src/lex.py", False)),
        assistant(11, "", (("t6", "exec_command", {"cmd": "pytest -q"}),)),
        results(12, ("t6", "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n===== 7 passed in 0.2s =====", False)),
        user(13, "Good. Now add a --strict flag. Do not change the public API."),
        assistant(14, "", (("t7", "Bash", {"command": "npm run deploy"}),)),
        Event(seq=15, id="e15", role="user", blocks=[ToolResultBlock(tool_use_id="t8", content=[
            ArtifactRefBlock(uri="artifact://sha256/" + "a" * 64, sha256="a" * 64, bytes=9000)])],
            injected=True),
    ]


@pytest.fixture
def state() -> LiftedState:
    return lift_state(session())


def test_goal_and_requests_verbatim(state: LiftedState) -> None:
    assert state.goal is not None and state.goal.text == GOAL and state.goal.seq == 2
    assert [r.seq for r in state.requests] == [2, 13]
    assert state.latest_request is not None
    assert state.latest_request.text == "Good. Now add a --strict flag. Do not change the public API."


def test_pinned_and_injected_are_not_requests() -> None:
    st = lift_state([
        Event(seq=1, id="p", kind="pinned", role="system", blocks=[TextBlock(text="Never do X.")]),
        user(2, "<environment_context>\n<cwd>/x</cwd>\n</environment_context>"),
        user(3, "injected reminder, never mind", injected=True),
        user(4, "Build the thing."),
    ])
    assert st.goal is not None and st.goal.seq == 4
    assert [r.seq for r in st.requests] == [4]
    assert st.constraints == []


def test_constraints_are_exact_sentences(state: LiftedState) -> None:
    texts = [c.text for c in state.constraints]
    assert "Never touch the vendored code under vendor/." in texts
    assert "Do not change the public API." in texts
    assert all("Fix the failing" not in t for t in texts)


def test_constraint_keywords_and_curly_quotes() -> None:
    text = "Don\u2019t write any code yet\nUse only numpy.\nThis is fine.\nAlways run the linter. Avoid globals!"
    assert constraint_sentences(text) == [
        "Don\u2019t write any code yet", "Use only numpy.", "Always run the linter.", "Avoid globals!",
    ]


def test_sentence_split_keeps_abbreviations() -> None:
    assert split_sentences("You cannot use (e.g. python, vim) here. Next.") == [
        "You cannot use (e.g. python, vim) here.", "Next.",
    ]


def test_decisions(state: LiftedState) -> None:
    assert [d.text for d in state.decisions] == ["I'll use the stdlib tokenize module instead of regexes."]


def test_files_read_and_changed(state: LiftedState) -> None:
    assert [f.path for f in state.files_read] == ["/r/src/parse.py"]
    assert [f.path for f in state.files_changed] == ["/r/src/parse.py", "src/lex.py"]
    assert state.files_changed[1].ops == ["patch"]


def test_commands_with_exit_status(state: LiftedState) -> None:
    cmds = {c.tool_use_id: c for c in state.commands}
    assert cmds["t2"].exit_code == 1 and cmds["t2"].status == "failed"
    assert cmds["t6"].exit_code == 0 and cmds["t6"].status == "ok"
    assert "t7" not in cmds  # no result: never reported as run


def test_tests_with_status_and_version(state: LiftedState) -> None:
    assert [(t.command, t.status, t.result_seq) for t in state.tests] == [
        ("pytest -q tests/test_parse.py", "failed", 6),
        ("pytest -q", "passed", 12),
    ]
    assert state.tests[0].summary == "2 failed, 5 passed"


def test_errors_and_failed_approaches(state: LiftedState) -> None:
    assert [e.name for e in state.errors] == ["TypeError"]
    assert [f.tool_use_id for f in state.failed_approaches] == ["t2"]
    assert "TypeError" in state.failed_approaches[0].error


def test_unknown_action_is_never_done(state: LiftedState) -> None:
    assert [u.tool_use_id for u in state.unknown_actions] == ["t7"]
    assert state.unknown_actions[0].command == "npm run deploy"
    assert all(c.tool_use_id != "t7" for c in state.commands)


def test_todos_latest_wins() -> None:
    evs = session() + [
        assistant(16, "", (("t9", "update_plan", {"plan": [{"step": "ship it", "status": "completed"}]}),)),
        results(17, ("t9", "Plan updated", False)),
    ]
    st = lift_state(evs)
    assert [(t.text, t.status) for t in st.todos] == [("ship it", "completed")]
    assert st.todos_seq == 16


def test_todos(state: LiftedState) -> None:
    assert [(t.text, t.status) for t in state.todos] == [("fix parser", "in_progress"), ("run tests", "pending")]


def test_artifacts_and_urls(state: LiftedState) -> None:
    assert [a.sha256 for a in state.artifacts] == ["a" * 64]
    assert [u.url for u in state.urls] == ["https://example.com/issue/42"]


def test_long_request_is_quoted_with_pointer() -> None:
    long = "Please do this. " * (LONG_REQUEST_TOKENS // 2)
    st = lift_state([user(1, long)])
    assert st.goal is not None and st.goal.truncated and st.goal.tokens > LONG_REQUEST_TOKENS
    assert len(st.goal.text) < len(long.strip())
    assert long.startswith(st.goal.text)


def test_exit_code_formats() -> None:
    assert parse_exit_code("Chunk ID: x\nProcess exited with code 2\nOutput:") == 2
    assert parse_exit_code("Exit code: 0\nWall time: 1s") == 0
    assert parse_exit_code("Exit code 127\nbash: foo: not found") == 127
    assert parse_exit_code("boom\n\nCommand exited with code 3") == 3
    assert parse_exit_code("all good") is None
    # the return-code spellings; ``return`` in code that is only read is not an exit status
    assert parse_exit_code("subprocess returncode=4") == 4
    assert parse_exit_code("Return code: 5") == 5
    assert parse_exit_code("def f(x):\n    return x + 1\n") is None
    assert parse_exit_code("RETURNCODE = 6") == 6


def test_error_names_ignore_source_listings_in_successful_results() -> None:
    listing = "   10\t    raise ValueError('x')\n   11\texcept KeyError:"
    assert error_names(listing, failed=False) == []
    tb = "Traceback (most recent call last):\n  File 'x'\nModuleNotFoundError: No module named 'yaml'"
    assert [n for n, _ in error_names(tb, failed=False)] == ["ModuleNotFoundError"]


def test_shell_changes_and_reads() -> None:
    st = lift_state([
        user(1, "go"),
        assistant(2, "", (("a", "Bash", {"command": "sed -n '1,20p' src/a.py && echo hi > out/log.txt"}),)),
        results(3, ("a", "ok", False)),
    ])
    assert [f.path for f in st.files_read] == ["src/a.py"]
    assert [f.path for f in st.files_changed] == ["out/log.txt"]


def test_failed_edit_is_not_a_changed_file() -> None:
    st = lift_state([
        user(1, "go"),
        assistant(2, "", (("a", "Edit", {"file_path": "x.py", "old_string": "q", "new_string": "r"}),)),
        results(3, ("a", "<tool_use_error>String to replace not found</tool_use_error>", True)),
    ])
    assert st.files_changed == []
    assert [f.tool_use_id for f in st.failed_approaches] == ["a"]


def test_swe_agent_commands() -> None:
    st = lift_state([
        user(1, "solve the issue"),
        assistant(2, "", (("s1", "bash", {"command": "open src/m/fields.py 1474"}),)),
        results(3, ("s1", "[File: /t/src/m/fields.py (1997 lines total)]\n1:x\n(Open file: /t/src/m/fields.py)", False)),
        assistant(4, "", (("s2", "bash", {"command": "edit 10:12\n    return 1\nend_of_edit"}),)),
        results(5, ("s2", "[File: /t/src/m/fields.py (1997 lines total)]\n(Open file: /t/src/m/fields.py)", False)),
        assistant(6, "", (("s3", "bash", {"command": "create reproduce.py"}),)),
        results(7, ("s3", "[File: /t/reproduce.py (1 lines total)]", False)),
    ])
    assert [f.path for f in st.files_read] == ["src/m/fields.py"]
    assert [f.path for f in st.files_changed] == ["/t/src/m/fields.py", "reproduce.py"]


def test_read_path_suffixes_are_dropped() -> None:
    st = lift_state([
        user(1, "look"),
        assistant(2, "", (("r1", "read", {"path": "/w/a.py:440-470"}), ("r2", "read", {"path": "/w/b.html:raw"}))),
        results(3, ("r1", "x", False), ("r2", "y", False)),
    ])
    assert [f.path for f in st.files_read] == ["/w/a.py", "/w/b.html"]


def test_aider_applied_edits() -> None:
    st = lift_state([
        user(1, "make it"),
        assistant(2, "ok", (("aider-1", "apply_edit", {"path": "src/train.py"}),)),
        results(3, ("aider-1", "Applied edit to src/train.py\nCommit abc", False)),
        assistant(4, "> Applied edit to src/model.py"),
    ])
    assert [f.path for f in st.files_changed] == ["src/train.py", "src/model.py"]


# --- merge and reconcile ----------------------------------------------------------------------


def test_merge_with_prev_dedupes_and_keeps_order() -> None:
    evs = session()
    first = lift_state(evs[:8])
    assert first.covers_end == 8
    merged = lift_state(evs, prev=first)
    whole = lift_state(evs)
    assert merged.model_dump() == whole.model_dump()
    # feeding the same events again changes nothing
    again = lift_state(evs, prev=merged)
    assert again.model_dump() == merged.model_dump()


def test_merge_resolves_prev_unknown() -> None:
    evs = session()
    prev = lift_state(evs[:14])  # t7 issued, no result yet
    assert [u.tool_use_id for u in prev.unknown_actions] == ["t7"]
    later = [results(16, ("t7", "Exit code 1\nError: deploy refused", True))]
    st = lift_state(later, prev=prev)
    assert st.unknown_actions == []
    cmd = next(c for c in st.commands if c.tool_use_id == "t7")
    assert cmd.status == "failed" and cmd.exit_code == 1 and cmd.result_seq == 16


def test_reconcile_resolves_unknown_action(state: LiftedState) -> None:
    new = [results(20, ("t7", "Process exited with code 0\nOutput:\ndeployed", False))]
    st, resolved = reconcile(state, new)
    assert resolved == ["t7"]
    assert st.unknown_actions == []
    cmd = next(c for c in st.commands if c.tool_use_id == "t7")
    assert (cmd.status, cmd.exit_code, cmd.result_seq) == ("ok", 0, 20)
    # nothing else folded in and covers_end unchanged
    assert st.covers_end == state.covers_end
    assert len(st.requests) == len(state.requests)


def test_reconcile_unrelated_events_change_nothing(state: LiftedState) -> None:
    st, resolved = reconcile(state, [user(20, "Never mind."), results(21, ("zz", "x", False))])
    assert resolved == []
    assert st == state


def test_reconcile_resolved_change_lists_the_file() -> None:
    evs = [user(1, "go"), assistant(2, "", (("w", "Write", {"file_path": "a.txt", "content": "x"}),))]
    st = lift_state(evs)
    assert st.files_changed == [] and [u.tool_use_id for u in st.unknown_actions] == ["w"]
    st2, resolved = reconcile(st, [results(3, ("w", "File created successfully at: a.txt", False))])
    assert resolved == ["w"] and [f.path for f in st2.files_changed] == ["a.txt"]
    assert st2.unknown_actions == []


def test_state_round_trips_through_checkpoint_json(state: LiftedState) -> None:
    assert load_state(dump_state(state)) == state
    assert load_state({}) is None


def test_deterministic() -> None:
    assert lift_state(session()).model_dump_json() == lift_state(session()).model_dump_json()


# --- corpus -----------------------------------------------------------------------------------

CORPUS = corpus_files()

# non-empty categories each corpus transcript must yield (file name -> categories)
EXPECTED = {
    "apanloco-random.session.jsonl": {"requests", "files_changed", "commands", "constraints"},
    "TokenForge.claude-session.jsonl": {"requests", "commands"},
    # its one request is a pasted plan to review: no rule of the user's (tests/fixtures/constraints)
    "raze.codex-session.jsonl": {"commands", "files_read"},
    "Soul.codex-session.jsonl": {"commands", "unknown_actions", "failed_approaches"},
    "metadata-aider.aider.chat.history.md": {"requests", "files_changed", "constraints"},
    "pydicom__pydicom-1458.traj": {"files_changed", "errors", "failed_approaches", "unknown_actions", "urls"},
    "ctf_web_i_got_id_demo.traj": {"commands", "files_changed", "urls"},
    "marshmallow-1867__function_calling_replace_from_source.traj": {"files_changed", "commands", "files_read"},
    "gjc-01-youtube-transcript-extraction.session.jsonl": {
        "requests", "files_changed", "commands", "errors", "failed_approaches", "urls"},
}


@pytest.mark.corpus
@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_corpus_lift(path) -> None:
    from compactor import importers
    events = importers.import_file(path).events
    st = lift_state(events)
    assert st.goal is not None and st.goal.text.strip()
    first = next(e for e in events if e.is_user_request and e.text.strip() and not e.text.lstrip().startswith("<local-command"))
    assert st.goal.seq >= first.seq
    for cat in EXPECTED.get(path.name, {"requests"}):
        assert getattr(st, cat), f"{path.name}: expected non-empty {cat}"
    # nothing is pending and done at once
    pending = {u.tool_use_id for u in st.unknown_actions}
    assert not pending & {c.tool_use_id for c in st.commands}
    # merging in two halves gives the same state as lifting at once
    mid = events[len(events) // 2].seq
    half = lift_state([e for e in events if e.seq <= mid])
    assert lift_state(events, prev=half).model_dump() == st.model_dump()


def test_split_between_call_and_result_merges_to_the_same_facts() -> None:
    evs = session()
    # cut right after the failing pytest call (seq 5), before its result (seq 6)
    first = lift_state(evs[:5])
    assert [u.tool_use_id for u in first.unknown_actions] == ["t2"]
    merged = lift_state(evs, prev=first)
    whole = lift_state(evs)
    assert merged.unknown_actions == whole.unknown_actions
    for key in ("commands", "tests", "errors", "failed_approaches", "files_changed", "files_read"):
        assert getattr(merged, key) == getattr(whole, key), key


# --- meaning: failure cause/next/resolution, file digests, constraints ------------------------


def test_failure_keeps_cause_next_and_later_pass_resolves_it() -> None:
    evs = [
        user(1, "Build the program."),
        assistant(2, "", (("b1", "Bash", {"command": "cd /w && anchor build"}),)),
        results(3, ("b1", "Exit code: 127\nOutput:\nbash: anchor: command not found", True)),
        assistant(4, "The anchor CLI is missing, so I will install it with cargo.",
                  (("i1", "Bash", {"command": "cargo install anchor-cli"}),)),
        results(5, ("i1", "Exit code: 0\ninstalled", False)),
        assistant(6, "", (("b2", "Bash", {"command": "anchor build 2>&1 | tail -5"}),)),
        results(7, ("b2", "Exit code: 0\nFinished release", False)),
        assistant(8, "", (("t1", "Bash", {"command": "pytest -q tests/test_x.py"}),)),
        results(9, ("t1", "Exit code: 1\nE   assert 1 == 2\n=== 1 failed in 0.1s ===", True)),
    ]
    st = lift_state(evs)
    build, test = st.failed_approaches
    assert build.cause == "bash: anchor: command not found"
    assert build.next.startswith('"The anchor CLI is missing') and build.next.endswith("(#4)")
    assert build.resolved_at == 6
    assert test.resolved_at is None and "assert 1 == 2" in test.cause


def test_open_failure_outranks_resolved_one_in_the_summary() -> None:
    from compactor.summarize.structured import render_summary

    evs = [
        user(1, "Build it."),
        assistant(2, "", (("a", "Bash", {"command": "make all"}),)),
        results(3, ("a", "Exit code: 2\nmake: *** [all] Error 2", True)),
        assistant(4, "", (("b", "Bash", {"command": "make all"}),)),
        results(5, ("b", "Exit code: 0", False)),
        assistant(6, "", (("c", "Bash", {"command": "make deploy"}),)),
        results(7, ("c", "Exit code: 1\ndeploy: permission denied", True)),
    ]
    st = lift_state(evs)
    full = render_summary(st, 100_000).sections["Errors and failed approaches"]
    assert any("`make all` → failed" in ln and "resolved at #4" in ln for ln in full)
    assert any("`make deploy` → failed, still open (not rerun since): deploy: permission denied" in ln for ln in full)
    # squeezed: the resolved failure leaves before the open one
    kept = []
    for b in range(40, 400, 5):
        lines = render_summary(st, b).sections.get("Errors and failed approaches", [])
        kept.append((any("make all" in ln for ln in lines), any("make deploy" in ln for ln in lines)))
    assert (True, False) not in kept and (False, True) in kept


def test_changed_files_carry_a_digest_the_last_change_winning() -> None:
    evs = [
        user(1, "Add the vault."),
        assistant(2, "", (("w", "Write", {"file_path": "/r/vault.py", "content": "class Vault:\n    pass\n"}),)),
        results(3, ("w", "ok", False)),
        assistant(4, "", (("e", "Edit", {"file_path": "/r/vault.py", "old_string": "SEED = 'a'",
                                           "new_string": "SEED = 'b'"}),)),
        results(5, ("e", "ok", False)),
        assistant(6, "", (("h", "Bash", {"command": "cat > /r/cfg.toml <<'EOF'\\n[tool]\\nname = 'x'\\nEOF"}),)),
        results(7, ("h", "", False)),
    ]
    st = lift_state(evs)
    digests = {f.path: f.digest for f in st.files_changed}
    assert digests["/r/vault.py"] == "\"SEED = 'a'\" → \"SEED = 'b'\""
    assert digests["/r/cfg.toml"].startswith("wrote 2 lines") and "tool" in digests["/r/cfg.toml"]


def test_a_question_or_pasted_error_is_not_a_constraint() -> None:
    text = ("What must I fix before submitting?\n"
            "Do you think we should always use tabs\n\n"
            "Error: Transaction simulation failed\n"
            "This transaction couldn't be simulated, only signers can call it\n\n"
            "```\nnever = True  # must not change\n```\n"
            "Never edit the generated files.")
    assert constraint_sentences(text) == ["Never edit the generated files."]
    assert constraint_sentences("Do not push. Only run the unit tests!") == ["Do not push.",
                                                                          "Only run the unit tests!"]
    # a conditional rule is still a rule; "Do this" is an order, not a question
    assert constraint_sentences("When you edit, always run black.\nDo it only once.") == [
        "When you edit, always run black.", "Do it only once."]


def test_a_search_that_finds_nothing_is_no_failure_and_reruns_are_named() -> None:
    evs = [
        Event(seq=1, id="u1", role="user", blocks=[TextBlock(text="Find the config loader and deploy.")]),
        Event(seq=2, id="a1", role="assistant", blocks=[
            ToolUseBlock(id="g1", name="Bash", input={"command": "rg -n load_config src"})]),
        Event(seq=3, id="r1", role="user", blocks=[ToolResultBlock(
            tool_use_id="g1", content=[TextBlock(text="Exit code: 1")], is_error=False)]),
        Event(seq=4, id="a2", role="assistant", blocks=[
            ToolUseBlock(id="d1", name="Bash", input={"command": "make deploy"})]),
        Event(seq=5, id="r2", role="user", blocks=[ToolResultBlock(
            tool_use_id="d1", content=[TextBlock(text="deploy: permission denied\nExit code: 2")], is_error=True)]),
        Event(seq=6, id="a3", role="assistant", blocks=[
            ToolUseBlock(id="d2", name="Bash", input={"command": "make deploy"})]),
        Event(seq=7, id="r3", role="user", blocks=[ToolResultBlock(
            tool_use_id="d2", content=[TextBlock(text="deploy: permission denied\nExit code: 2")], is_error=True)]),
    ]
    st = lift_state(evs)
    assert [f.what for f in st.failed_approaches] == ["make deploy", "make deploy"]
    assert [c.status for c in st.commands] == ["ok", "failed", "failed"]
    assert st.failed_approaches[0].failed_again == 6 and st.failed_approaches[1].failed_again is None
    assert st.last_action is not None and st.last_action.seq == 6 and st.last_action.status == "failed"
    assert "permission denied" in st.last_action.detail and st.last_action.result_seq == 7


def test_lifted_items_share_their_fields_set_and_dump_the_same():
    """Each call's ``Command`` and each file's ``FileRef`` live for a whole compaction (one per
    call of a big session): equal sets of given fields are one object (memory, issue 17), and
    the state dumps, reloads and copies exactly as before."""
    evs = [user(1, "Run the checks.")]
    for k in range(2, 12, 2):
        uid = f"c{k}"
        evs += [assistant(k, "", ((uid, "Bash", {"command": f"cat src/m{k}.py"}),)),
                results(k + 1, (uid, f"x = {k}", False))]
    state = lift_state(evs)
    assert len(state.commands) == 5 and len(state.files_read) == 5
    assert len({id(c.model_fields_set) for c in state.commands}) == 1
    assert len({id(f.model_fields_set) for f in state.files_read}) == 1
    again = load_state(dump_state(state))
    assert again == state and again.model_dump(mode="json") == state.model_dump(mode="json")
    assert again.commands[0].model_fields_set is state.commands[1].model_fields_set
    first = state.commands[0]
    fields = set(first.model_fields_set)
    changed = first.model_copy(update={"detail": "got: 1"})
    assert first.model_fields_set == fields and changed.detail == "got: 1"
    assert "detail" in changed.model_dump(exclude_unset=True)
    if "detail" not in fields:
        assert "detail" not in first.model_dump(exclude_unset=True)
        assert "detail" not in state.commands[1].model_fields_set
