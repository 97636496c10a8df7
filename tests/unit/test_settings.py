"""Worker settings from the environment and what they wire."""

from __future__ import annotations

from workers.settings import Settings, s3_bucket_of
from workers.worker import build_data_converter


def test_env_prefix_and_standard_temporal_variables(monkeypatch):
    monkeypatch.setenv("COMPACTOR_TASK_QUEUE", "q1")
    monkeypatch.setenv("COMPACTOR_LLM_RATE_LIMIT", "0.5")
    monkeypatch.setenv("TEMPORAL_ADDRESS", "temporal.example:7233")
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "prod")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    s = Settings()
    assert (s.task_queue, s.llm_rate_limit) == ("q1", 0.5)
    assert (s.temporal_address, s.temporal_namespace) == ("temporal.example:7233", "prod")
    assert s.anthropic_api_key.get_secret_value() == "sk-test"
    assert "sk-test" not in repr(s)


def test_tls_is_on_with_a_client_certificate_or_api_key(monkeypatch):
    assert not Settings().tls_enabled
    monkeypatch.setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", "/c.pem")
    assert Settings().tls_enabled


def test_external_payload_storage_only_with_an_s3_bucket():
    assert s3_bucket_of("s3://bkt/prefix/x") == "bkt" and s3_bucket_of("file:///tmp") is None
    assert build_data_converter(Settings(store="file:///tmp/x")).external_storage is None

    class FakeS3:
        class meta:
            region_name = "us-east-1"
            endpoint_url = None

    conv = build_data_converter(Settings(store="s3://bkt/p", payload_threshold=1024), FakeS3())
    assert conv.external_storage is not None
    assert conv.external_storage.payload_size_threshold == 1024


def test_workflow_runner_is_unsandboxed_unless_asked(monkeypatch):
    from temporalio.worker import UnsandboxedWorkflowRunner

    from workers.worker import _runner_options

    assert isinstance(_runner_options(Settings())["workflow_runner"], UnsandboxedWorkflowRunner)
    monkeypatch.setenv("COMPACTOR_WORKFLOW_SANDBOX", "1")
    assert Settings().workflow_sandbox and _runner_options(Settings()) == {}


def test_import_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("COMPACTOR_MAX_LINE_BYTES", "4096")
    monkeypatch.setenv("COMPACTOR_MAX_JSON_DEPTH", "50")
    limits = Settings().import_limits()
    assert (limits.max_line_bytes, limits.max_json_depth) == (4096, 50)
    assert limits.max_inline_tool_output == 1 << 20 and limits.max_document_bytes == 256 << 20


def test_summarizer_auto_is_the_default_and_follows_the_key(monkeypatch):
    import pytest
    from pydantic import ValidationError

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("COMPACTOR_SUMMARIZER", raising=False)
    s = Settings()
    assert s.summarizer == "structured" and "no ANTHROPIC_API_KEY" in s.summarizer_why
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    s = Settings()
    assert s.summarizer == "anthropic" and "ANTHROPIC_API_KEY is set" in s.summarizer_why
    monkeypatch.setenv("COMPACTOR_SUMMARIZER", "structured")
    assert (Settings().summarizer, Settings().summarizer_why) == ("structured", "")
    monkeypatch.setenv("COMPACTOR_SUMMARIZER", "bogus")
    with pytest.raises(ValidationError):
        Settings()
