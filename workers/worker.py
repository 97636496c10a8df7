"""Build Temporal clients and workers for the compactor.

* Every client uses the pydantic data converter, with the AES-GCM payload codec when codec
  keys are configured (workers/codec.py); when the store is S3 (or a payload bucket is
  configured) Temporal's external storage (``temporalio.contrib.aws.s3driver``) backs any
  payload that still grows past the threshold, through a boto3 client.
* Store activities run on ``task_queue``; LLM summarizers on ``llm_task_queue`` with a
  task-queue-wide rate limit (``max_task_queue_activities_per_second``), so a fleet of workers
  together never exceeds the provider's limit.
* OpenTelemetry through Temporal's plugin, exported by OTLP/HTTP when an endpoint is set;
  metrics, health endpoints and exporter timeouts live in ``workers/telemetry.py``.
* SIGTERM: workers stop polling and let in-flight activities finish for
  ``graceful_shutdown_s`` before cancelling them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, ExternalStorage
from temporalio.service import TLSConfig
from temporalio.worker import Worker

from workers.codec import codec_from_settings, with_codec
from workers.redaction import RedactingInterceptor
from workers.settings import Settings, s3_bucket_of

log = logging.getLogger(__name__)


# --- external payload storage ----------------------------------------------------------------------


class Boto3StorageDriverClient(S3StorageDriverClient):
    """The S3 driver's client interface over a (blocking) boto3 S3 client, via threads."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def describe(self) -> Mapping[str, str]:
        region = getattr(self._client.meta, "region_name", None)
        endpoint = getattr(self._client.meta, "endpoint_url", None)
        return {k: v for k, v in {"client_region": region, "endpoint": endpoint}.items() if v}

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await asyncio.to_thread(self._client.put_object, Bucket=bucket, Key=key, Body=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            await asyncio.to_thread(self._client.head_object, Bucket=bucket, Key=key)
            return True
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        def _get() -> bytes:
            return self._client.get_object(Bucket=bucket, Key=key)["Body"].read()

        return await asyncio.to_thread(_get)


def build_data_converter(settings: Settings, s3_client: Any | None = None) -> DataConverter:
    """pydantic data converter, with the payload codec when keys are configured
    (workers/codec.py) and S3 external storage when there is a bucket for it."""
    base = with_codec(pydantic_data_converter, codec_from_settings(settings))
    bucket = settings.payload_bucket or s3_bucket_of(settings.store)
    if not bucket:
        return base
    if s3_client is None:
        import boto3

        s3_client = boto3.client("s3")
    driver = S3StorageDriver(client=Boto3StorageDriverClient(s3_client), bucket=bucket)
    return dataclasses.replace(
        base,
        external_storage=ExternalStorage(
            drivers=[driver], payload_size_threshold=settings.payload_threshold
        ),
    )


# --- telemetry ---------------------------------------------------------------------------------------


def telemetry_plugins(settings: Settings) -> list[Any]:
    """OpenTelemetry plugin (+ OTLP exporter) when an endpoint is configured, else nothing."""
    from workers.telemetry import configure_tracing

    if not configure_tracing(settings):
        return []
    from temporalio.contrib.opentelemetry import OpenTelemetryPlugin

    # Temporal's own spans (StartWorkflow, RunWorkflow, RunActivity...) so a trace shows every step.
    return [OpenTelemetryPlugin(add_temporal_spans=True)]


# --- client --------------------------------------------------------------------------------------------


def _tls(settings: Settings) -> TLSConfig | bool:
    ca = Path(settings.temporal_tls_ca).read_bytes() if settings.temporal_tls_ca else None
    if settings.temporal_tls_cert and settings.temporal_tls_key:
        return TLSConfig(
            client_cert=Path(settings.temporal_tls_cert).read_bytes(),
            client_private_key=Path(settings.temporal_tls_key).read_bytes(),
            server_root_ca_cert=ca,
        )
    if ca is not None:
        return TLSConfig(server_root_ca_cert=ca)
    return settings.tls_enabled


async def connect(
    settings: Settings,
    address: str | None = None,
    *,
    s3_client: Any | None = None,
    connect_timeout: float = 30.0,
    runtime: Any | None = None,
) -> Client:
    """A Temporal client for the compactor (pydantic converter, TLS, telemetry).

    ``runtime``: a worker's ``WorkerTelemetry.runtime``, which carries the SDK's own metrics.
    """
    target = address or settings.temporal_address
    if not target:
        raise ValueError("no Temporal address: set TEMPORAL_ADDRESS or run `compactor dev`")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + connect_timeout
    fresh = runtime is None and _no_default_runtime()
    if fresh:
        runtime = _new_runtime()
    failure: Exception | None = None
    try:
        while True:
            try:
                client = await Client.connect(
                    target,
                    namespace=settings.temporal_namespace,
                    data_converter=build_data_converter(settings, s3_client),
                    tls=_tls(settings),
                    api_key=settings.temporal_api_key.get_secret_value() if settings.temporal_api_key else None,
                    plugins=telemetry_plugins(settings),
                    **({"runtime": runtime} if runtime is not None else {}),
                )
                break
            except RuntimeError as exc:
                # A server that is still starting (dev server, rolling restart) answers
                # "Unavailable / not healthy yet": wait for it rather than fail the command.
                if "Unavailable" not in str(exc) or loop.time() > deadline:
                    failure = unreachable(target, exc)  # raised below, holding no SDK frame
                    break
                await asyncio.sleep(0.2)
        if failure is not None:
            raise failure
    except BaseException:
        if fresh:
            # Drop the runtime this attempt created, now: its Rust threads, left to the
            # interpreter's finalization, can abort the process at exit (temporalio/sdk-python#300).
            runtime = None
            import gc

            gc.collect()
        raise
    if fresh:
        from temporalio.runtime import Runtime

        Runtime.set_default(runtime, error_if_already_set=False)  # later clients share it
    return client


def _no_default_runtime() -> bool:
    from temporalio.runtime import _runtime_ref

    return getattr(_runtime_ref, "_default_runtime", True) is None and not getattr(_runtime_ref, "_prevent_default", False)


def _new_runtime() -> Any:
    """What ``Runtime.default()`` would create, without the Rust core's console logger.

    That logger prints the core's warnings (a failed workflow task under load, for one) on
    stdout, with colour escapes, into a command's ``--json`` output. Forwarding them to Python
    logging instead (what ``compactor worker``'s runtime does, ``workers.telemetry``) has the
    core's threads call into Python, which can abort a short command at interpreter exit
    (temporalio/sdk-python#300). The SDK's Python side logs a failed workflow or activity task
    itself (``temporalio.worker``, stderr), so a command's runtime keeps no core logger.
    """
    from temporalio.runtime import Runtime, TelemetryConfig

    return Runtime(telemetry=TelemetryConfig(logging=None))


_CONNECT_CAUSES = (
    ("connection refused", "connection refused (is the Temporal frontend running there?)"),
    ("dns error", "unknown host"),
    ("failed to lookup address", "unknown host"),
    ("name or service not known", "unknown host"),
    ("invalid peer certificate", "TLS: the server's certificate was not accepted"),
    ("tls", "TLS handshake failed (check TEMPORAL_TLS* settings)"),
    ("timed out", "timed out"),
    ("deadline", "timed out"),
    ("unauthenticated", "not authenticated (check TEMPORAL_API_KEY or the client certificate)"),
    ("permission", "permission denied"),
    ("unavailable", "server unavailable"),
    ("invalid uri", "not a host:port address"),
)


def unreachable(target: str, exc: BaseException) -> Exception:
    """One line naming the address and the cause, instead of the SDK's raw transport error."""
    from compactor.errors import TemporalUnavailable

    text = str(exc).lower()
    cause = next((say for needle, say in _CONNECT_CAUSES if needle in text), "could not connect")
    return TemporalUnavailable(f"cannot reach Temporal at {target}: {cause}", address=target)


# --- workers -------------------------------------------------------------------------------------------


def store_activities(store: Any, executor: concurrent.futures.ThreadPoolExecutor | None = None) -> list[Any]:
    from activities.breaker import BreakerActivities
    from activities.store_activities import StoreActivities

    acts = StoreActivities(store, executor=executor)
    return acts.activities() + BreakerActivities(store).activities()


def llm_activities(settings: Settings, store: Any) -> list[Any]:
    """The LLM summarizer activities (activities/llm.py), or none when it is not available."""
    try:
        from activities import llm
    except ModuleNotFoundError as exc:
        if exc.name in ("activities.llm", "anthropic"):
            return []
        raise
    factory = getattr(llm, "build_activities", None)
    if factory is not None:
        return list(factory(settings=settings, store=store))
    cls = getattr(llm, "SummarizerActivities", None)
    if cls is None:
        return []
    key = settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None
    inst = cls.from_settings(settings, store) if hasattr(cls, "from_settings") else cls(store=store, api_key=key)
    return [getattr(inst, n) for n in ("summarize_anthropic", "summarize_native") if hasattr(inst, n)]


def build_workers(
    client: Client,
    settings: Settings,
    store: Any,
    *,
    task_queue: str | None = None,
    llm_task_queue: str | None = None,
    extra_activities: Sequence[Any] = (),
    with_llm: bool = True,
    workflows: Sequence[type] | None = None,
) -> list[Worker]:
    """The main worker (workflow + store activities) and, if available, the LLM worker."""
    from workflows.compact_session import CompactSessionWorkflow

    default_workflows: list[type] = [CompactSessionWorkflow]
    try:
        from workflows.sweep import SweepSessionsWorkflow

        default_workflows.append(SweepSessionsWorkflow)
    except ModuleNotFoundError:
        pass

    tq = task_queue or settings.task_queue
    llm_tq = llm_task_queue or settings.llm_task_queue
    skip_noop_payload_visits()
    load_tokenizer()
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=settings.io_threads)
    acts = store_activities(store, executor)
    # Replacements passed in (tests) win over the default implementation of the same name.
    names = {_activity_name(a) for a in extra_activities}
    acts = [a for a in acts if _activity_name(a) not in names] + list(extra_activities)
    acts = _finish_structured_of(acts, names)
    acts = _externalize_finish_of(acts, names)
    _freeze_finishes_of(acts, names)
    _freeze_commits_of(acts, names)
    acts = _commit_record_of(acts, names)
    # stateless: one list serves both workers (tenant guard, span attributes, redaction)
    interceptors = [*_tenant_guard(settings, tq), *_span_interceptors(), RedactingInterceptor()]
    main = Worker(
        client,
        task_queue=tq,
        workflows=list(workflows or default_workflows),
        activities=acts,
        max_concurrent_activities=settings.max_concurrent_activities,
        max_concurrent_local_activities=settings.max_concurrent_activities,
        interceptors=interceptors,
        **_runner_options(settings),
        **_operations_options(settings),
    )
    workers = [main]
    if with_llm:
        llm_acts = llm_activities(settings, store)
        if llm_acts:
            workers.append(
                Worker(
                    client,
                    task_queue=llm_tq,
                    activities=llm_acts,
                    max_concurrent_activities=settings.llm_concurrency,
                    max_task_queue_activities_per_second=settings.llm_rate_limit,
                    interceptors=interceptors,
                    **_operations_options(settings, model_calls=True),
                )
            )
    return workers


def load_tokenizer() -> None:
    """Load the tokenizer before the worker polls, in this one thread.

    Its first use loads it (~0.1-0.3 s of CPU, ``compactor.tokens.encoding``); a worker's first
    compactions run side by side in the executor's threads, and each thread that counted before
    the load had finished loaded it again (five loads per process were seen under ``bench
    perf``'s throughput run: ~0.5 s of CPU, and the first compactions each that much slower).
    """
    from compactor.tokens import count_text

    count_text("compactor")


def skip_noop_payload_visits() -> bool:
    """Skip the SDK's payload passes over an activation where they cannot change anything.

    For every workflow activation and completion the SDK walks the whole protobuf six times
    (codec, external storage, storage references; each pass asks the workflow for the
    command's serialization context and rebuilds every payload list). With neither a payload
    codec nor external storage on the converter each pass returns the payloads unchanged -
    and that was 17.6 ms of a compaction's 121 ms of worker CPU (12 activations; thread-CPU
    timers in the throughput run of ``compactor bench perf``, docs/bench-perf.md). With a
    codec or external storage (``COMPACTOR_CODEC_KEYS``, an S3 store) the SDK's passes run
    as before. Applied once per process, to the SDK's module functions; returns whether the
    skip is in place (False when this SDK version has no such functions: nothing changed).
    """
    import temporalio.bridge.worker as bridge

    if getattr(bridge, "_compactor_skip_noop_visits", False):
        return True
    decode = getattr(bridge, "decode_activation", None)
    encode = getattr(bridge, "encode_completion", None)
    try:
        from temporalio.converter._extstore import StorageOperationMetrics
    except ImportError:
        return False
    if decode is None or encode is None:
        return False

    def noop(dc: Any) -> bool:
        return getattr(dc, "payload_codec", True) is None and getattr(dc, "external_storage", True) is None

    async def decode_activation(activation: Any, data_converter: Any, *args: Any, **kwargs: Any) -> Any:
        if noop(data_converter):
            return StorageOperationMetrics()
        return await decode(activation, data_converter, *args, **kwargs)

    async def encode_completion(completion: Any, data_converter: Any, *args: Any, **kwargs: Any) -> Any:
        if noop(data_converter):
            return StorageOperationMetrics()
        return await encode(completion, data_converter, *args, **kwargs)

    bridge.decode_activation = decode_activation
    bridge.encode_completion = encode_completion
    bridge._compactor_skip_noop_visits = True  # type: ignore[attr-defined]
    return True


def _composed_of(acts: list[Any], replaced: set[str], both: str, parts: list[str], compose: Any,
                 also: Sequence[str] = ()) -> list[Any]:
    """``acts`` with the one-step activity ``both`` made of the registered ``parts`` (``compose``
    of them, in order) when one of ``parts`` (or of ``also``: steps a part runs) is replaced and
    ``both`` is not, so the replacement is called on the one-step path too; else ``acts``."""
    if both in replaced or not replaced.intersection([*parts, *also]):
        return acts
    by_name = {_activity_name(a): a for a in acts}
    if not all(p in by_name for p in parts):
        return acts
    composed = compose(*(by_name[p] for p in parts))
    return [a for a in acts if _activity_name(a) != both] + [composed]


def _finish_structured_of(acts: list[Any], replaced: set[str]) -> list[Any]:
    """When a step that ``finish_structured`` runs in one call (lift_state,
    summarize_structured, validate_candidate) is replaced, the one-step activity is made of
    the registered steps instead, so the replacement is called on that path too."""
    from activities.contracts import ActivityName as A
    from activities.composed import compose_finish_structured

    return _composed_of(acts, replaced, str(A.FINISH_STRUCTURED),
                        [str(A.LIFT_STATE), str(A.SUMMARIZE_STRUCTURED), str(A.VALIDATE_CANDIDATE)],
                        compose_finish_structured)


def _externalize_finish_of(acts: list[Any], replaced: set[str]) -> list[Any]:
    """``externalize_finish`` made of the registered externalize and finish_structured when
    either (or a step finish_structured runs) is replaced, as ``_finish_structured_of``."""
    from activities.contracts import ActivityName as A
    from activities.composed import compose_externalize_finish

    return _composed_of(acts, replaced, str(A.EXTERNALIZE_FINISH), [str(A.EXTERNALIZE), str(A.FINISH_STRUCTURED)],
                        compose_externalize_finish,
                        also=[str(A.LIFT_STATE), str(A.SUMMARIZE_STRUCTURED), str(A.VALIDATE_CANDIDATE)])


def _freeze_finishes_of(acts: list[Any], replaced: set[str]) -> None:
    """When ``externalize_finish`` or a step it runs is replaced, the registered freeze_snapshot
    does not run it itself (``FreezeInput.finish_now``): the workflow then runs the step, which
    calls the replacement (``_externalize_finish_of``)."""
    from activities.contracts import ActivityName as A
    from activities.store_activities import StoreActivities

    parts = {str(A.EXTERNALIZE_FINISH), str(A.EXTERNALIZE), str(A.FINISH_STRUCTURED), str(A.LIFT_STATE),
             str(A.SUMMARIZE_STRUCTURED), str(A.VALIDATE_CANDIDATE)}
    if not replaced & parts:
        return
    for a in acts:
        owner = getattr(a, "__self__", None)
        if isinstance(owner, StoreActivities) and _activity_name(a) == str(A.FREEZE_SNAPSHOT):
            owner.finishes_in_freeze = False


def _freeze_commits_of(acts: list[Any], replaced: set[str]) -> None:
    """When commit_swap, write_record or commit_record is replaced and freeze_snapshot is not, the
    registered freeze_snapshot does not commit itself (``FreezeInput.commit_as``): the workflow
    then runs commit_record, which calls the replacement (``_commit_record_of``). A replaced
    freeze_snapshot (the chaos worker's, hooked in the commit itself) commits as its class does."""
    from activities.contracts import ActivityName as A
    from activities.store_activities import StoreActivities

    if str(A.FREEZE_SNAPSHOT) in replaced or not replaced & {str(A.COMMIT_SWAP), str(A.WRITE_RECORD),
                                                              str(A.COMMIT_RECORD)}:
        return
    for a in acts:
        owner = getattr(a, "__self__", None)
        if isinstance(owner, StoreActivities) and _activity_name(a) == str(A.FREEZE_SNAPSHOT):
            owner.commits_in_freeze = False


def _commit_record_of(acts: list[Any], replaced: set[str]) -> list[Any]:
    """``commit_record`` made of the registered commit_swap and write_record when either is
    replaced, as ``_finish_structured_of``."""
    from activities.contracts import ActivityName as A
    from activities.composed import compose_commit_record

    return _composed_of(acts, replaced, str(A.COMMIT_RECORD), [str(A.COMMIT_SWAP), str(A.WRITE_RECORD)],
                        compose_commit_record)


def _tenant_guard(settings: Settings, task_queue: str) -> list[Any]:
    """The TenantGuard interceptor of a worker bound to tenants (COMPACTOR_TENANTS), else none."""
    if not settings.tenants:
        return []
    from workers.tenant_guard import TenantGuard

    if task_queue == Settings.model_fields["task_queue"].default:
        log.warning(
            "worker bound to tenants %s polls the shared task queue %r: it will fail other "
            "tenants' compactions; give it its own COMPACTOR_TASK_QUEUE",
            ", ".join(settings.tenants), task_queue,
        )
    return [TenantGuard(settings.tenants)]


def _runner_options(settings: Settings) -> dict[str, Any]:
    """Workflow runner of the main worker: Temporal's sandbox only when asked for.

    The workflow code is deterministic by construction (only references, ``workflow.now()``,
    patches) and every replay - ``compactor replay`` and tests/histories - runs it under the
    sandbox, which is where a restricted call would be caught. On a live worker the sandbox
    costs ~60 ms of CPU per compaction (measured, docs/bench-perf.md): each run re-creates the
    workflow module and every payload's serialization context goes through an exec() into it.
    """
    if settings.workflow_sandbox:
        return {}
    from temporalio.worker import UnsandboxedWorkflowRunner

    return {"workflow_runner": UnsandboxedWorkflowRunner()}


def _operations_options(settings: Settings, *, model_calls: bool = False) -> dict[str, Any]:
    """Graceful shutdown: SIGTERM lets in-flight activities finish, within a bound.

    The LLM worker's bound is at least one model call (client timeout + connect + a margin): a
    shorter one would cancel long summaries on every rolling deploy, to be re-run elsewhere.
    """
    from datetime import timedelta

    grace = settings.graceful_shutdown_s
    if model_calls:
        grace = max(grace, model_call_grace_s(settings))
    return {"graceful_shutdown_timeout": timedelta(seconds=grace)}


MODEL_CALL_MARGIN_S = 15.0


def model_call_grace_s(settings: Settings) -> float:
    """Longest one model call may take (the anthropic client's timeouts) plus a margin."""
    try:
        from activities.llm import AnthropicSettings
    except ModuleNotFoundError:  # no anthropic SDK: no model calls to wait for
        return 0.0
    a = AnthropicSettings.from_settings(settings)
    return a.timeout_s + a.connect_timeout_s + MODEL_CALL_MARGIN_S


def _span_interceptors() -> list[Any]:
    """Span attributes (tenant, session, version, tokens, status, error type) on activity spans."""
    from workers.telemetry import SpanAttributesInterceptor

    return [SpanAttributesInterceptor()]


def _activity_name(fn: Any) -> str:
    from temporalio.activity import _Definition

    defn = _Definition.from_callable(fn)
    return defn.name if defn and defn.name else getattr(fn, "__name__", "")


PROBE_KEY = ".compactor-probe/conditional-write"


def check_conditional_writes(store: Any, settings: Settings) -> None:
    """Refuse (one line, exit 2) an S3 endpoint that ignores ``If-None-Match``/``If-Match``.

    The session log's only concurrency control is the server evaluating those conditions; an
    endpoint that stores the object anyway (older MinIO, some gateways) would let two writers
    both "win" and lose appends. Probed on one scratch key inside the worker's tenant prefix,
    written create-only twice (one of the two must be refused: the key may exist from an earlier
    start) and replaced with an etag that cannot match (must be refused). A local store
    implements the conditions itself and is not probed.
    """
    from compactor.errors import InvalidInput, PreconditionFailed

    if not getattr(store, "url", "").startswith("s3://"):
        return
    key = (f"t/{settings.tenants[0]}/" if settings.tenants else "t/") + PROBE_KEY
    refused = 0
    for _ in range(2):
        try:
            store.put(key, b"probe\n", if_none_match=True)
        except PreconditionFailed:
            refused += 1
    try:
        store.put(key, b"probe\n", if_match='"00000000000000000000000000000000"')
        mismatch_refused = False
    except PreconditionFailed:
        mismatch_refused = True
    if not refused or not mismatch_refused:
        which = "If-None-Match" if not refused else "If-Match"
        raise InvalidInput(
            f"store {store.url} does not honour conditional writes ({which} was ignored on "
            f"{key}); compactor needs S3 conditional PUTs (AWS S3, MinIO >= 2024-11, or an "
            "endpoint that evaluates If-None-Match/If-Match)"
        )


def _store_s3_client(store: Any) -> Any | None:
    """The boto3 client of an S3 store (reused for external payload storage)."""
    return getattr(store, "client", None) or getattr(store, "_client", None)
