"""The deploy files hold: manifests validate against the Kubernetes schemas (offline), every
``COMPACTOR_*`` variable they set is a real setting, compose starts by health, images are pinned,
and the Grafana dashboard only charts metrics the workers export."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from workers.settings import Settings

INFRA = Path(__file__).resolve().parents[2] / "infra"
K8S_VERSION = "1.30.0"
MANIFESTS = sorted((INFRA / "k8s").glob("*.yaml"))


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _k8s_docs() -> list[dict]:
    return [d for p in MANIFESTS for d in _docs(p)]


def _compose() -> dict:
    return yaml.safe_load((INFRA / "docker-compose.yml").read_text())


def _setting_env_names() -> set[str]:
    """Every environment name the settings model reads."""
    names: set[str] = set()
    prefix = Settings.model_config.get("env_prefix", "")
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if alias is not None and hasattr(alias, "choices"):
            names.update(str(c).upper() for c in alias.choices)
        else:
            names.add(f"{prefix}{name}".upper())
    return names


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_k8s_manifests_validate_against_the_kubernetes_schemas(path):
    import kubernetes_validate

    docs = _docs(path)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_a_broken_manifest_is_caught():
    import kubernetes_validate

    bad = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
           "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "w", "imagePullPolicy": 3}]}}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_every_compactor_env_var_in_infra_is_a_setting():
    known = _setting_env_names()
    named: set[str] = set()
    for path in INFRA.rglob("*"):
        if path.is_file() and path.suffix in (".yaml", ".yml", "") or path.name == "Dockerfile":
            named.update(re.findall(r"\bCOMPACTOR_[A-Z0-9_]+\b", path.read_text(errors="ignore")))
    assert named, "infra/ names no COMPACTOR_* variable"
    unknown = sorted(n for n in named if n not in known)
    assert not unknown, f"no setting reads {unknown}"


def test_the_env_var_check_sees_a_mistyped_name():
    assert "COMPACTOR_LLM_RATE_LIMIT" in _setting_env_names()
    assert "COMPACTOR_LLM_RATE_PER_S" not in _setting_env_names()


def test_worker_deployment_is_probed_bounded_and_locked_down():
    docs = {d["kind"]: d for d in _k8s_docs()}
    assert {"Deployment", "ServiceAccount", "PodDisruptionBudget", "HorizontalPodAutoscaler"} <= set(docs)
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"]
    assert any("role-arn" in k for k in docs["ServiceAccount"]["metadata"].get("annotations", {}))
    (c,) = pod["containers"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["resources"]["requests"] and c["resources"]["limits"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["capabilities"]["drop"] == ["ALL"]
    tmp = {m["name"] for m in c["volumeMounts"] if m["mountPath"] == "/tmp"}
    assert any(v["name"] in tmp and "emptyDir" in v for v in pod["volumes"])
    env = {e["name"]: e.get("value") for e in c["env"]}
    # SIGTERM lets in-flight activities finish: the worker's bound fits in the pod's grace.
    assert float(env["COMPACTOR_GRACEFUL_SHUTDOWN_S"]) < pod["terminationGracePeriodSeconds"]
    port = int(env["COMPACTOR_METRICS_PORT"])
    assert {p["containerPort"] for p in c["ports"]} == {port}
    hpa = docs["HorizontalPodAutoscaler"]["spec"]
    assert any(m["type"] == "Resource" and m["resource"]["name"] == "cpu" for m in hpa["metrics"])


def _images() -> list[tuple[str, str]]:
    out = [(f"compose:{n}", s["image"]) for n, s in _compose()["services"].items() if "image" in s]
    for d in _k8s_docs():
        for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            out.append((f"k8s:{c['name']}", c["image"]))
    for line in (INFRA / "Dockerfile").read_text().splitlines():
        if line.startswith("FROM "):
            out.append(("Dockerfile", line.split()[1]))
    return out


def test_no_image_is_latest_or_untagged():
    images = _images()
    assert len(images) >= 8
    for where, image in images:
        name = image.rsplit("/", 1)[-1]
        assert "@sha256:" in image or (":" in name and not name.endswith(":latest")), f"{where}: {image}"


def test_compose_starts_by_health_not_sleeps():
    services = _compose()["services"]
    for name, svc in services.items():
        assert "restart" in svc, f"{name} has no restart policy"
        deps = svc.get("depends_on", {})
        assert isinstance(deps, dict), f"{name}: depends_on without conditions"
        for target, cond in deps.items():
            assert target in services
            condition = cond["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits for {target}, which has no healthcheck"
            else:  # one-shot setup jobs
                assert condition == "service_completed_successfully"
                assert services[target]["restart"] == "no"
        assert "sleep" not in json.dumps(svc.get("command", "")), f"{name} still waits with sleep"
    assert services["worker"]["depends_on"]["temporal"]["condition"] == "service_healthy"
    assert "healthcheck" in services["worker"]


def test_dockerfile_runs_unprivileged_and_unbuffered():
    text = (INFRA / "Dockerfile").read_text()
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert re.search(r"PYTHONUNBUFFERED=1", text)


def test_dashboard_charts_only_exported_metrics():
    from activities import metrics

    dash = json.loads((INFRA / "grafana" / "compactor.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\b(compactor_[a-z_]+)", e)}
    ins = metrics.instruments()
    exported: set[str] = set()
    for inst in vars(ins).values():
        name = getattr(inst, "name", None) or inst._name  # a proxy until a provider is set
        base = name.replace(".", "_")
        if "histogram" in type(inst).__name__.lower():
            base += "_seconds" if name in metrics.HISTOGRAM_BUCKETS else ""
            exported.update(base + s for s in ("_bucket", "_sum", "_count"))
        elif "updown" in type(inst).__name__.lower() or "gauge" in type(inst).__name__.lower():
            exported.add(base)
        else:
            exported.add(base + "_total")
    assert used and used <= exported, sorted(used - exported)
    assert {"compactor_compactions_total", "compactor_tokens_saved_total",
            "compactor_step_duration_seconds_bucket", "compactor_sweep_lag_seconds_bucket"} <= used
