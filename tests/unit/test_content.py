"""What a changed file holds, the agent's note on it, and the last action (issue 14 item 4)."""

from __future__ import annotations

from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.lifting.content import content_facts, merge_facts
from compactor.lifting.lift import lift_state
from compactor.summarize.structured import FILES_CHANGED, LAST_ACTION, render_summary

TRAIN = '''"""Train the sensor model and write the metrics."""
import json

EPOCHS = 20
LEARNING_RATE = 0.001
DATA = "data/iot_data.csv"


def train_model(epochs: int = EPOCHS, lr: float = LEARNING_RATE) -> dict:
    batch_size = 32
    score = 0.7 * acc + 0.3 * f1  # the agent's formula
    for epoch in range(epochs):
        step(df[0])
    df = load("data/iot_data.csv")
    json.dump(out, open("results/results.json", "w"))
'''


def test_facts_of_a_python_write() -> None:
    facts = content_facts("src/train.py", TRAIN)
    assert facts[0] == "about: Train the sensor model and write the metrics."
    assert "EPOCHS = 20" in facts and "LEARNING_RATE = 0.001" in facts
    assert 'DATA = "data/iot_data.csv"' in facts
    # the function is one line: its signature, then what it computes, loops over and calls
    line = next(f for f in facts if f.startswith("def train_model("))
    assert line.startswith("def train_model(epochs: int = EPOCHS, lr: float = LEARNING_RATE) -> dict: ")
    assert "batch_size = 32" in line and "score = 0.7 * acc + 0.3 * f1" in line
    assert "for epoch in range(epochs)" in line and "writes results/results.json" in facts
    # (a setting the line says whole is not said again on its own)
    assert "batch_size = 32" not in facts and "score = 0.7 * acc + 0.3 * f1" not in facts


def test_facts_of_config_and_js_files() -> None:
    assert content_facts("cfg.yaml", "port: 8080\nmodel: small  # tiny\nlist:\n  - a\n") == [
        "port: 8080", "model: small"]
    assert content_facts("package.json", '{"name": "app", "version": "1.2.0", "scripts": {"test": "jest"}}') == [
        'name: "app"', 'version: "1.2.0"', 'scripts: test="jest"']
    js = "export const API_URL = 'https://api.test/v2';\nexport function score(row, weights) {\n  return 1;\n}\n"
    assert content_facts("src/score.ts", js) == ["API_URL = 'https://api.test/v2'", "export function score(row, weights)"]
    assert content_facts("notes.txt", "") == []


def test_a_later_write_replaces_what_it_redefines() -> None:
    old = ["about: placeholder", "EPOCHS = 10", "def train()"]
    assert merge_facts(["EPOCHS = 20"], old) == ["EPOCHS = 20", "def train()"]


def _write(seq: int, path: str, content: str, say: str = "") -> list[Event]:
    blocks = ([TextBlock(text=say)] if say else []) + [
        ToolUseBlock(id=f"w{seq}", name="Write", input={"file_path": path, "content": content})]
    return [Event(seq=seq, id=f"a{seq}", role="assistant", blocks=blocks),
            Event(seq=seq + 1, id=f"r{seq}", role="user", blocks=[ToolResultBlock(
                tool_use_id=f"w{seq}", content=[TextBlock(text="File written")])])]


def _session() -> list[Event]:
    evs = [Event(seq=1, id="u1", role="user", blocks=[TextBlock(text="Write the trainer.")])]
    evs += [Event(seq=2, id="a2", role="assistant", blocks=[TextBlock(
        text="I'll create src/train.py, which trains for 20 epochs and writes results/results.json.")])]
    evs += _write(3, "src/train.py", TRAIN)
    evs += [Event(seq=5, id="a5", role="assistant", blocks=[
        TextBlock(text="Now the tests."), ToolUseBlock(id="t1", name="Bash", input={"command": "pytest -q"})])]
    return evs


def test_the_summary_says_what_a_file_holds_and_the_agent_note() -> None:
    st = lift_state(_session())
    f = st.files_changed[0]
    assert f.note.startswith("I'll create src/train.py, which trains for 20 epochs")
    assert "EPOCHS = 20" in f.facts
    r = render_summary(st, 2_000)
    text = "\n".join(r.sections[FILES_CHANGED])
    assert "the agent: I'll create src/train.py" in text and "EPOCHS = 20" in text
    assert "writes results/results.json" in text


def test_notes_and_facts_fold_across_checkpoints() -> None:
    evs = _session()
    whole = lift_state(evs)
    assert lift_state(evs, prev=lift_state(evs[:2])) == whole  # the mention before the write
    # a cut inside a tool pair: the write resolves later and keeps what it wrote
    assert lift_state(evs, prev=lift_state(evs[:3])).files_changed[0].facts == whole.files_changed[0].facts


def test_file_details_stay_within_their_share() -> None:
    evs = [Event(seq=1, id="u1", role="user", blocks=[TextBlock(text="Write many modules.")])]
    for i in range(40):
        evs += _write(2 + 2 * i, f"src/m{i}.py", TRAIN)
    st = lift_state(evs)
    full = render_summary(st, 100_000)
    small = render_summary(st, 3_000)
    assert small.tokens <= 3_000
    assert full.text.count("holds:") == 40 and 0 < small.text.count("holds:") < 40
    assert "src/m39.py" in small.text  # the newest file keeps its line


def test_last_action_without_a_result_is_never_done() -> None:
    st = lift_state(_session())
    la = st.last_action
    assert la is not None and la.status == "unknown" and la.what == "pytest -q" and la.intent == "Now the tests."
    line = render_summary(st, 2_000).sections[LAST_ACTION][0]
    assert "`pytest -q`" in line and "no result in the log" in line and "ok" not in line.split("→")[1]


def test_an_edits_leading_comment_is_not_the_files_explanation() -> None:
    evs = [Event(seq=1, id="u1", role="user", blocks=[TextBlock(text="Fix rounding.")]),
           Event(seq=2, id="a2", role="assistant", blocks=[ToolUseBlock(id="e1", name="Edit", input={
               "file_path": "fields.py", "old_string": "return int(v)",
               "new_string": "# round to nearest int\nreturn int(round(v))\nPRECISION = 3"})]),
           Event(seq=3, id="r3", role="user", blocks=[ToolResultBlock(tool_use_id="e1", content=[TextBlock(text="ok")])])]
    assert lift_state(evs).files_changed[0].facts == ["PRECISION = 3"]
    assert content_facts("fields.py", "# Field types and their serialization.\nX = 1\n")[0].startswith("about: ")


def test_a_late_result_updates_the_last_action() -> None:
    from compactor.lifting.lift import reconcile

    evs = _session()
    st = lift_state(evs)
    late = Event(seq=7, id="r7", role="user", blocks=[ToolResultBlock(
        tool_use_id="t1", content=[TextBlock(text="2 failed, 9 passed\nExit code: 1")], is_error=True)])
    new, resolved = reconcile(st, [late])
    assert resolved == ["t1"]
    assert new.last_action is not None and new.last_action.status == "failed" and new.last_action.result_seq == 7


def test_an_error_is_said_once_with_what_hit_it_and_whether_it_was_fixed() -> None:
    from compactor.summarize.structured import ERRORS

    def run(seq: int, uid: str, out: str, err: bool) -> list[Event]:
        return [Event(seq=seq, id=f"a{seq}", role="assistant", blocks=[
                    ToolUseBlock(id=uid, name="Bash", input={"command": "python -m pytest -q tests/api"})]),
                Event(seq=seq + 1, id=f"r{seq}", role="user", blocks=[ToolResultBlock(
                    tool_use_id=uid, content=[TextBlock(text=out)], is_error=err)])]

    evs = [Event(seq=1, id="u1", role="user", blocks=[TextBlock(text="Make the API tests pass.")])]
    evs += run(2, "p1", "E   ValueError: invalid budget: -1\n1 failed, 3 passed\nExit code: 1", True)
    evs += run(4, "p2", "4 passed\nExit code: 0", False)
    lines = render_summary(lift_state(evs), 2_000).sections[ERRORS]
    assert len(lines) == 1
    assert "`python -m pytest -q tests/api` → failed, resolved at #4" in lines[0]
    assert "ValueError: invalid budget: -1" in lines[0]


def test_a_whole_formula_is_a_fact_and_a_bare_constructor_is_not() -> None:
    code = (
        "import numpy as np\n\n"
        "def generate(num_rows=1000):\n"
        "    temperature = np.random.normal(loc=20, scale=5, size=num_rows)\n"
        "    target = (0.5 * temperature) + (0.3 * humidity) + (0.1 * light) + (0.1 * co2) + "
        "np.random.normal(loc=0, scale=2, size=num_rows)\n"
        "    return target\n\n"
        "class Model:\n"
        "    def __init__(self):\n"
        "        self.fc = Linear(4, 1)\n"
    )
    facts = content_facts("scripts/generate.py", code)
    assert ("target = (0.5 * temperature) + (0.3 * humidity) + (0.1 * light) + (0.1 * co2) + "
            "np.random.normal(loc=0, scale=2, size=num_rows)") in facts
    assert any(f.startswith("def generate(num_rows=1000)") for f in facts) and "self.fc = Linear(4, 1)" in facts
    assert "def __init__(self)" not in facts  # says nothing a reader asks for
    # a file that holds nothing else still shows its bare signature
    assert content_facts("m.py", "    def __init__(self):\n        pass\n", whole=False) == ["def __init__(self)"]


def test_what_the_code_stores_reads_and_serves_is_named() -> None:
    page = ("<title>Random</title>\n<script>\n  const saved = localStorage.getItem('random-min');\n"
            "  maxInput.addEventListener('input', () => localStorage.setItem('random-max', maxInput.value));\n"
            "  fetch('/api/roll');\n</script>\n")
    facts = content_facts("web/index.html", page)
    assert "title: Random" in facts
    assert "localStorage: random-min, random-max" in facts
    assert "fetches: /api/roll" in facts
    app = ('import os\n\nKEY = os.environ["API_KEY"]\n\n@app.post("/login")\ndef login():\n'
           '    return os.getenv("DEBUG")\n')
    facts = content_facts("app.py", app)
    assert "env: API_KEY, DEBUG" in facts and "routes: POST /login" in facts


def test_an_edit_says_which_branch_it_added() -> None:
    new_lines = ("    required = ['BitsAllocated', 'Rows']\n"
                 "    if 'PixelData' in ds:\n"
                 "        required.append('PixelRepresentation')\n"
                 "if __name__ == \"__main__\":\n    main()\n")
    facts = content_facts("pkg/numpy_handler.py", new_lines, whole=False)
    assert "if 'PixelData' in ds: required.append('PixelRepresentation')" in facts
    assert not any("__name__" in f for f in facts)
    # a whole file is described by its signatures and settings, not by each branch
    assert not any(f.startswith("if ") for f in content_facts("pkg/numpy_handler.py", new_lines))


FETCH_ALL = '''from youtube_transcript_api import YouTubeTranscriptApi
import json, time
import requests

VIDEOS = [
    ("abc123", "First talk", "3way"),
    ("def456", "Second talk", "news"),
    ("ghi789", "Third talk", "news"),
    ("jkl012", "Fourth talk", "news"),
]

session = requests.Session()
session.proxies = {
    'http': 'socks5h://127.0.0.1:9050',
    'https': 'socks5h://127.0.0.1:9050',
}
ytt = YouTubeTranscriptApi(http_client=session)

with open('/tmp/transcripts.json', 'w') as f:
    json.dump(results, f)
'''


def test_a_script_says_its_dependencies_its_data_and_where_it_writes() -> None:
    facts = content_facts("/tmp/fetch_all.py", FETCH_ALL)
    assert "imports: youtube_transcript_api, requests" in facts  # json and time are the standard library
    assert "writes /tmp/transcripts.json" in facts and "uses /tmp/transcripts.json" not in facts
    (videos,) = [f for f in facts if f.startswith("VIDEOS = ")]
    assert '("abc123", "First talk", "3way")' in videos and "(4 items)" in videos
    assert 'session.proxies = {"http": "socks5h://127.0.0.1:9050", "https": "socks5h://127.0.0.1:9050"}' in facts
    assert "ytt = YouTubeTranscriptApi(http_client=session)" in facts


def test_a_page_says_its_sections_and_where_its_data_lives() -> None:
    page = ('<html><head><title>Model duel</title></head><body><h1>Duel</h1><h2>Winners</h2>'
            '<h2 class="s">&#x1F4B0; Prices</h2><div id="cards"></div>'
            '<script type="application/json" id="vdata">[{"id": "a", "t": "x", "w": "gpt"}, '
            '{"id": "b", "t": "y", "w": "glm"}]</script><script>var DATA=JSON.parse(x);</script></body></html>')
    facts = content_facts("site/index.html", page)
    assert "sections: Duel | Winners | \U0001F4B0 Prices" in facts
    assert 'data embedded as JSON in <script id="vdata"> (2 items); item keys: id, t, w' in facts


def test_a_file_read_says_what_it_defines_and_the_summary_shows_it() -> None:
    listing = ('[File: setup.py (30 lines total)]\n1:from setuptools import setup\n2:\n3:EXTRAS_REQUIRE = {\n'
               '4:    "tests": ["pytest", "pytz"],\n5:    "lint": ["flake8==4.0.1", "mypy==0.910", "pre-commit~=2.4"],\n'
               '6:}\n7:EXTRAS_REQUIRE["dev"] = EXTRAS_REQUIRE["tests"] + EXTRAS_REQUIRE["lint"] + ["tox"]\n'
               '8:\n9:def find_version(fname):\n10:    if not version:\n11:        raise RuntimeError("no version")\n')
    evs = [Event(seq=1, id="u1", role="user", blocks=[TextBlock(text="Fix the rounding bug.")]),
           Event(seq=2, id="a2", role="assistant", blocks=[ToolUseBlock(id="o1", name="open", input={"path": "setup.py"})]),
           Event(seq=3, id="r3", role="user", blocks=[ToolResultBlock(tool_use_id="o1", content=[TextBlock(text=listing)])])]
    st = lift_state(evs)
    (f,) = st.files_read
    assert 'EXTRAS_REQUIRE["dev"] = EXTRAS_REQUIRE["tests"] + EXTRAS_REQUIRE["lint"] + ["tox"]' in f.facts
    # (what the [dev] extra pulls in: the pinned packages, not a count)
    assert ('EXTRAS_REQUIRE = {"tests": ["pytest", "pytz"], "lint": ["flake8==4.0.1", "mypy==0.910", '
            '"pre-commit~=2.4"]}') in f.facts
    assert not any(x.startswith("if ") for x in f.facts)  # a branch is what an edit added, not a read
    text = render_summary(st, 3_000).text
    assert "- setup.py\n  defines: imports: setuptools · EXTRAS_REQUIRE = " in text


def test_a_file_written_after_words_that_name_no_file_takes_those_words_as_its_note() -> None:
    def write(seq: int, uid: str, words: str, path: str) -> list[Event]:
        return [Event(seq=seq, id=f"a{seq}", role="assistant", blocks=[
                    TextBlock(text=words), ToolUseBlock(id=uid, name="write", input={"path": path, "content": "x = 1\n"})]),
                Event(seq=seq + 1, id=f"r{seq}", role="user", blocks=[ToolResultBlock(tool_use_id=uid, content=[
                    TextBlock(text="ok")])])]

    evs = [Event(seq=1, id="u1", role="user", blocks=[TextBlock(text="Get all the transcripts.")])]
    evs += write(2, "w1", "10/10 성공. 전체 50개 영상 트랜스크립트 배치 추출합니다.", "/tmp/fetch_all.py")
    evs += write(4, "w2", "Empty folder. Let me build it.", "/tmp/index.html")
    evs += write(6, "w3", "Blocked by the API. Switching to a fetcher that routes requests through the tor proxy.",
                 "/tmp/tor_fetch.py")
    notes = {f.path: f.note for f in lift_state(evs).files_changed}
    assert notes["/tmp/fetch_all.py"] == "10/10 성공. 전체 50개 영상 트랜스크립트 배치 추출합니다."
    assert notes["/tmp/index.html"] == ""  # says nothing of what the file does
    assert notes["/tmp/tor_fetch.py"].startswith("Blocked by the API. Switching to a fetcher")
    for cut in (5, 6):  # (6: the words and the call before the checkpoint, the result after it)
        half = lift_state(evs[:cut])
        assert {f.path: f.note for f in lift_state(evs[cut:], prev=half).files_changed} == notes  # folds


def test_the_projects_own_modules_are_not_named_as_dependencies() -> None:
    from compactor.lifting.lift import FileRef, LiftedState

    train = "import torch\nfrom dataset import load_data\nfrom model import Net\n\ndef train_model():\n    pass\n"
    st = LiftedState(files_changed=[
        FileRef(path="src/dataset.py", seq=3, ops=["write"], facts=content_facts("src/dataset.py", "import pandas\n")),
        FileRef(path="src/model.py", seq=4, ops=["write"], facts=content_facts("src/model.py", "import torch\n")),
        FileRef(path="src/train.py", seq=5, ops=["write"], facts=content_facts("src/train.py", train))])
    assert "imports: torch, dataset, model" in st.files_changed[2].facts  # the lifter cannot tell yet
    text = render_summary(st, 100_000).text
    train_line = text.split("- src/train.py", 1)[1].split("\n- ", 1)[0]
    assert "imports: torch ·" in train_line and "dataset" not in train_line.split("imports:", 1)[1].split("·")[0]


# --- what a written function does (compactor.lifting.behaviour) ----------------------------------

_RNG_JS = '''<script>
  function pickInRange(lo, hi) {
    const span = hi - lo + 1;
    const nBytes = Math.ceil(Math.log2(span) / 8) || 1;
    const limit = Math.floor((256 ** nBytes) / span) * span;
    let v;
    do {
      const buf = new Uint8Array(nBytes);
      crypto.getRandomValues(buf);
      v = 0;
      for (let i = 0; i < nBytes; i++) v = v * 256 + buf[i];
    } while (v >= limit);
    return lo + (v % span);
  }
  function beep(level) {
    const osc = ctx.createOscillator();
    osc.connect(ctx.destination);
    osc.frequency.value = 440 + level * 100;
    osc.start();
  }
</script>'''


def test_a_written_function_is_said_with_what_it_computes_loops_over_and_returns() -> None:
    facts = content_facts("site/index.html", _RNG_JS, whole=False)
    pick = next(f for f in facts if f.startswith("function pickInRange(lo, hi): "))
    # the statements a reader asks for ("how was it implemented"), in source order
    assert "span = hi - lo + 1" in pick and "limit = Math.floor((256 ** nBytes) / span) * span" in pick
    assert "while (v >= limit)" in pick and pick.endswith("return lo + (v % span)")
    assert pick.index("span = hi") < pick.index("while (") < pick.index("return lo")
    beep = next(f for f in facts if f.startswith("function beep(level): "))
    assert "osc.frequency.value = 440 + level * 100" in beep
    assert "connect(" not in beep and "start()" not in beep  # housekeeping calls say nothing


def test_an_edits_branch_says_what_each_side_calls() -> None:
    edit = '''      if (progress < 1) {
        out.textContent = pickInRange(lo, hi);
        beep(progress);
      } else {
        out.textContent = final;
        burst();
        fanfare();
      }
'''
    facts = content_facts("site/index.html", edit, whole=False)
    line = next(f for f in facts if f.startswith("if (progress < 1): "))
    assert "beep(progress)" in line and "· else: " in line
    assert line.index("burst()") > line.index("· else: ") and line.endswith("fanfare()")
    # a whole write is a file's functions, not its branches
    assert not any(f.startswith("if (") for f in content_facts("site/app.js", "function f(x) {\n" + edit + "}\n"))


def test_a_function_with_one_telling_statement_keeps_its_plain_signature() -> None:
    facts = content_facts("m.py", "def forward(self, x):\n    return self.fc(x)\n\ndef area(r):\n    return 3.14 * r * r\n")
    assert "def area(r)" in facts or any(f == "def area(r)" for f in facts)
    assert not any(f.startswith("def area(r): ") for f in facts)


def test_a_comment_with_an_apostrophe_does_not_swallow_the_next_function() -> None:
    js = "function f(a) {\n  // don't stop here\n  const c = a * 3;\n  return c + 7;\n}\nfunction g(x) {\n  const y = x * 2;\n  return y - 5;\n}\n"
    assert content_facts("a.js", js) == ["function f(a): c = a * 3; return c + 7", "function g(x): y = x * 2; return y - 5"]


def test_within_a_budget_only_the_newest_files_keep_their_functions_statements() -> None:
    from compactor.lifting.state import FileRef
    from compactor.summarize.file_details import file_details

    line = ("def run(n): data = load_the_training_data(); for epoch in range(20); total = step(data) * 3; "
            "return summarize_results(total)")  # (a line of its own: over LONG_FACT_CHARS)
    files = [FileRef(path=f"f{i}.py", seq=i, facts=[line.replace("run", f"run{i}")]) for i in range(5)]
    details = file_details(files, 4_000)
    for new in ("f4.py", "f3.py", "f2.py"):  # the 3 newest: the whole line
        assert line.replace("run", f"run{new[1]}") in details[new]
    for old in ("f1.py", "f0.py"):  # older: the signature and the statements holding a number
        assert f"def run{old[1]}(n): for epoch in range(20); total = step(data) * 3" in details[old]
        assert "load_the_training_data()" not in details[old]
    assert "load_the_training_data()" in file_details(files, None)["f0.py"]  # no budget: everything


def test_a_read_files_functions_are_their_signatures_within_a_budget() -> None:
    from compactor.lifting.state import FileRef
    from compactor.summarize.file_details import read_details

    long_sig = "def __init__( self, keys: typing.Optional[typing.Union[Field, type]] = None, values…"
    f = FileRef(path="fields.py", seq=3, facts=[f"{long_sig}: if keys is None; self.key_field = resolve(keys)",
                                                 "def load(n): rows = read(n); return rows * 2"])
    (line,) = read_details([f], 2_000).values()
    assert line == f"  defines: {long_sig} · def load(n): return rows * 2"


def test_a_function_is_said_with_its_statements_only_when_it_has_two() -> None:
    one = content_facts("m.py", "def f(x):\n    return x + 1\n")
    two = content_facts("m.py", "def f(x):\n    y = x * 3\n    return y + 1\n")
    assert one == ["def f(x)"]
    assert len(two) == 1 and two[0].startswith("def f(x): ") and "y = x * 3" in two[0]


def test_a_route_is_a_fact_only_with_its_quoted_path() -> None:
    code = "@app.get('/users')\ndef users():\n    return []\n"
    assert any(f.startswith("routes: GET /users") for f in content_facts("app.py", code))
    assert not any(f.startswith("routes") for f in content_facts("app.py", "x = app.get(name)\n"))
