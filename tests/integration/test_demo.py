"""`make demo` (= `compactor demo`): the main job on embedded defaults, as a user runs it."""

import json
import os
import subprocess
import sys


def test_demo_compacts_the_bundled_sample_end_to_end(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TEMPORAL_ADDRESS"}
    proc = subprocess.run(
        [sys.executable, "-m", "compactor", "demo", "--session", "demo-test"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "workflow   compact/default/demo-test" in out
    assert "status      committed" in out and "invariants  ok" in out
    assert (tmp_path / ".compactor").is_dir()  # the embedded local store, in the working dir

    doc = json.loads((tmp_path / "demo-view.json").read_text())
    assert doc["record"]["tokens_after"] <= 3_000 < doc["record"]["tokens_before"]
    text = json.dumps(doc["messages"])
    # the latest request and the user's constraint survive; the pending call is answered
    assert "only with --rate 50 or lower" in text
    assert "never push to main directly" in text
    assert doc["messages"][0]["role"] == "user"
