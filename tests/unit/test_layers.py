import hashlib

from compactor.events import ArtifactRefBlock, ToolResultBlock, render_artifact_ref
from compactor.engine.layers import (
    CLEARED_TEXT,
    clear_old_tool_results,
    externalize_tool_results,
    make_artifact,
    summarize_range,
)
from compactor.engine.policy import make_policy
from tests.unit.engine_fixtures import Conv, long_session

DEEPSEEK = make_policy("deepseek", window=200_000, max_output=20_000)


def _results(events, seq):
    return next(e for e in events if e.seq == seq).tool_results


def test_externalize_moves_big_results_to_sha256_artifacts_with_previews():
    c = Conv()
    c.user("go")
    big = "".join(f"line {i:05d}\n" for i in range(2_000))  # 22,000 chars
    c.call("Bash", {"command": "cat big.log"}, big)
    c.call("Bash", {"command": "ls"}, "small")
    out = externalize_tool_results(c.events, DEEPSEEK)
    assert out.items == 1 and list(out.replacements) == [4]
    (ref,) = out.replacements[4][0].content
    assert isinstance(ref, ArtifactRefBlock)
    assert ref.sha256 == hashlib.sha256(big.encode()).hexdigest()
    assert ref.uri == f"artifact://sha256/{ref.sha256}" and ref.bytes == len(big.encode())
    assert out.artifacts[ref.sha256] == big.encode()
    assert ref.preview_head == big[:4_096] and ref.preview_tail == big[-1_024:]
    assert out.freed_tokens > 3_000


def test_externalize_limit_is_exclusive():
    c = Conv()
    c.user("go")
    c.call("Bash", {"command": "a"}, "x" * 8_192)
    c.call("Bash", {"command": "b"}, "y" * 8_193)
    out = externalize_tool_results(c.events, DEEPSEEK)
    assert list(out.replacements) == [6]


def test_externalize_by_lines_for_opencode():
    c = Conv()
    c.user("go")
    c.call("Bash", {"command": "seq 2001"}, "\n".join(str(i) for i in range(2_001)))
    c.call("Bash", {"command": "seq 2000"}, "\n".join(str(i) for i in range(2_000)))
    out = externalize_tool_results(c.events, make_policy("opencode"))
    assert list(out.replacements) == [4]


def test_externalize_never_touches_pinned_events_or_refs():
    c = Conv(system="s " * 20_000)
    c.user("go")
    out = externalize_tool_results(c.events, DEEPSEEK)
    assert not out.replacements
    again = externalize_tool_results(
        [e.with_(blocks=out.replacements.get(e.seq, e.blocks)) for e in c.events], DEEPSEEK
    )
    assert not again.items


def test_clear_keeps_the_newest_n_and_the_tool_uses():
    c = Conv()
    c.user("go")
    ids = [c.call("Bash", {"command": f"step {i}"}, f"output number {i}") for i in range(12)]
    pol = make_policy("claude-code")
    out = clear_old_tool_results(c.events, pol)
    assert out.items == 7
    cleared_ids = {b.tool_use_id for blocks in out.replacements.values() for b in blocks
                   if isinstance(b, ToolResultBlock)}
    assert cleared_ids == set(ids[:7])
    for seq, blocks in out.replacements.items():
        (res,) = blocks
        (ref,) = res.content
        assert ref.preview_head == CLEARED_TEXT
        assert out.artifacts[ref.sha256].decode().startswith("output number")
        assert ref.uri in render_artifact_ref(ref)  # the placeholder names the artifact
    assert all(next(e for e in c.events if e.seq == s).role == "user" for s in out.replacements)


def test_clear_waits_until_more_than_the_threshold_exist():
    c = Conv()
    c.user("go")
    for i in range(10):
        c.call("Bash", {"command": f"step {i}"}, f"out {i}")
    assert not clear_old_tool_results(c.events, make_policy("claude-code")).items


def test_clear_reuses_the_artifact_of_an_externalized_result():
    c = Conv()
    c.user("go")
    c.call("Bash", {"command": "big"}, "z" * 20_000)
    for i in range(11):
        c.call("Bash", {"command": f"step {i}"}, f"out {i}")
    ext = externalize_tool_results(c.events, DEEPSEEK)
    shown = [e.with_(blocks=ext.replacements.get(e.seq, e.blocks), tokens=None) for e in c.events]
    out = clear_old_tool_results(shown, DEEPSEEK)
    (res,) = out.replacements[4]
    (ref,) = res.content
    assert ref.sha256 in ext.artifacts and ref.preview_tail == ""


def test_make_artifact_short_content_has_no_duplicate_tail():
    ref = make_artifact(b"hello", head_chars=10, tail_chars=10)
    assert ref.preview_head == "hello" and ref.preview_tail == ""


def test_summarize_range_lifts_and_fits_the_budget():
    c = long_session(rounds=20)
    covered = [e for e in c.events if e.kind != "pinned" and e.seq <= 40]
    out = summarize_range(covered, None, 400)
    assert out.tokens <= 400
    assert "Never push to main." in out.text
    assert out.state["goal"]["seq"] == 2
    assert out.covered_tokens > out.tokens


def test_a_cleared_refs_count_is_the_tokenizers_count_of_its_rendered_text():
    """The clearing layer counts its refs in parts (``layers.cleared_ref_tokens``): the same
    number the tokenizer gives the whole rendered ref, for any digest and size - all-letter
    and all-digit digests, digit runs at either end, sizes of every width."""
    import random

    from compactor.engine.layers import _cleared_ref, cleared_ref_tokens
    from compactor.tokens import count_text

    rnd = random.Random(17)
    for i in range(3_000):
        alphabet = ("0123456789", "abcdef", "0a", "0123456789abcdef")[i % 4]
        digest = "".join(rnd.choice(alphabet) for _ in range(64))
        size = rnd.choice([0, 7, 42, 512, 9_999, 123_456, 7_654_321, rnd.randint(0, 10**10)])
        ref = _cleared_ref(b"x", "text/plain").model_copy(
            update={"sha256": digest, "uri": f"artifact://sha256/{digest}", "bytes": size})
        assert cleared_ref_tokens(ref) == count_text(render_artifact_ref(ref)), (digest, size)


def test_every_string_of_one_to_three_digits_is_one_token():
    """What ``layers.cleared_ref_tokens`` counts a digest's digit runs by (pieces of up to
    three digits, one token each)."""
    from compactor.tokens import count_text

    assert all(count_text(f"{i:0{w}d}") == 1 for w in (1, 2, 3) for i in range(10 ** w))


def test_the_clearing_layer_counts_each_cleared_event_as_count_blocks_does():
    from compactor.tokens import count_blocks

    c = Conv()
    c.user("go")
    for i in range(12):
        c.call("Bash", {"command": f"echo {i}"}, f"out {i}\n" * (i + 1))
    out = clear_old_tool_results(c.events, DEEPSEEK, keep=2)
    assert out.items == 10
    assert out.counts == {s: count_blocks(b) for s, b in out.replacements.items()}
    for blocks in out.replacements.values():
        (ref,) = blocks[0].content
        fresh = make_artifact(ref.preview_head.encode(), head_chars=0, tail_chars=0, preview_head=CLEARED_TEXT)
        assert type(ref) is type(fresh) and ref.__pydantic_fields_set__ == fresh.__pydantic_fields_set__


def test_a_replaced_event_is_what_with_gives():
    """``view.with_blocks``, the engine's light copy, gives ``Event.with_``'s event: fields,
    fields-set, and the cached properties read from the new blocks."""
    from compactor.engine.view import with_blocks

    c = Conv()
    c.user("go")
    c.call("Bash", {"command": "ls"}, "a.py")
    out = clear_old_tool_results(c.events, DEEPSEEK, keep=0)
    for e in c.events:
        e.tool_results, e.text, e.tool_uses  # cached on the original
        blocks = out.replacements.get(e.seq, e.blocks)
        got, want = with_blocks(e, list(blocks)), e.with_(blocks=list(blocks), tokens=None)
        assert got == want and got.__dict__ == want.__dict__
        assert got.__pydantic_fields_set__ == want.__pydantic_fields_set__
        assert got.tool_results == want.tool_results and got.model_dump() == want.model_dump()


def test_externalize_skips_only_results_under_every_limit(monkeypatch):
    """A result of one text at or under the policy's shortest limit is passed over without
    its checks (``layers._under_every_limit``): the same outcome as checking every result, for
    texts around each limit (newlines, multi-byte characters, a lone surrogate) and each
    policy, the limits of one set by hand too."""
    import random

    from compactor.engine import layers
    from compactor.engine.presets import PRESETS

    rnd = random.Random(23)
    policies = [make_policy(name) for name in PRESETS] + [
        make_policy("default").model_copy(update=u) for u in (
            {"tool_result_char_limit": 40, "tool_result_token_limit": None},
            {"tool_result_line_limit": 5, "tool_result_token_limit": None, "tool_result_char_limit": None},
            {"tool_result_byte_limit": 60, "tool_result_token_limit": None, "tool_result_char_limit": None},
            {"tool_result_token_limit": 30, "tool_result_char_limit": None},
        )]

    def outcome(events, policy, skip):
        if not skip:
            monkeypatch.setattr(layers, "_under_every_limit", lambda p: -1)
        try:
            out = externalize_tool_results(events, policy)
        except UnicodeEncodeError:
            return "raised"
        finally:
            monkeypatch.undo()
        return out.replacements, out.artifacts, out.counts, out.freed_tokens, out.items

    checked = 0
    for policy in policies:
        short = layers._under_every_limit(policy)
        c = Conv()
        c.user("go")
        for i in range(40):
            n = max(0, short + rnd.randint(-3, 3) if i % 4 == 0 and short < 100_000 else rnd.randint(0, 200))
            alphabet = rnd.choice(["ab ", "a\n", "é€\n", "x"])
            piece = "".join(rnd.choice(alphabet) for _ in range(64))
            c.call("Bash", {"command": "cat f"}, (piece * (n // 64 + 1))[:n])
        got = outcome(c.events, policy, True)
        assert got == outcome(c.events, policy, False)
        checked += got != "raised" and got[4] > 0  # (some results over a limit)
        if policy.tool_result_byte_limit is not None:  # a lone surrogate is encoded, as before: raises
            c = Conv()
            c.user("go")
            c.call("Bash", {"command": "cat f"}, "a\ud800")
            assert outcome(c.events, policy, True) == outcome(c.events, policy, False) == "raised"
    assert checked >= 4  # (the hand-set limits at least)
