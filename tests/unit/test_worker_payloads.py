"""The worker's payload converter (workers/payloads.py) and its tokenizer load (issue 17, round
thirteen): the shared converter writes and reads what Temporal's pydantic converter does, and a
worker loads the tokenizer once, however many of its threads count first."""

from __future__ import annotations

import datetime
import subprocess
import sys
import textwrap

from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter

from activities.contracts import CompactSessionInput, CompactSessionOutput, PolicyRef, SnapshotRef
from compactor.records import CompactionRecord
from workers.payloads import SharedPydanticPayloadConverter, shared_pydantic_data_converter
from workers.settings import Settings
from workers.worker import build_data_converter

_T = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
_VALUES = [
    CompactSessionInput(tenant="t1", session="s1", target_tokens=2_500),
    SnapshotRef(tenant="t1", session="s1", version=7, etag="e", view_tokens=123, prev_covers_end=3),
    CompactSessionOutput(status="committed", checkpoint="c1", record_key="k",
                         record=CompactionRecord(id="r", tenant="t1", session="s1", workflow_id="w",
                                                 trigger="manual", policy="default", summarizer="structured",
                                                 status="committed", created_at=_T)),
    PolicyRef(target_tokens=9),
    None,
    b"\x00bytes",
    {"a": [1, 2.5, "x"], "b": None},
    _T,
    "text",
]


def test_the_shared_converter_writes_and_reads_what_the_pydantic_one_does():
    new, old = SharedPydanticPayloadConverter(), PydanticPayloadConverter()
    assert [p.SerializeToString(deterministic=True) for p in new.to_payloads(_VALUES)] == \
        [p.SerializeToString(deterministic=True) for p in old.to_payloads(_VALUES)]
    payloads = old.to_payloads(_VALUES)
    hints = [type(v) if v is not None else None for v in _VALUES]
    assert new.from_payloads(payloads, hints) == old.from_payloads(payloads, hints) == _VALUES
    assert list(new.converters) == list(old.converters)  # same encodings, same order


def test_instances_share_one_json_converter_and_its_type_adapters():
    a, b = SharedPydanticPayloadConverter(), SharedPydanticPayloadConverter()
    assert a.converters[b"json/plain"] is b.converters[b"json/plain"]
    a.from_payloads(a.to_payloads([_VALUES[1]]), [SnapshotRef])
    # the adapter built for a is b's: a workflow run no longer builds its own
    cache = b.converters[b"json/plain"]._type_adapter  # type: ignore[attr-defined]
    hits = cache.cache_info().hits
    b.from_payloads(b.to_payloads([_VALUES[1]]), [SnapshotRef])
    assert cache.cache_info().hits == hits + 1


def test_the_workers_data_converter_uses_the_shared_payload_converter():
    conv = build_data_converter(Settings(store="file:///tmp/unused"))
    assert conv.payload_converter_class is SharedPydanticPayloadConverter
    assert shared_pydantic_data_converter.payload_converter_class is SharedPydanticPayloadConverter
    # a data converter derived by the SDK (per workflow run, per context) is as cheap as a dict
    derived = DataConverter(payload_converter_class=conv.payload_converter_class)
    assert derived.payload_converter.to_payloads(_VALUES[:1])[0].data == \
        conv.payload_converter.to_payloads(_VALUES[:1])[0].data


def test_a_worker_loads_the_tokenizer_once_when_its_threads_count_first_together():
    code = textwrap.dedent("""
        import threading, tiktoken
        n = [0]
        init = tiktoken.Encoding.__init__
        def counted(self, *a, **k):
            n[0] += 1
            init(self, *a, **k)
        tiktoken.Encoding.__init__ = counted
        from workers.worker import load_tokenizer
        from compactor.tokens import count_text
        load_tokenizer()
        go = threading.Barrier(8)
        def count(i):
            go.wait()
            count_text("a compaction's first count, thread %d " % i * 40)
        ts = [threading.Thread(target=count, args=(i,)) for i in range(8)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        print(n[0])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
