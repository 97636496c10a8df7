"""The Kubernetes deploy files, as a platform team applies them: each overlay of infra/k8s is
rendered with `kubectl kustomize` (Debian's kubernetes-client, installed by `make tools`),
every object is validated offline against the Kubernetes schemas (the ServiceMonitor CRD
against the schema shipped in infra/k8s/schemas), and the operational properties issue 16
asks for are checked on the rendered objects."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "infra" / "k8s"
K8S_VERSION = "1.30.0"
OVERLAYS = ["local", "production"]
CRD_SCHEMAS = {"ServiceMonitor": K8S / "schemas" / "servicemonitor.json"}
NAMESPACED = {"Deployment", "Service", "ServiceAccount", "PodDisruptionBudget", "HorizontalPodAutoscaler",
              "NetworkPolicy", "Job", "ConfigMap", "ServiceMonitor"}


def _kubectl() -> str:
    found = shutil.which("kubectl")
    if not found:
        pytest.skip("kubectl not installed: `make tools` installs Debian's kubernetes-client where apt exists")
    return found


@cache
def render(overlay: str) -> tuple[dict, ...]:
    p = subprocess.run([_kubectl(), "kustomize", str(K8S / "overlays" / overlay)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return tuple(d for d in yaml.safe_load_all(p.stdout) if d)


def by_kind(overlay: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for d in render(overlay):
        out.setdefault(d["kind"], []).append(d)
    return out


def one(overlay: str, kind: str, name: str | None = None) -> dict:
    docs = [d for d in by_kind(overlay).get(kind, []) if name is None or d["metadata"]["name"] == name]
    assert len(docs) == 1, (kind, name, len(docs))
    return docs[0]


def validate(doc: dict) -> None:
    import jsonschema
    import kubernetes_validate

    schema = CRD_SCHEMAS.get(doc["kind"])
    if schema is not None:
        jsonschema.validate(doc, json.loads(schema.read_text()))
    else:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_validates_offline(overlay):
    docs = render(overlay)
    assert len(docs) >= 9
    for doc in docs:
        validate(doc)
        if doc["kind"] in NAMESPACED:  # nothing lands in `default` by accident
            assert doc["metadata"].get("namespace") == f"compactor{'-local' if overlay == 'local' else ''}", doc["metadata"]


def test_a_mistyped_servicemonitor_is_caught():
    import jsonschema

    sm = json.loads(json.dumps(one("production", "ServiceMonitor")))
    sm["spec"]["endpoints"][0]["intervall"] = "30s"
    with pytest.raises(jsonschema.ValidationError):
        validate(sm)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workers_are_locked_down_probed_and_spread(overlay):
    dep = one(overlay, "Deployment", "compactor-worker")
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] >= 10000
    assert pod["automountServiceAccountToken"] is False
    (c,) = pod["containers"]
    assert c["args"] == ["worker"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["capabilities"]["drop"] == ["ALL"]
    assert sc["allowPrivilegeEscalation"] is False
    assert {t["topologyKey"] for t in pod["topologySpreadConstraints"]} == {
        "topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert {p["containerPort"] for p in c["ports"]} == {int(env["COMPACTOR_METRICS_PORT"])}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_pod_grace_covers_a_model_call_and_the_config_is_valid_settings(overlay, monkeypatch):
    from workers.settings import Settings
    from workers.worker import model_call_grace_s

    cm = one(overlay, "ConfigMap")
    dep = one(overlay, "Deployment", "compactor-worker")
    assert dep["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["name"] == cm["metadata"]["name"]
    for k in list(__import__("os").environ):
        if k.startswith(("COMPACTOR_", "TEMPORAL_", "AWS_")):
            monkeypatch.delenv(k)
    for k, v in cm["data"].items():
        monkeypatch.setenv(k, v)
    settings = Settings()  # every value the overlay sets parses
    grace = dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert settings.graceful_shutdown_s < grace
    assert model_call_grace_s(settings) < grace  # a rolling deploy never cancels a summary


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_pdb_lets_nodes_drain(overlay):
    pdb = one(overlay, "PodDisruptionBudget")["spec"]
    # maxUnavailable: a drain proceeds even when every pod is unready (minAvailable would block it)
    assert "minAvailable" not in pdb and pdb["maxUnavailable"] == 1
    assert pdb["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_job_runs_compactor_setup_with_the_workers_image_and_config(overlay):
    job = one(overlay, "Job", "compactor-setup")
    dep = one(overlay, "Deployment", "compactor-worker")
    (c,) = job["spec"]["template"]["spec"]["containers"]
    worker = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["args"] == ["setup"] and c["image"] == worker["image"]
    assert c["envFrom"] == worker["envFrom"]
    assert job["spec"]["ttlSecondsAfterFinished"] > 0  # gone after a while: the next apply runs it again
    assert job["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_cover_workers_and_the_setup_job(overlay):
    pols = {p["metadata"]["name"]: p["spec"] for p in by_kind(overlay)["NetworkPolicy"]}
    for name, labels in (("compactor-worker", {"app": "compactor-worker"}), ("compactor-setup", {"app": "compactor-setup"})):
        spec = pols[name]
        assert spec["podSelector"]["matchLabels"] == labels
        assert set(spec["policyTypes"]) == {"Ingress", "Egress"}
        ports = {p["port"] for rule in spec["egress"] for p in rule.get("ports", [])}
        assert {53, 7233} <= ports
    ingress_ports = {p["port"] for r in pols["compactor-worker"].get("ingress", []) for p in r["ports"]}
    assert ingress_ports == {9464}  # scrapes only
    assert not pols["compactor-setup"].get("ingress")


def test_production_uses_irsa_tls_from_a_secret_and_scales_on_backlog():
    from workers.backlog import METRIC

    sa = one("production", "ServiceAccount")
    assert re.fullmatch(r"arn:aws:iam::\d{12}:role/.+", sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"])
    assert one("production", "Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    cm = one("production", "ConfigMap")["data"]
    for kind, name in (("Deployment", "compactor-worker"), ("Job", "compactor-setup")):
        pod = one("production", kind, name)["spec"]["template"]["spec"]
        vols = {v["name"]: v for v in pod["volumes"]}
        mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "temporal-tls")
        assert vols["temporal-tls"]["secret"]["secretName"] == "temporal-tls" and mount["readOnly"] is True
        for var in ("TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH"):
            assert cm[var].startswith(mount["mountPath"] + "/")
    hpa = one("production", "HorizontalPodAutoscaler")["spec"]
    assert hpa["scaleTargetRef"]["name"] == "compactor-worker"
    external = [m["external"] for m in hpa["metrics"] if m["type"] == "External"]
    assert external and all(m["metric"]["name"] == METRIC for m in external)
    assert {m["metric"]["selector"]["matchLabels"]["task_queue"] for m in external} == {"compactor", "compactor-llm"}
    assert not [m for m in hpa["metrics"] if m["type"] == "Resource"]  # not CPU: workers wait on models
    rules = yaml.safe_load((K8S / "prometheus-adapter-rules.yaml").read_text())["rules"]["external"]
    assert any(r["name"]["as"] == METRIC and METRIC in r["seriesQuery"] for r in rules)


def test_production_servicemonitor_scrapes_the_metrics_service():
    sm = one("production", "ServiceMonitor")["spec"]
    svc = one("production", "Service")
    assert sm["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert {e["port"] for e in sm["endpoints"]} <= {p["name"] for p in svc["spec"]["ports"]}


def test_local_runs_one_worker_without_the_autoscaler():
    kinds = by_kind("local")
    assert "HorizontalPodAutoscaler" not in kinds and "ServiceMonitor" not in kinds
    assert one("local", "Deployment")["spec"]["replicas"] == 1


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_checkov_skip_names_a_check_and_a_reason(overlay):
    for doc in render(overlay):
        for k, v in (doc["metadata"].get("annotations") or {}).items():
            if k.startswith("checkov.io/skip"):
                check, _, reason = v.partition("=")
                assert re.fullmatch(r"CKV_K8S_\d+", check) and len(reason.split()) >= 5, (k, v)
