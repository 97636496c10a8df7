"""Fail closed and say so: blank tenant binding, unknown variables, refused paths, a corrupt
breaker, damaged logs, unreadable heads, an empty --diff. Each is one line, the right exit code,
and nothing stored changes."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from activities.breaker import BreakerActivities, BreakerCheckInput, BreakerRecordInput
from compactor.cli import main
from compactor.events import Event, TextBlock
from compactor.records import Checkpoint, SeqRange
from compactor.store import LocalStore, SessionLog
from tests.unit.store_fixtures import cold_process  # noqa: F401 - fixture

SAMPLE = Path("tests/fixtures/anthropic-messages/messages.json")


pytestmark = pytest.mark.usefixtures("cold_process")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".locks" not in p.parts}


def ev(i: str) -> Event:
    return Event(id=i, role="user", blocks=[TextBlock(text=f"text {i}")])


@pytest.mark.parametrize("value", ["", "   ", ",", " , ,"])
@pytest.mark.parametrize("argv", [["sessions"], ["import", str(SAMPLE)], ["view", "s"], ["verify", "--all"]])
def test_a_blank_tenant_list_is_an_error_not_unbound(capsys, monkeypatch, tmp_path, value, argv):
    monkeypatch.setenv("COMPACTOR_TENANTS", value)
    rc, _, err = run(capsys, *argv, "--store", f"file://{tmp_path}")
    assert rc == 2 and "COMPACTOR_TENANTS" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "t").exists()  # nothing written


def test_a_blank_tenant_list_stops_the_worker_settings(monkeypatch):
    from compactor.cli.common import settings
    from compactor.errors import InvalidInput

    monkeypatch.setenv("COMPACTOR_TENANTS", " ")
    with pytest.raises(InvalidInput, match="COMPACTOR_TENANTS"):
        settings()


@pytest.mark.parametrize("argv", [["sessions"], ["view", "s"], ["import", str(SAMPLE)], ["policy"],
                                  ["codec-key"], ["verify", "--all"]])
def test_every_command_warns_about_unknown_variables(capsys, monkeypatch, tmp_path, argv):
    monkeypatch.setenv("COMPACTOR_TENANT5", "acme")  # the audit's typo
    _, _, err = run(capsys, *argv, "--store", f"file://{tmp_path}") if argv[0] not in ("policy", "codec-key") \
        else run(capsys, *argv)
    assert "COMPACTOR_TENANT5 is not a compactor setting" in err and "did you mean COMPACTOR_TENANT" in err


def test_known_variables_are_not_warned_about(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COMPACTOR_STORE", f"file://{tmp_path}")
    monkeypatch.setenv("COMPACTOR_ANTHROPIC_TIMEOUT_S", "30")
    _, _, err = run(capsys, "sessions")
    assert "warning" not in err


@pytest.mark.parametrize("make", [
    lambda tmp: ["compact", "a" * 300, "--store", f"file://{tmp}"],
    lambda tmp: ["compact", "a" * 300 + ".json", "--inline"],
    lambda tmp: ["import", "b" * 300 + ".jsonl", "--store", f"file://{tmp}"],
    lambda tmp: ["import", f"{tmp}/{'c' * 300}/x.json", "--store", f"file://{tmp}"],
])
def test_a_path_the_system_refuses_is_one_line(capsys, tmp_path, make):
    rc, _, err = run(capsys, *make(tmp_path))
    assert rc == 2 and "File name too long" in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


# --- breaker -----------------------------------------------------------------------------------


async def test_a_corrupt_breaker_is_one_warning_and_the_compaction_runs(tmp_path, caplog):
    store = LocalStore(tmp_path)
    store.put("t/t/s/s/breaker.json", b"{not json")
    acts = BreakerActivities(store)
    with caplog.at_level(logging.DEBUG):
        gate = await acts.check_breaker(BreakerCheckInput(tenant="t", session="s", trigger="sweep"))
        out = await acts.record_breaker(BreakerRecordInput(tenant="t", session="s", ok=False, trigger="sweep"))
    assert gate.allowed and out.transition == "unchanged"
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "breaker.json" in warnings[0].getMessage()
    assert warnings[0].exc_info is None and "\n" not in warnings[0].getMessage()
    assert store.get("t/t/s/s/breaker.json")[0] == b"{not json"  # left for the operator


def test_the_breaker_command_names_the_reset(capsys, tmp_path):
    SessionLog(LocalStore(tmp_path), "default", "s").append([ev("a")])
    LocalStore(tmp_path).put("t/default/s/s/breaker.json", b"\x00garbage")
    rc, _, err = run(capsys, "breaker", "s", "--store", f"file://{tmp_path}")
    assert rc == 2 and "--clear" in err and len(err.strip().splitlines()) == 1


# --- sessions / rollback / --diff ------------------------------------------------------------------


def test_sessions_lists_what_it_can_and_names_the_bad_heads(capsys, tmp_path):
    store = LocalStore(tmp_path)
    for sid in ("good1", "bad", "good2"):
        SessionLog(store, "default", sid).append([ev("a")])
    store.put("t/default/s/bad/head.json", b"{truncated")
    url = f"file://{tmp_path}"
    rc, out, err = run(capsys, "sessions", "--store", url)
    assert rc == 1 and "good1" in out and "good2" in out and "bad" not in out
    assert "session bad" in err and "head unreadable" in err
    rc, out, _ = run(capsys, "sessions", "--store", url, "--json")
    rows = json.loads(out)
    assert rc == 1 and {r["session"] for r in rows} == {"good1", "good2", "bad"}
    assert [r for r in rows if r["session"] == "bad"][0]["error"]


def damaged(tmp_path: Path) -> tuple[LocalStore, str]:
    store = LocalStore(tmp_path)
    log = SessionLog(store, "default", "s", merge=False)
    log.append([ev("a"), ev("b")])
    log.append([ev("c")])
    log.write_checkpoint(Checkpoint(id="c1", tenant="default", session="s", covers=SeqRange(start=1, end=2),
                                    summary="summary"))
    log.set_checkpoint("c1", expected_etag=None)
    seg = log.head().segments[1].key
    path = store._path(seg)
    path.write_bytes(path.read_bytes().replace(b"text c", b"text X"))
    return store, f"file://{tmp_path}"


def test_rollback_over_a_damaged_log_refuses_unless_forced(capsys, tmp_path):
    store, url = damaged(tmp_path)
    before = tree(tmp_path)
    rc, _, err = run(capsys, "rollback", "s", "--to", "none", "--store", url)
    assert rc == 1 and "damaged" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert tree(tmp_path) == before
    rc, out, _ = run(capsys, "rollback", "s", "--to", "none", "--force", "--store", url)
    assert rc == 0 and SessionLog(store, "default", "s").head().checkpoint is None


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_diff_argument_is_an_error(capsys, tmp_path, value):
    _, url = damaged(tmp_path)
    rc, out, err = run(capsys, "inspect", "s", "--diff", value, "--store", url)
    assert rc == 2 and "--diff" in err and not out
