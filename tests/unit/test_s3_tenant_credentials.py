"""The S3 store under credentials confined to a tenant prefix (infra/iam/tenant-policy.json):
S3 answers a missing key with 403 there, and the store must still tell missing from denied."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from compactor.errors import NotFound, StoreUnavailable
from compactor.store import S3Store

KEY = "t/acme/s/s1/head.json"


@pytest.fixture
def stubbed():
    client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    store = S3Store("bkt", "pfx", client=client)
    with Stubber(client) as stub:
        yield store, stub


def _denied(stub: Stubber, method: str) -> None:
    stub.add_client_error(method, service_error_code="403", http_status_code=403)


def test_missing_key_behind_a_403_reads_as_missing(stubbed):
    store, stub = stubbed
    _denied(stub, "head_object")
    stub.add_response("list_objects_v2", {"KeyCount": 0}, {"Bucket": "bkt", "Prefix": "pfx/" + KEY, "MaxKeys": 1})
    assert store.head(KEY) is None
    _denied(stub, "get_object")
    stub.add_response("list_objects_v2", {"KeyCount": 0}, {"Bucket": "bkt", "Prefix": "pfx/" + KEY, "MaxKeys": 1})
    with pytest.raises(NotFound):
        store.get(KEY)
    stub.assert_no_pending_responses()


def test_a_real_denial_stays_a_denial(stubbed):
    store, stub = stubbed
    _denied(stub, "get_object")
    stub.add_response("list_objects_v2", {"KeyCount": 1, "Contents": [{"Key": "pfx/" + KEY}]},
                      {"Bucket": "bkt", "Prefix": "pfx/" + KEY, "MaxKeys": 1})
    with pytest.raises(StoreUnavailable):
        store.get(KEY)
    _denied(stub, "head_object")
    _denied(stub, "list_objects_v2")  # listing not allowed either: cannot tell, so denied
    with pytest.raises(StoreUnavailable):
        store.head("t/other/s/s1/head.json")
