"""Object store on S3 (AWS, MinIO, moto, any endpoint via ``AWS_ENDPOINT_URL``).

Compare-and-swap uses S3's own conditional writes: ``PutObject`` with ``If-None-Match: *``
(create only) and ``If-Match: <etag>`` (replace only that version). Both are evaluated by the
server, so any number of processes on any number of hosts can write safely.

Checked against moto 5.2.5 over HTTP (the test endpoint): both conditions are honoured
(412 ``PreconditionFailed``); ``If-Match`` on a missing key answers 404 ``NoSuchKey``. moto
evaluates the condition and stores without a lock, yet 400 barrier-synchronised races of 8
writers produced no double winner, and the contract suite's 8-writer CAS counter loses no
increment; AWS S3 and MinIO evaluate conditions atomically.

Error mapping (tests assert the type): 412 ``PreconditionFailed`` and 409
``ConditionalRequestConflict`` -> PreconditionFailed; ``NoSuchKey`` -> NotFound (and, on a
conditional put, PreconditionFailed: the version we expected is gone); ``NoSuchBucket`` ->
BucketNotFound; an unreachable endpoint, missing credentials or a 403 -> StoreUnavailable.

One boto3 client per store, created up front (clients are thread-safe; sessions are not), with
standard-mode retries for throttling and 5xx and bounded timeouts. A retried conditional PUT
whose first attempt did land answers 412; the session log checks for that case (it re-reads
and recognises its own write), so retries here are safe.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from compactor.errors import (
    BucketNotFound,
    NotFound,
    PreconditionFailed,
    StoreUnavailable,
)
from compactor.store.base import ObjectInfo, check_key

_PRECONDITION_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "412"}


_SESSION_LOCK = threading.Lock()
_SESSION: Any = None


def _client(service: str, **kwargs: Any) -> Any:
    """A new client from one shared boto3 session (loading the service model once per process).

    Clients are thread-safe, creating them is not: the lock serialises creation only.
    """
    import boto3

    global _SESSION
    with _SESSION_LOCK:
        if _SESSION is None:
            _SESSION = boto3.session.Session()
        return _SESSION.client(service, **kwargs)


class S3Store:
    """A bucket (and optional key prefix) as an object store.

    Args:
        bucket: bucket name; it must exist (we never create buckets implicitly).
        prefix: key prefix inside the bucket, e.g. ``compactor/prod``.
        endpoint_url: S3 endpoint; defaults to ``AWS_ENDPOINT_URL`` (unset = AWS).
        region: defaults to ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` / us-east-1.
        max_attempts: botocore attempts per request (standard retry mode).
        connect_timeout, read_timeout: seconds.
        max_pool_connections: HTTP pool size (size it to the threads sharing the store).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        max_attempts: int = 4,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        max_pool_connections: int = 32,
        client: Any = None,
    ) -> None:
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        self.url = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self._bucket_checked = False
        if client is None:
            region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            client = _client(
                "s3",
                endpoint_url=self.endpoint_url,
                region_name=region or "us-east-1",
                config=Config(
                    retries={"max_attempts": max_attempts, "mode": "standard"},
                    connect_timeout=connect_timeout,
                    read_timeout=read_timeout,
                    max_pool_connections=max_pool_connections,
                ),
            )
        self.client = client

    def __repr__(self) -> str:
        return f"S3Store({self.url!r}, endpoint={self.endpoint_url!r})"

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    # --- error mapping ----------------------------------------------------------------------
    def _map(self, exc: Exception, key: str, *, conditional: bool = False) -> Exception:
        from botocore.exceptions import (
            ClientError,
            ConnectionError,
            EndpointConnectionError,
            NoCredentialsError,
        )

        if isinstance(exc, NoCredentialsError):
            return StoreUnavailable(
                f"no AWS credentials for {self.url}; set AWS_ACCESS_KEY_ID and "
                f"AWS_SECRET_ACCESS_KEY (or a profile / instance role)",
                key=key,
            )
        if isinstance(exc, (EndpointConnectionError, ConnectionError)):
            return StoreUnavailable(
                f"cannot reach the S3 endpoint {self.endpoint_url or '(AWS default)'} for "
                f"{self.url}: {exc}; check AWS_ENDPOINT_URL and the network",
                key=key,
            )
        if not isinstance(exc, ClientError):
            return exc
        err = exc.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code == "NoSuchBucket":
            return self._no_bucket()
        if status == 403 or code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            return StoreUnavailable(
                f"access to {key!r} in {self.url} denied ({code or status}); check the "
                f"credentials and the bucket policy",
                key=key,
            )
        if code in _PRECONDITION_CODES or status in (409, 412):
            return PreconditionFailed(
                f"conditional write to {key!r} in {self.url} lost ({code or status})", key=key
            )
        if code in ("NoSuchKey", "404") or status == 404:
            if conditional:
                return PreconditionFailed(
                    f"conditional write to {key!r} in {self.url}: the object is gone", key=key
                )
            return NotFound(f"no object {key!r} in {self.url}", key=key)
        return exc

    def _no_bucket(self) -> BucketNotFound:
        where = self.endpoint_url or "AWS"
        return BucketNotFound(
            f"bucket {self.bucket!r} does not exist at {where}; create it first "
            f"(e.g. `aws s3 mb s3://{self.bucket}"
            + (f" --endpoint-url {self.endpoint_url}`)" if self.endpoint_url else "`)")
            + " or point --store / COMPACTOR_STORE at an existing bucket",
            bucket=self.bucket,
        )

    def _check_bucket(self) -> None:
        """Tell a missing bucket from a missing key after a bare 404 (HEAD has no body)."""
        if self._bucket_checked:
            return
        from botocore.exceptions import ClientError

        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 404:
                raise self._no_bucket() from None
            if status != 403:  # 403: it exists, these credentials may not list all of it
                raise self._map(exc, "") from None
        self._bucket_checked = True

    def _denied_but_absent(self, exc: Exception, full: str) -> bool:
        """A 403 on a key that does not exist.

        Credentials confined to a tenant's prefix (infra/iam/tenant-policy.json) may list only
        under it, and S3 then answers a read of a missing key with 403, not 404. Listing that
        one key (allowed under the prefix) tells a missing key from a real denial.
        """
        from botocore.exceptions import ClientError

        if not isinstance(exc, ClientError):
            return False
        if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") != 403:
            return False
        try:
            r = self.client.list_objects_v2(Bucket=self.bucket, Prefix=full, MaxKeys=1)
        except Exception:  # noqa: BLE001 - cannot tell: the original denial stands
            return False
        return not any(o.get("Key") == full for o in r.get("Contents", ()))

    # --- protocol ---------------------------------------------------------------------------
    def get(self, key: str) -> tuple[bytes, str]:
        full = self._key(key)
        try:
            r = self.client.get_object(Bucket=self.bucket, Key=full)
            data = r["Body"].read()
        except Exception as exc:
            if self._denied_but_absent(exc, full):
                raise NotFound(f"no object {key!r} in {self.url}", key=key) from None
            raise self._map(exc, key) from None
        return data, r["ETag"]

    def head(self, key: str) -> str | None:
        full = self._key(key)
        try:
            r = self.client.head_object(Bucket=self.bucket, Key=full)
        except Exception as exc:
            if self._denied_but_absent(exc, full):
                return None
            mapped = self._map(exc, key)
            if isinstance(mapped, NotFound) and not isinstance(mapped, BucketNotFound):
                self._check_bucket()
                return None
            raise mapped from None
        return r["ETag"]

    def put(
        self,
        key: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> str:
        full = self._key(key)
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": full, "Body": bytes(data)}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = if_match
        try:
            r = self.client.put_object(**kwargs)
        except Exception as exc:
            raise self._map(exc, key, conditional=bool(if_none_match or if_match)) from None
        return r["ETag"]

    def list_children(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> list[str]:
        """Names one level below ``prefix`` (ends with "/"), in key order, after
        ``start_after``: ``Delimiter="/"`` lists common prefixes, not every object under them."""
        full = (f"{self.prefix}/" if self.prefix else "") + prefix
        kw: dict = {"Bucket": self.bucket, "Prefix": full, "Delimiter": "/"}
        if start_after is not None:
            # past every key under start_after/ (ids are ASCII; U+10FFFF sorts after them)
            kw["StartAfter"] = full + start_after + "/\U0010ffff"
        out: list[str] = []
        try:
            while len(out) < limit:
                kw["MaxKeys"] = min(1000, limit - len(out))
                page = self.client.list_objects_v2(**kw)
                out.extend(p["Prefix"][len(full):].rstrip("/") for p in page.get("CommonPrefixes", ()))
                if not page.get("IsTruncated"):
                    break
                kw["ContinuationToken"] = page["NextContinuationToken"]
        except Exception as exc:
            raise self._map(exc, prefix) from None
        return out[:limit]

    def list(self, prefix: str) -> list[str]:
        full = (f"{self.prefix}/" if self.prefix else "") + prefix
        cut = len(self.prefix) + 1 if self.prefix else 0
        out: list[str] = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full
            ):
                out.extend(o["Key"][cut:] for o in page.get("Contents", ()))
        except Exception as exc:
            raise self._map(exc, prefix) from None
        return sorted(out)


    # --- lifecycle (gc, delete) -------------------------------------------------------------
    def list_info(self, prefix: str) -> list[ObjectInfo]:
        """Like ``list``, with each object's size and ``LastModified`` (same requests)."""
        full = (f"{self.prefix}/" if self.prefix else "") + prefix
        cut = len(self.prefix) + 1 if self.prefix else 0
        out: list[ObjectInfo] = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=full
            ):
                out.extend(
                    ObjectInfo(o["Key"][cut:], int(o.get("Size", 0)), o["LastModified"].timestamp())
                    for o in page.get("Contents", ())
                )
        except Exception as exc:
            raise self._map(exc, prefix) from None
        return sorted(out)

    def delete(self, key: str) -> None:
        """Remove ``key`` (S3 answers 204 whether or not it existed). On a versioned bucket
        this leaves a delete marker; lifecycle rules expire noncurrent versions."""
        full = self._key(key)
        try:
            self.client.delete_object(Bucket=self.bucket, Key=full)
        except Exception as exc:
            mapped = self._map(exc, key)
            if isinstance(mapped, NotFound) and not isinstance(mapped, BucketNotFound):
                return
            raise mapped from None

    def delete_many(self, keys: list[str], *, batch: int = 1000) -> None:
        """Remove ``keys`` with DeleteObjects, ``batch`` (S3's maximum: 1,000) per request;
        absent keys are fine."""
        for i in range(0, len(keys), batch):
            chunk = [{"Key": self._key(k)} for k in keys[i : i + batch]]
            try:
                r = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": chunk, "Quiet": True})
            except Exception as exc:
                raise self._map(exc, keys[i]) from None
            errs = [e for e in r.get("Errors", ()) if e.get("Code") != "NoSuchKey"]
            if errs:
                raise StoreUnavailable(
                    f"deleting {errs[0].get('Key')!r} in {self.url} failed ({errs[0].get('Code')}): "
                    f"{len(errs)} of {len(chunk)} keys not deleted; check the credentials "
                    "(s3:DeleteObject) and run the command again",
                    key=keys[i],
                )
