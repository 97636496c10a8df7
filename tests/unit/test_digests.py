"""File-change digests: what a write defines, what an edit replaced, from tool inputs."""

from __future__ import annotations

from compactor.lifting.digests import edit_digest, input_digest, parse_patch, top_names, write_digest


def test_write_digest_gives_size_and_top_level_names() -> None:
    src = "import os\n\nLIMIT = 3\n\nclass Runner:\n    def go(self):\n        pass\n\ndef main():\n    pass\n"
    d = write_digest("src/run.py", src)
    assert d.startswith("wrote 10 lines, ")
    assert "defines LIMIT, Runner, main" in d and "go" not in d  # methods are not top-level


def test_top_names_per_kind() -> None:
    assert top_names("package.json", '{"name": "x", "dependencies": {"@coral-xyz/anchor": "1"}}') == [
        "name", "dependencies", "@coral-xyz/anchor"]
    assert top_names("Dockerfile", "FROM rust:1.79 AS build\nRUN x\nFROM debian:12\n") == ["rust:1.79", "debian:12"]
    assert top_names("web/api.ts", "export async function load() {}\nexport const KEY = 1\n") == ["load", "KEY"]
    assert top_names("programs/x/src/lib.rs", 'declare_id!("Fg6PaFpoGXkYsidMpWTK6W2BeZ7FEfcYkg476zPFsLnS");\npub fn init() {}\n') == [
        "Fg6PaFpoGXkYsidMpWTK6W2BeZ7FEfcYkg476zPFsLnS", "init"]
    assert top_names("Cargo.toml", 'name = "x"\n[dependencies]\nserde = "1"\n') == ["name", "dependencies"]


def test_one_line_edit_shows_old_and_new() -> None:
    d = edit_digest("src/lib.rs", 'const SEED: &[u8] = b"vault";', 'const SEED: &[u8] = b"vault-v2";')
    assert d == '"const SEED: &[u8] = b"vault";" → "const SEED: &[u8] = b"vault-v2";"'


def test_multi_line_edit_shows_counts_and_names_added_and_removed() -> None:
    old = 'anchor-lang = "0.29"\nsolana-program = "1.17"\n'
    new = 'anchor-lang = "0.30"\nanchor-spl = "0.30"\n'
    d = edit_digest("Cargo.toml", old, new)
    assert d.startswith("+2 -2 lines")
    assert "adds anchor-spl" in d and "removes solana-program" in d


def test_tool_inputs_claude_multiedit_pi_and_str_replace_editor() -> None:
    multi = {"file_path": "a.py", "edits": [{"old_string": "x = 1", "new_string": "x = 2"},
                                            {"old_string": "def f():", "new_string": "def g():"}]}
    assert input_digest("a.py", "edit", multi).startswith("2 edits: +2 -2 lines; adds g; removes f")
    assert input_digest("n.md", "edit", {"path": "n.md", "oldText": "old", "newText": "new"}) == '"old" → "new"'
    assert input_digest("b.py", "create", {"command": "create", "path": "b.py", "file_text": "def h():\n  pass\n"}) == (
        "wrote 2 lines, 16 B; defines h")


def test_patch_hunks_per_file() -> None:
    patch = ("*** Begin Patch\n*** Add File: src/new.py\n+def fresh():\n+    return 1\n"
             "*** Update File: src/old.py\n@@\n-limit = 10\n+limit = 20\n*** Delete File: src/gone.py\n*** End Patch")
    files = {pf.path: pf.digest() for pf in parse_patch(patch)}
    assert files == {"src/new.py": "wrote 2 lines, 26 B; defines fresh",
                     "src/old.py": '"limit = 10" → "limit = 20"', "src/gone.py": "deleted"}
    assert parse_patch(patch.replace("\n", "\\n")) == []  # one long line names no file


def test_aider_search_replace_blocks_give_digests() -> None:
    from compactor.lifting.digests import aider_digests

    reply = ("Here is the block:\n\nconfig/app.json\n```json\n<<<<<<< SEARCH\n=======\n"
             "{\"program_id\": \"PLACEHOLDER111\", \"seeds\": [1, 2, 3]}\n>>>>>>> REPLACE\n```\n\n"
             "src/x.py\n```python\n<<<<<<< SEARCH\nLIMIT = 3\n=======\nLIMIT = 5\n>>>>>>> REPLACE\n```\n")
    d = aider_digests(reply)
    assert "PLACEHOLDER111" in d["config/app.json"] and "[1, 2, 3]" in d["config/app.json"]
    assert d["src/x.py"] == '"LIMIT = 3" → "LIMIT = 5"'


def test_multiline_edit_without_names_quotes_its_new_lines() -> None:
    from compactor.lifting.digests import edit_digest

    d = edit_digest("h.py", "req = ['A', 'B', 'C']\n", "req = ['A', 'B']\nif 'P' in ds:\n    req.append('C')\n")
    assert "if 'P' in ds:" in d and "req.append('C')" in d
