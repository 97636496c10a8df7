from datetime import datetime, timezone

from activities.breaker import load_breaker, update_breaker
from compactor import breaker
from compactor.cli import main
from compactor.store import open_store


def _fail(store, n):
    for i in range(n):
        update_breaker(store, "default", "s1", lambda st: breaker.record(
            st, tenant="default", session="s1", ok=False, trigger="sweep",
            at=datetime(2026, 1, 1, tzinfo=timezone.utc), error=f"boom {i}"))


def test_operator_sees_and_clears_an_open_breaker(tmp_path, capsys):
    url = f"file://{tmp_path}"
    store = open_store(url)
    _fail(store, 3)
    assert main(["breaker", "s1", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "OPEN" in out and "3 consecutive" in out and "boom 2" in out
    assert breaker.check(load_breaker(store, "default", "s1")[0], "sweep").allowed is False

    assert main(["breaker", "s1", "--clear", "--store", url]) == 0
    st, _ = load_breaker(store, "default", "s1")
    assert st.open is False and st.consecutive_failures == 0
    assert breaker.check(st, "sweep").allowed is True


def test_breaker_of_a_session_without_failures_is_closed(tmp_path, capsys):
    from compactor.events import Event, TextBlock
    from compactor.store import SessionLog

    url = f"file://{tmp_path}"
    SessionLog(open_store(url), "default", "fresh").append(
        [Event(id="e1", role="user", blocks=[TextBlock(text="hello")])])
    assert main(["breaker", "fresh", "--store", url]) == 0
    assert "closed" in capsys.readouterr().out


def test_breaker_of_an_unknown_session_is_not_found(tmp_path, capsys):
    assert main(["breaker", "nosuch", "--store", f"file://{tmp_path}"]) == 2
    assert "no session 'nosuch'" in capsys.readouterr().err
