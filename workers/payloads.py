"""The pydantic payload converter, with one JSON converter (and its type-adapter cache) per process.

Temporal's SDK builds a new payload converter from ``DataConverter.payload_converter_class`` for
every workflow run it starts on a worker (the run's own, and the command-aware one that wraps it)
and for every data converter it derives with a serialization context (each activity task, each
activation's payload pass). ``PydanticPayloadConverter`` makes a new
``PydanticJSONPlainPayloadConverter`` each time, whose ``TypeAdapter`` cache starts empty: every
compaction paid ~7 converter constructions and ~4 ``TypeAdapter`` builds for the same few types
(``CompactSessionInput``, ``SnapshotRef``, ...; issue 17, docs/bench-perf.md round thirteen).

``SharedPydanticPayloadConverter`` is the same composite over the same converters in the same
order, sharing one ``PydanticJSONPlainPayloadConverter``: the same bytes out and the same values
in (its ``to_payload`` has no per-instance state but the adapter cache, an ``lru_cache`` of
``TypeAdapter`` by type hint, both safe to share between threads). No converter here takes a
serialization context, so ``with_context`` returns the instance itself, as before.
"""

from __future__ import annotations

import dataclasses

from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import CompositePayloadConverter, DataConverter

# The converters a PydanticPayloadConverter() holds, in its order: the SDK's module-level
# default converters (shared by every instance already) and one pydantic JSON converter.
_CONVERTERS = tuple(PydanticPayloadConverter().converters.values())


class SharedPydanticPayloadConverter(PydanticPayloadConverter):
    """``PydanticPayloadConverter`` whose instances share their converters (see the module)."""

    def __init__(self) -> None:  # nullary: the SDK constructs it with no arguments
        CompositePayloadConverter.__init__(self, *_CONVERTERS)


#: ``temporalio.contrib.pydantic.pydantic_data_converter`` with the shared payload converter.
shared_pydantic_data_converter: DataConverter = dataclasses.replace(
    pydantic_data_converter, payload_converter_class=SharedPydanticPayloadConverter
)
