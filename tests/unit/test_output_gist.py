"""What a fetch or query answered reaches the structured summary (``got: ...`` on its command line)."""

from __future__ import annotations

import json

from compactor.lifting.outputs import output_gist
from compactor.lifting.lift import lift_state
from compactor.summarize.structured import render_summary
from tests.unit.test_lift import assistant, results, user


def test_a_json_status_answer_keeps_its_fields_and_http_code() -> None:
    body = json.dumps({"authenticated": True, "expiresAt": "2031-01-02T00:00:00Z", "scope": "svc:read"}) + "\n200"
    gist = output_gist(body)
    assert gist.startswith("got: ") and "authenticated=true" in gist and "scope=svc:read" in gist
    assert "expiresAt=2031-01-02T00:00:00Z" in gist and gist.endswith("HTTP 200")


def test_a_result_list_names_its_items_and_a_document_its_title() -> None:
    found = {"results": [{"name": f"Proj{i}", "oneLiner": "x" * 300} for i in range(9)]}
    gist = output_gist(json.dumps(found))
    assert gist.startswith("got: results (9): Proj0, Proj1, Proj2, Proj3, Proj4") and "x" * 20 not in gist
    doc = {"documentId": "d-1", "title": "Notes on Widgets", "source": "blog", "content": "long body " * 200}
    gist = output_gist(json.dumps(doc))
    assert "title=Notes on Widgets" in gist and "documentId=d-1" in gist and "long body" not in gist


def test_code_a_response_printed_is_kept_by_its_telling_lines() -> None:
    page = ("<html><body><form></form><hr />\n#!/usr/bin/perl\n<br />use strict;\n<br />my $q = CGI->new;\n"
            "<br />if ($q->upload('doc')) {\n<br />    my $fh = $q->param('doc');\n<br />    while (<$fh>) {\n"
            "<br />        print \"$_\";\n<br />    }\n<br />}\n</body></html>")
    gist = output_gist(page)
    assert gist.startswith("got code: if ($q->upload('doc')) {")
    assert "my $fh = $q->param('doc');" in gist and "while (<$fh>) {" in gist
    assert "use strict" not in gist and "CGI->new" not in gist
    assert output_gist("total 4\n-rw-r--r-- 1 a a 10 notes.txt\n") == ""  # plain output: nothing to add


def test_what_a_fetch_answered_is_in_the_summary_within_its_share() -> None:
    evs = [
        user(1, "Check the service status and find the reports on widgets."),
        assistant(2, "", (("c1", "Bash", {"command": "curl -s https://api.example.test/status"}),)),
        results(3, ("c1", json.dumps({"authenticated": True, "scope": "svc:read"}) + "\n200", False)),
        assistant(4, "", (("c2", "Bash", {"command": "curl -s https://api.example.test/docs/d-7"}),)),
        results(5, ("c2", json.dumps({"documentId": "d-7", "title": "Widget Supply Report", "content": "z " * 500}), False)),
        assistant(6, "Authenticated; the report covers widget supply."),
    ]
    state = lift_state(evs)
    details = {c.command.rsplit("/", 1)[-1]: c.detail for c in state.commands}
    assert details["status"].startswith("got: authenticated=true") and "title=Widget Supply Report" in details["d-7"]
    text = render_summary(state, 600).text
    assert "title=Widget Supply Report" in text and "authenticated=true; scope=svc:read; HTTP 200" in text


def test_a_short_answer_keeps_its_place_in_the_share_and_long_ones_past_it_go_to_the_log() -> None:
    evs = [user(1, "Check the status, then search a lot.")]
    evs += [assistant(2, "", (("s0", "Bash", {"command": "curl -s https://api.example.test/status"}),)),
            results(3, ("s0", json.dumps({"authenticated": True}) + "\n200", False))]
    for k in range(6):  # newer searches, each answering with a long list of names
        names = [{"name": f"Project {k}-{i} alpha beta"} for i in range(9)]
        evs += [assistant(4 + 2 * k, "", ((f"q{k}", "Bash", {"command": f"curl -s https://api.example.test/search?q={k}"}),)),
                results(5 + 2 * k, (f"q{k}", json.dumps({"results": names}), False))]
    evs.append(assistant(20, "Done searching."))
    text = render_summary(lift_state(evs), 400).text  # (a share of 40 tokens: the status, no search answer)
    assert "authenticated=true; HTTP 200" in text  # the status check kept, though older
    assert text.count("got: results (9)") == 4  # past the share only the newest commands keep their line
