"""The agent's findings: what it concluded from a result inside one long turn, kept and rendered."""

from __future__ import annotations

from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.lifting.lift import lift_state
from compactor.lifting.narrative import MAX_FINDING_CHARS, finding_sentences, report_units
from compactor.summarize.structured import REPORTS, render_summary
from compactor.tokens import count_text

GOAL = (
    "We're solving a CTF web challenge named 'I Got Id'. The server runs on web.chal.example port "
    "8000; find the flag (format FLAG{...}) and submit it. Use curl; one command at a time. "
    + "Background: the site lists several Perl CGI scripts and a file upload form. " * 6
)
INJECTION = "The `id` injection did not yield any additional output: the server echoes the input back."
TRUNCATED = "The archive fetch is truncated at 8000 characters."
POINTS = "The traceback points at cgi-bin/file.pl line 12, where `param('file')` returns the first value."


def user(seq: int, text: str) -> Event:
    return Event(seq=seq, id=f"e{seq}", role="user", blocks=[TextBlock(text=text)])


def call(seq: int, text: str, use_id: str, command: str) -> Event:
    return Event(seq=seq, id=f"e{seq}", role="assistant", blocks=[
        TextBlock(text=text), ToolUseBlock(id=use_id, name="bash", input={"command": command})])


def result(seq: int, use_id: str, text: str) -> Event:
    return Event(seq=seq, id=f"e{seq}", role="user",
                 blocks=[ToolResultBlock(tool_use_id=use_id, content=[TextBlock(text=text)])])


def ctf_session(extra_rounds: int = 12) -> list[Event]:
    """One long turn: the agent probes a server, states what each result showed, and moves on."""
    page = "<html><body>" + "<p>Perl CGI demo page, nothing to see here.</p>" * 40 + "</body></html>"
    evs = [
        user(1, GOAL),
        call(2, "I will start by fetching the main page.", "c1", "curl http://web.chal.example:8000/"),
        result(3, "c1", page),
        call(4, "Let's try a command injection in the name field.", "c2",
             "curl -d 'name=a;id' http://web.chal.example:8000/cgi-bin/forms.pl"),
        result(5, "c2", "Hello a;id " + page),
        call(6, f"{INJECTION} Let's fetch the archive next.", "c3",
             "curl http://web.chal.example:8000/archive"),
        result(7, "c3", page),
        call(8, f"{TRUNCATED} Let me look at the upload script.", "c4",
             "curl http://web.chal.example:8000/cgi-bin/file.pl?file.pl"),
        result(9, "c4", "Traceback ... " + page),
        call(10, f"{POINTS} Let's list the directories next.", "c5",
             "curl http://web.chal.example:8000/cgi-bin/file.pl?/etc"),
        result(11, "c5", page),
    ]
    seq = 12
    for i in range(extra_rounds):  # a long turn: plans and listings with nothing concluded
        evs.append(call(seq, f"Now I will fetch candidate path number {i}.", f"x{i}",
                        f"curl http://web.chal.example:8000/cgi-bin/file.pl?/srv/{i}/flag"))
        evs.append(result(seq + 1, f"x{i}", page))
        seq += 2
    return evs


def test_a_long_turns_findings_are_in_the_summary_at_a_small_budget() -> None:
    events = ctf_session()
    state = lift_state(events)
    assert [f.text for f in state.findings] == [INJECTION, TRUNCATED, POINTS]
    total = sum(count_text(e.text or "") + sum(count_text(str(b)) for b in e.blocks) for e in events)
    budget = max(400, total // 20)  # about 5% of the session
    out = render_summary(state, budget)
    assert out.tokens <= budget
    assert "did not yield any additional output" in out.text
    assert TRUNCATED in out.text
    assert "points at cgi-bin/file.pl line 12" in out.text
    # the plans around them are not findings
    assert "Let's fetch the archive next" not in "\n".join(f.text for f in state.findings)


def test_findings_are_the_agents_words_never_the_tools_output() -> None:
    events = ctf_session(extra_rounds=0)
    events.append(call(12, "Checking the server banner.", "c9", "curl -I http://web.chal.example:8000/"))
    events.append(result(13, "c9", "Server note: the upload did not work because the disk is full."))
    events.append(call(14, "Here is the output:\n```\nthe upload failed because quota exceeded\n```", "c10",
                       "curl http://web.chal.example:8000/quota"))
    state = lift_state(events)
    texts = "\n".join(f.text for f in state.findings)
    assert "disk is full" not in texts
    assert "quota exceeded" not in texts
    assert "disk is full" not in render_summary(state, 4000).text.split("## Latest request")[0]


def test_a_finding_said_twice_is_kept_and_shown_once() -> None:
    events = ctf_session(extra_rounds=0)
    events.append(call(12, f"{TRUNCATED} Let me try again with a range header.", "c9",
                       "curl -r 0-100 http://web.chal.example:8000/archive"))
    events.append(result(13, "c9", "partial"))
    events.append(call(14, "Now the robots file.", "c10", "curl http://web.chal.example:8000/robots.txt"))
    events.append(result(15, "c10", "User-agent: *"))
    state = lift_state(events)
    assert [f.text for f in state.findings].count(TRUNCATED) == 1
    for budget in (None, 500):
        text = render_summary(state, budget or 100_000).text
        assert text.count(TRUNCATED) == 1


def test_findings_render_in_the_reports_section_newest_first_with_their_seq() -> None:
    state = lift_state(ctf_session(extra_rounds=0))
    lines = [ln for ln in render_summary(state, 100_000).sections[REPORTS] if "(found)" in ln]
    seqs = [int(ln.split()[1].lstrip("#")) for ln in lines]
    assert seqs == sorted(seqs, reverse=True) and seqs == [8, 6]
    # the closing message's finding is said by its report, not again as a finding
    assert sum(POINTS in ln for ln in render_summary(state, 100_000).sections[REPORTS]) == 1


def test_text_before_any_result_and_questions_are_not_findings() -> None:
    events = [user(1, "Why is the build slow?"),
              call(2, "The build is slow because of the cache, I think. Is the cache on?", "c1", "make")]
    assert lift_state(events).findings == []
    units = report_units("Did the cache work? Let's check whether it works. The cache was empty after the run.")
    assert finding_sentences(units) == ["The cache was empty after the run."]


def test_a_short_follow_up_keeps_the_sentence_it_confirms_and_long_ones_are_clipped() -> None:
    units = report_units("The script raised an `AttributeError` for the missing PixelRepresentation. "
                         "This confirms the issue.")
    assert finding_sentences(units) == [
        "The script raised an `AttributeError` for the missing PixelRepresentation. This confirms the issue."]
    long = "The request returned " + "a very long list of values " * 20 + "and nothing else."
    (clipped,) = finding_sentences(report_units(long))
    assert len(clipped) <= MAX_FINDING_CHARS and clipped.endswith("…")


def test_glued_sentences_are_split_but_identifiers_stay_whole() -> None:
    units = report_units("It simply returns a static message.Next, I'll check pydantic.BaseModel usage.")
    assert units == ["It simply returns a static message.", "Next, I'll check pydantic.BaseModel usage."]


def test_findings_fold_across_compactions_like_one_pass() -> None:
    events = ctf_session()
    for cut in (5, 6, 7, 9, 11):
        half = lift_state([e for e in events if e.seq <= cut])
        assert lift_state([e for e in events if e.seq > cut], prev=half).findings == lift_state(events).findings
