"""The budget split, the identifier repair and the over-budget naming of the engine (issue 8)."""

from __future__ import annotations

from compactor.engine.compact import compact, repair_candidate
from compactor.events import TextBlock
from compactor.engine.invariants import check_identifiers, identifiers, validate
from compactor.records import Checkpoint, SeqRange
from compactor.engine.measure import view_tokens
from compactor.engine.policy import make_policy
from compactor.engine.view import build_view

from tests.unit.engine_fixtures import Conv

POLICY = make_policy("default")


def _many_files_then_long_chat(n_files: int = 40, chat: int = 30) -> Conv:
    c = Conv()
    c.user("Scaffold the service under src/svc. Never commit secrets.")
    for i in range(n_files):
        c.call("Write", {"file_path": f"src/svc/mod{i:02d}.py", "content": f"def f{i}():\n    return {i}\n"},
               f"File created successfully at: src/svc/mod{i:02d}.py")
    for i in range(chat):
        c.user(f"Question {i}: explain the design choice number {i} in detail please.")
        c.say(f"Design choice {i} is explained here at some length. " * 12)
    c.user("Now add a health endpoint.")
    return c


def test_split_leaves_room_for_the_state_instead_of_a_longer_tail():
    c = _many_files_then_long_chat(n_files=110)
    res = compact(c.events, POLICY, target_tokens=4_000)
    assert res.record.status == "committed" and res.record.tokens_after <= 4_000
    # every changed file is in the summary: the tail shrank to make room for the state
    assert "Files changed" not in res.record.left_out
    for i in range(110):
        assert f"src/svc/mod{i:02d}.py" in res.checkpoint.summary
    assert "not shown for space" not in res.checkpoint.summary.split("## Latest request")[0] or \
        "Files changed" not in res.record.left_out


def test_split_keeps_the_longest_tail_when_the_state_fits_anyway():
    c = _many_files_then_long_chat(n_files=2, chat=80)
    assert view_tokens(c.events) > 6_000
    res = compact(c.events, POLICY, target_tokens=6_000)
    assert res.record.status == "committed" and res.record.left_out == {}
    # the summary did not take the whole budget: the verbatim tail kept several turns
    assert res.record.retained_tail_tokens > 1_000


def test_identifiers_are_paths_urls_and_ids_not_prose():
    text = ("On 4/18 and 4/26 NONE/FIRST_TIME showed in analyze/filters and author/state/comments "
            "(gist/read). Changed src/pages/index.tsx, /usr/local/bin/run, ./x/y, "
            "https://example.com/a and toolu_0123456789.")
    assert identifiers(text) == {"src/pages/index.tsx", "/usr/local/bin/run", "./x/y",
                                 "https://example.com/a", "toolu_0123456789"}
    # "this file or that one": each name is checked, the slash-joined pair is not one path
    assert identifiers("pineconedb.py/upstashdb.py store the text") == {"pineconedb.py"}
    # a Korean particle written onto a path ("in /home/user/tmp") is not part of it
    assert identifiers("/home/user/tmp에 저장, src/app.py를 수정") == {"/home/user/tmp", "src/app.py"}


def test_an_identifier_the_tail_spells_out_is_not_invented():
    """A model that joins a directory listed in the covered range with a file name the agent
    only writes out whole after the cut states a path the session has (the view shows it)."""
    c = Conv()
    c.user("Find the session file and upload it.")
    c.call("Bash", {"command": "ls /home/user/.gjc/agent/sessions/-tmp/"}, "2026-07-14T04-52_s3a.jsonl\n")
    c.say("Found /home/user/.gjc/agent/sessions/-tmp/2026-07-14T04-52_s3a.jsonl, uploading it next.")
    full = "/home/user/.gjc/agent/sessions/-tmp/2026-07-14T04-52_s3a.jsonl"
    cut = c.events[-2].seq  # the covered range ends before the agent spells the path out
    ckpt = Checkpoint(id="c1", tenant="t", session="s", covers=SeqRange(start=1, end=cut),
                      summary=f"## Files read\n- {full}\n## Files changed\n- /etc/never/seen.conf")
    vio = check_identifiers(c.events, ckpt, None)
    assert [v.detail for v in vio] == ["/etc/never/seen.conf"]


def test_candidate_with_one_unknown_identifier_is_repaired_not_dropped():
    c = Conv()
    c.user("Fix src/app.py. Do not touch the database.")
    c.call("Edit", {"file_path": "src/app.py", "old_string": "a", "new_string": "b"}, "ok")
    for i in range(20):
        c.call("Bash", {"command": f"pytest -q -k t{i}"}, "3 passed\n" * 60)
    c.user("Now the docs.")
    res = compact(c.events, POLICY, target_tokens=800)
    ckpt = res.checkpoint
    assert ckpt is not None and not ckpt.covers.empty
    bad = ckpt.summary.replace("## Files changed\n", "## Files changed\n- /etc/invented/path.conf (write)\n")
    ckpt2 = ckpt.model_copy(update={"summary": bad})
    evs = c.events
    view = build_view(evs, ckpt2)
    vio = validate(events=evs, checkpoint=ckpt2, view=view, target_tokens=None)
    assert [v.code for v in vio] == ["unknown_identifier"]
    assert "/etc/invented" not in str(vio[0])  # the message names the check, not the words
    fixed, view2, n, vio2, dropped = repair_candidate(evs, ckpt2, view, view_tokens(view), vio, None, None, None)
    assert dropped == 1 and vio2 == []
    assert "/etc/invented" not in fixed.summary
    assert "src/app.py" in fixed.summary and "Do not touch the database." in fixed.summary
    assert "1 item(s) left out" in fixed.summary


def test_over_budget_names_what_alone_exceeds_the_target():
    c = Conv(system="Rules of the house. " * 400)
    c.user("Do the thing.")
    for i in range(5):
        c.call("Bash", {"command": f"echo {i}"}, "x " * 400)
    c.user("And the next thing.")
    res = compact(c.events, POLICY, target_tokens=1_000)
    rec = res.record
    assert "over_budget" in " ".join(rec.violations)
    assert rec.irreducible_tokens["pinned"] > 1_000
    assert "pinned events" in rec.error and "cannot be met" in rec.error


def test_a_target_the_pinned_instructions_exceed_still_gets_a_summary_that_carries_the_work():
    c = Conv(system="Rules of the house. " * 800)  # ~3.2k tokens of instructions, target 2k
    c.user("Port src/legacy.py to the new API. Never change the wire format.")
    for i in range(40):
        c.call("Edit", {"file_path": f"src/mod_{i}.py", "old_string": "old()", "new_string": "new()"}, "ok " * 60)
    c.user("Now run the whole suite.")
    res = compact(c.events, POLICY, target_tokens=2_000)
    rec = res.record
    assert "pinned events" in rec.error and "cannot be met" in rec.error  # said, as before
    from compactor.engine.compact import INFEASIBLE_SUMMARY_SHARE
    assert rec.summary_tokens > 2_000 * INFEASIBLE_SUMMARY_SHARE * 0.5  # not the 200-token minimum
    assert "Never change the wire format." in res.checkpoint.summary
    assert sum(f"src/mod_{i}.py" in res.checkpoint.summary for i in range(40)) >= 10
    assert rec.tokens_after < rec.tokens_before


def test_mid_turn_is_said_in_the_record():
    c = Conv()
    c.user("Start the migration. Never drop tables.")
    c.say("ok")
    c.user("Migrate every table now.")
    for i in range(40):
        c.call("Bash", {"command": f"migrate table{i}"}, "migrated rows " * 80)
    res = compact(c.events, POLICY, target_tokens=2_500)
    rec = res.record
    assert rec.status == "committed" and rec.mid_turn
    assert "Migrate every table now." in res.checkpoint.summary
    assert rec.tokens_after <= 2_500


def test_view_text_blocks_survive_repair_note_only_counts():
    # the repair note never quotes what it dropped
    from compactor.summarize.repair import drop_identifier_lines

    text = "## Goal\nfix a/b.py\n\n## Files changed\n- a/b.py (edit)\n- zz/yy.py (write)\n  more\n\n## Tests\n- ok"
    out, n = drop_identifier_lines(text, {"zz/yy.py"})
    assert n == 1 and "zz/yy.py" not in out and "more" not in out and "- a/b.py (edit)" in out
    assert "## Tests\n- ok" in out
    assert isinstance(TextBlock(text=out).text, str)
