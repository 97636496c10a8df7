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
KUSTOMIZATIONS = sorted((INFRA / "k8s").rglob("kustomization.yaml"))


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _k8s_images() -> list[tuple[str, str]]:
    """The images the kustomizations set (the manifests name the placeholder ``compactor``)."""
    out = []
    for k in KUSTOMIZATIONS:
        for img in yaml.safe_load(k.read_text()).get("images", []):
            ref = img.get("newName", img["name"])
            ref += f"@{img['digest']}" if img.get("digest") else f":{img.get('newTag', '')}"
            out.append((f"k8s:{k.parent.name}", ref))
    return out


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


# The worker's Deployment, PDB, HPA and the rest: tests/unit/test_k8s.py (rendered by kustomize).


def _images() -> list[tuple[str, str]]:
    out = [(f"compose:{n}", s["image"]) for n, s in _compose()["services"].items() if "image" in s]
    out += _k8s_images()
    text = (INFRA / "Dockerfile").read_text()
    args = dict(re.findall(r"^ARG\s+(\w+)=(\S+)", text, re.M))
    for line in text.splitlines():
        if line.startswith("FROM "):
            ref = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), line.split()[1])
            out.append(("Dockerfile", ref))
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
