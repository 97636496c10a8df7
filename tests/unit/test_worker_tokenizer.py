"""A worker loads the tokenizer once before it polls (issue 17, round thirteen): its executor's
threads, counting first together, each loaded it again before (five loads per worker process were
seen under ``bench perf``'s throughput run, ~0.1-0.15 s of CPU each)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_LOADS = textwrap.dedent("""
    import threading, tiktoken
    n = [0]
    init = tiktoken.Encoding.__init__
    def counted(self, *a, **k):
        n[0] += 1
        init(self, *a, **k)
    tiktoken.Encoding.__init__ = counted
    from workers.worker import load_tokenizer
    from compactor.tokens import count_text
    {load}
    go = threading.Barrier(8)
    def count(i):
        go.wait()
        n_tokens = count_text("a compaction's first count, thread %d " % i * 40)
        assert n_tokens > 40
    ts = [threading.Thread(target=count, args=(i,)) for i in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    print(n[0])
""")


def _loads(load: str) -> int:
    out = subprocess.run([sys.executable, "-c", _LOADS.format(load=load)], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_a_worker_loads_the_tokenizer_once_when_its_threads_count_first_together():
    assert _loads("load_tokenizer()") == 1


def test_build_workers_loads_the_tokenizer_before_the_worker_exists(tmp_path):
    code = textwrap.dedent(f"""
        import compactor.tokens as tokens
        import workers.worker as w
        seen = []
        class NoWorker(Exception):
            pass
        def worker(*a, **k):
            seen.append(tokens._ENCODE is not None)
            raise NoWorker
        w.Worker = worker
        from compactor.store import open_store
        from workers.settings import Settings
        try:
            url = "file://{tmp_path}"
            w.build_workers(None, Settings(store=url), open_store(url), with_llm=False)
        except NoWorker:
            pass
        print(seen)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[True]"


def test_threads_that_count_first_together_load_the_tokenizer_once_without_a_preload():
    # Any threaded caller (not only a worker that preloads): compactor.tokens.encoding loads
    # behind a lock, so eight threads that miss its memo together build one encoding.
    assert _loads("") == 1
