"""The worker skips the SDK's payload passes only where they cannot change a payload: with a
payload codec (encrypted history) every payload of a workflow completion is still encoded."""

from __future__ import annotations

import dataclasses

from temporalio.api.common.v1 import Payload
from temporalio.bridge.proto.workflow_commands import ScheduleLocalActivity, WorkflowCommand
from temporalio.bridge.proto.workflow_completion import Success, WorkflowActivationCompletion
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import PayloadCodec

from workers.worker import skip_noop_payload_visits


class _Upper(PayloadCodec):
    async def encode(self, payloads):
        return [Payload(metadata={"encoding": b"test/upper"}, data=p.data.upper()) for p in payloads]

    async def decode(self, payloads):
        return [Payload(metadata={"encoding": b"json/plain"}, data=p.data.lower()) for p in payloads]


def _completion(text: bytes) -> WorkflowActivationCompletion:
    arg = Payload(metadata={"encoding": b"json/plain"}, data=text)
    cmd = WorkflowCommand(schedule_local_activity=ScheduleLocalActivity(activity_type="freeze_snapshot",
                                                                       arguments=[arg]))
    return WorkflowActivationCompletion(run_id="r1", successful=Success(commands=[cmd]))


async def test_a_codec_still_encodes_every_payload_and_no_codec_leaves_them_as_they_are():
    import temporalio.bridge.worker as bridge

    assert skip_noop_payload_visits()  # the pinned SDK has the functions it replaces
    assert skip_noop_payload_visits()  # idempotent

    plain = _completion(b'{"session": "s1"}')
    await bridge.encode_completion(plain, pydantic_data_converter, encode_headers=False,
                                   storage_concurrency_limit=1)
    [arg] = plain.successful.commands[0].schedule_local_activity.arguments
    assert arg.data == b'{"session": "s1"}' and arg.metadata["encoding"] == b"json/plain"

    coded = _completion(b'{"session": "s1"}')
    conv = dataclasses.replace(pydantic_data_converter, payload_codec=_Upper())
    await bridge.encode_completion(coded, conv, encode_headers=False, storage_concurrency_limit=1)
    [arg] = coded.successful.commands[0].schedule_local_activity.arguments
    assert arg.data == b'{"SESSION": "S1"}' and arg.metadata["encoding"] == b"test/upper"
