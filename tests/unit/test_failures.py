"""Failure causes and command normalization."""

from __future__ import annotations

from compactor.lifting.failures import command_key, failure_cause


def test_cause_is_the_telling_line_not_the_exit_banner() -> None:
    out = "Exit code: 127\nWall time: 0.1 s\nOutput:\nbash: anchor: command not found\n"
    assert failure_cause(out) == "bash: anchor: command not found"


def test_cause_of_a_traceback_is_its_last_line_and_where_it_was_raised() -> None:
    out = ("Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n    f()\n"
           "TypeError: f() missing 1 required positional argument: 'a'\n")
    assert failure_cause(out) == "TypeError: f() missing 1 required positional argument: 'a' (raised at x.py:3)"
    out = ("Traceback (most recent call last):\n  File \"/repo/run.py\", line 17, in <module>\n    ds.pixels\n"
           "  File \"/repo/pkg/handlers/numpy_handler.py\", line 293, in get_pixeldata\n    raise AttributeError(\n"
           "AttributeError: Unable to convert the pixel data as the following required elements are missing from "
           "the dataset: PixelRepresentation\n")
    cause = failure_cause(out)
    assert cause.endswith("missing from the dataset: PixelRepresentation "
                          "(raised at numpy_handler.py:293 in get_pixeldata)")


def test_compiler_error_keeps_its_location() -> None:
    out = ("   Compiling vault v0.1.0\nerror[E0425]: cannot find value `seed` in this scope\n"
           "  --> programs/vault/src/lib.rs:12:9\n   |\nwarning: unused import\n")
    assert failure_cause(out) == "error[E0425]: cannot find value `seed` in this scope (programs/vault/src/lib.rs:12:9)"


def test_two_causes_in_output_order() -> None:
    out = "error: no default toolchain configured\nsolana: command not found\n"
    assert failure_cause(out) == "error: no default toolchain configured / solana: command not found"


def test_command_key_ignores_cd_env_flags_and_output_plumbing() -> None:
    assert command_key("cd /r && RUST_LOG=1 cargo test -q --lib 2>&1 | tail -20") == "cargo test"
    assert command_key("python -m pytest tests/test_a.py -x") == command_key("pytest -q tests/test_a.py")
    assert command_key("pytest tests/test_a.py") != command_key("pytest tests/test_b.py")


def test_a_later_passing_full_suite_resolves_a_failed_subset() -> None:
    from compactor.lifting.lift import lift_state
    from tests.unit.engine_fixtures import Conv

    c = Conv()
    c.user("Fix the bucket.")
    c.call("Bash", {"command": "python -m pytest -q tests/test_bucket.py"},
           "FAILED tests/test_bucket.py::test_ints - TypeError: 'float'\n1 failed", is_error=True)
    c.call("Edit", {"file_path": "src/bucket.py", "old_string": "a", "new_string": "b"}, "ok")
    c.call("Bash", {"command": "python -m pytest -q"}, "41 passed in 1.0s")
    st = lift_state(c.events)
    [fa] = [f for f in st.failed_approaches if "test_bucket" in f.what]
    assert fa.resolved_at == 7


def test_a_different_runner_does_not_resolve() -> None:
    from compactor.lifting.failures import suite_key

    assert suite_key("cmd:pytest tests/a.py::t") == "cmd:pytest"
    assert suite_key("cmd:pytest") == ""
    assert suite_key("cmd:npm test") == ""


def test_a_telling_sentence_of_a_long_harness_line_keeps_the_line_opening() -> None:
    from compactor.lifting.failures import failure_cause

    line = ("Deep-interview phase boundary: keep gathering context and write a spec before code edits. "
            "Mutation tools and patch execution are blocked while deep-interview is active; finish the spec first.")
    cause = failure_cause(line)
    assert cause.startswith("Deep-interview phase boundary") and "are blocked while" in cause


def test_two_telling_sentences_of_one_long_line_repeat_its_opening_once() -> None:
    from compactor.lifting.failures import failure_cause

    line = ("Deep-interview phase boundary: keep gathering context and write a spec before edits. "
            "Mutation tools are blocked while deep-interview is active. "
            "Patch execution failed: permission denied for this phase.")
    cause = failure_cause(line)
    assert cause.count("Deep-interview phase boundary") == 1 and "blocked" in cause and "denied" in cause


def test_swe_agent_edit_advice_is_not_the_cause() -> None:
    out = ("Your proposed edit has introduced new syntax error(s). Please read this error message carefully.\n"
           "ERRORS:\n- E999 SyntaxError: unmatched ']'\n\nThis is how your edit would have looked if applied\n"
           "DO NOT re-run the same failed edit command. Running it again will lead to the same error.\n")
    cause = failure_cause(out)
    assert "E999 SyntaxError: unmatched ']'" in cause
    assert "DO NOT re-run" not in cause
