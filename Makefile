# The two commands a fresh machine needs: `make demo` (main job) and `make test` (tests).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install bytecode clean image lock tools checkov

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# An editable install leaves the sources uncompiled; where PYTHONDONTWRITEBYTECODE is set, every
# command would compile them again (~0.13 s a process, docs/bench-perf.md session 19), which an
# installed wheel (pip compiles it) never does. Stale files are recompiled in memory, not trusted.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q compactor activities workers workflows >/dev/null

install: $(STAMP) tools bytecode

# Debian tools the tests use where apt exists (as root): kubectl (kubernetes-client) renders
# infra/k8s; promtool (prometheus) checks infra/prometheus/alerts.yml. Elsewhere those checks skip.
APT_TOOLS := $(if $(shell command -v kubectl),,kubernetes-client) $(if $(shell command -v promtool),,prometheus)
tools:
	@if [ -n "$(strip $(APT_TOOLS))" ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(APT_TOOLS) >/dev/null) \
	      || echo "note: could not install $(strip $(APT_TOOLS)): their checks will skip"; \
	  else echo "note: $(strip $(APT_TOOLS)) missing (no apt as root): their checks will skip"; fi; \
	fi

# The production worker image (infra/Dockerfile): worker only, non-root, from the lock file.
IMAGE ?= compactor:$(shell $(PY) -c "import tomllib;print(tomllib.load(open('pyproject.toml','rb'))['project']['version'])")
PYTHON_IMAGE ?= python:3.11.11-slim
image:
	docker build -f infra/Dockerfile --build-arg PYTHON_IMAGE=$(PYTHON_IMAGE) -t $(IMAGE) .
	@docker image inspect --format 'built $(IMAGE) {{.Id}}' $(IMAGE)

# checkov over the rendered overlays (not in `make test`: checkov is ~290 MB and ~100 packages).
checkov: tools
	$(PY) -m venv .venv-checkov
	.venv-checkov/bin/pip install -q checkov
	mkdir -p .checkov && for o in local production; do kubectl kustomize infra/k8s/overlays/$$o > .checkov/$$o.yaml; done
	.venv-checkov/bin/checkov -d .checkov --framework kubernetes --compact --quiet --skip-download

# Re-pin infra/requirements.lock after a dependency change in pyproject.toml (hashes included).
lock:
	$(PY) -m venv .venv-lock
	.venv-lock/bin/pip install -q pip-tools
	.venv-lock/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	  --no-emit-index-url --no-emit-find-links --output-file=infra/requirements.lock pyproject.toml

demo: $(STAMP) bytecode
	$(BIN)/compactor demo

test: $(STAMP) tools
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .venv-lock .venv-checkov .checkov .compactor
