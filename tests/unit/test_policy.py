import json

import pytest

from compactor.cli import main
from compactor.errors import PolicyError
from compactor.engine.policy import PRESETS, make_policy, should_compact


# --- claude-code ------------------------------------------------------------------------------


def test_claude_code_200k_threshold_and_predictive():
    p = make_policy("claude-code", window=200_000, max_output=32_000)
    assert p.derived["effective"] == 180_000  # W - min(O, 20,000)
    assert p.derived["buffer"] == 13_000
    assert p.trigger_tokens == 167_000
    assert p.predictive_tokens == 145_000


def test_claude_code_reserves_only_the_output_it_can_use():
    p = make_policy("claude-code", window=200_000, max_output=8_000)
    assert p.derived["effective"] == 192_000
    assert p.trigger_tokens == 179_000


@pytest.mark.parametrize(
    "window,buffer",
    [(200_000, 13_000), (399_999, 13_000), (400_000, 30_000), (800_000, 30_000), (1_000_000, 50_000)],
)
def test_claude_code_buffer_tiers(window, buffer):
    p = make_policy("claude-code", window=window, max_output=32_000)
    assert p.derived["buffer"] == buffer
    assert p.trigger_tokens == window - 20_000 - buffer
    assert p.predictive_tokens is not None and p.predictive_tokens <= p.trigger_tokens


def test_claude_code_tail_and_tool_result_clearing():
    p = make_policy("claude-code")
    assert (p.tail_min_tokens, p.min_tail_text_messages, p.tail_max_tokens) == (10_000, 5, 40_000)
    assert (p.keep_recent_tool_results, p.clear_tool_results_after) == (5, 10)


# --- codex ------------------------------------------------------------------------------------


def test_codex_auto_and_hard():
    p = make_policy("codex", window=200_000)
    assert p.trigger_tokens == 180_000
    assert p.hard_tokens == 190_000
    assert p.tail_max_tokens == 20_000


def test_codex_configured_limit_is_capped_at_90_percent():
    assert make_policy("codex", window=200_000, configured=150_000).trigger_tokens == 150_000
    assert make_policy("codex", window=200_000, configured=250_000).trigger_tokens == 180_000


# --- opencode ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "window,reserve,usable",
    [(200_000, 20_000, 180_000), (100_000, 16_000, 84_000), (20_000, 2_000, 18_000), (32_000, 16_000, 16_000)],
)
def test_opencode_reserve_and_usable(window, reserve, usable):
    p = make_policy("opencode", window=window, max_output=4_000)
    assert p.derived["reserve"] == reserve
    assert p.trigger_tokens == usable


def test_opencode_tail_and_tool_output_limits():
    p = make_policy("opencode")
    assert p.tail_budget_tokens == 15_000 and p.tail_cut_on_user
    assert p.tool_result_line_limit == 2_000
    assert p.tool_result_byte_limit == 50 * 1024
    assert p.shrink_ladder[1:] == [0.7, 0.5, 0.35]


# --- deepseek ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "window,out,trigger,retain",
    [(200_000, 20_000, 114_464, 28_800), (128_000, 16_000, 46_464, 17_920), (1_000_000, 32_000, 800_000, 154_880)],
)
def test_deepseek_trigger_and_retain(window, out, trigger, retain):
    p = make_policy("deepseek", window=window, max_output=out)
    assert p.trigger_tokens == trigger
    assert p.tail_budget_tokens == retain == p.derived["retain"]


def test_deepseek_tool_output_limits():
    p = make_policy("deepseek", window=200_000, max_output=20_000)
    assert p.tool_result_token_limit == 12_500
    assert p.tool_result_char_limit == 8_192
    assert (p.preview_head_chars, p.preview_tail_chars) == (4_096, 1_024)
    assert p.summary_must_shrink


# --- default and errors -----------------------------------------------------------------------


def test_default_triggers_like_claude_code_and_caps_tool_output():
    d = make_policy("default")
    cc = make_policy("claude-code")
    assert (d.trigger_tokens, d.hard_tokens, d.predictive_tokens) == (cc.trigger_tokens, cc.hard_tokens, cc.predictive_tokens)
    assert d.tool_result_char_limit == 8_192 and d.tool_result_line_limit == 2_000


def test_every_field_is_documented():
    from compactor.engine.policy import Policy

    assert all(f.description for f in Policy.model_fields.values())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"preset": "nope"},
        {"preset": "default", "window": 0},
        {"preset": "default", "window": 10_000, "max_output": 10_000},
        {"preset": "deepseek", "window": 64_000, "max_output": 8_000},  # W - O - 65,536 < 0
        {"preset": "codex", "configured": -1},
    ],
)
def test_bad_input_is_a_policy_error(kwargs):
    with pytest.raises(PolicyError):
        make_policy(**kwargs)


def test_should_compact_levels():
    p = make_policy("claude-code")
    assert should_compact(p, 100_000) == "none"
    assert should_compact(p, 144_999) == "none"
    assert should_compact(p, 145_000) == "soft"  # predictive
    assert should_compact(p, 176_999) == "soft"
    assert should_compact(p, 177_000) == "hard"


def test_should_compact_prefers_provider_usage():
    p = make_policy("codex")
    assert should_compact(p, 10_000, provider_usage=185_000) == "soft"
    assert should_compact(p, 185_000, provider_usage=10_000) == "none"
    assert should_compact(p, 10_000, provider_usage=190_000) == "hard"


# --- CLI --------------------------------------------------------------------------------------


def test_cli_policy_show_json(capsys):
    assert main(["policy", "show", "deepseek", "--window", "128000", "--max-output", "16000", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["trigger_tokens"] == 46_464 and doc["tail_budget_tokens"] == 17_920


def test_cli_policy_show_table(capsys):
    assert main(["policy", "show", "claude-code", "--window", "200000", "--max-output", "32000"]) == 0
    out = capsys.readouterr().out
    assert "167,000" in out and "145,000" in out


def test_cli_policy_list(capsys):
    assert main(["policy", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in PRESETS)


def test_small_windows_do_not_make_the_soft_trigger_always_fire():
    from compactor.engine.policy import make_policy, should_compact

    for preset in ("default", "claude-code"):
        pol = make_policy(preset, window=32_000, max_output=8_000)
        assert pol.predictive_tokens is None or pol.predictive_tokens > 0
        assert should_compact(pol, 1_000) == "none"
    assert make_policy("default", window=32_000, max_output=8_000).predictive_tokens == 8_250
    assert make_policy("default", window=200_000, max_output=32_000).predictive_tokens == 145_000
