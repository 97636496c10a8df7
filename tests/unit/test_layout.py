"""The project's layering, read from its own imports (issue 13).

Fails on any two modules that import each other (function-level imports included), on any
import of ``workflows`` from ``activities/`` or the ``compactor`` package, and on a flat
``compactor/`` of more than 12 modules.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("compactor", "activities", "workflows", "workers")


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The project module an imported dotted name lands in (the longest existing prefix)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in mods:
            return candidate
        parts.pop()
    return None


def imports() -> dict[str, set[str]]:
    """Every project module -> the project modules it imports, at any depth of the code."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")
                    base = base if is_pkg else base[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                # `from pkg import mod` imports the submodule when one exists
                targets = [f"{stem}.{a.name}" for a in node.names] or [stem]
                targets = [t if _resolve(t, mods) == t else stem for t in targets]
            for t in targets:
                hit = _resolve(t, mods)
                if hit and hit != mod:
                    graph[mod].add(hit)
    return graph


def test_no_two_modules_import_each_other():
    graph = imports()
    cycles = sorted({tuple(sorted((a, b))) for a, deps in graph.items() for b in deps if a in graph.get(b, ())})
    assert not cycles, f"modules that import each other: {cycles}"


def test_no_import_of_workflows_from_activities_or_the_core():
    graph = imports()
    bad = sorted(
        f"{a} -> {b}"
        for a, deps in graph.items()
        for b in deps
        if b.split(".")[0] == "workflows" and a.split(".")[0] in ("activities", "compactor")
        and not a.startswith(("compactor.cli", "compactor.bench", "compactor.testing"))
    )
    assert not bad, f"imports of workflows/ from activities/ or the core: {bad}"


PIPELINE_ORDER = ("compactor.lifting", "compactor.summarize", "compactor.engine")
PURE = PIPELINE_ORDER + ("compactor.store", "compactor.importers", "compactor.events", "compactor.tokens",
                         "compactor.records", "compactor.errors")


def test_the_pipeline_imports_run_one_way():
    """README Architecture: lifting knows nothing of summarize, summarize nothing of engine, and
    the pipeline, the store and the core data modules nothing of activities/, workers/ or workflows/
    (only the platform-facing client, operator and the CLI reach the layer above)."""
    graph = imports()
    bad = []
    for a, deps in graph.items():
        for b in deps:
            if a.startswith(PURE) and b.split(".")[0] in ("activities", "workers", "workflows"):
                bad.append(f"{a} -> {b}")
            for i, low in enumerate(PIPELINE_ORDER):
                if a.startswith(low) and b.startswith(PIPELINE_ORDER[i + 1:]):
                    bad.append(f"{a} -> {b}")
    assert not sorted(bad), f"imports against the layering: {sorted(bad)}"


def test_the_core_stays_small_and_grouped():
    flat = sorted(p.stem for p in (ROOT / "compactor").glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(flat) <= 12, f"{len(flat)} modules side by side in compactor/: {flat}"
    for pkg in ("lifting", "summarize", "engine", "store", "importers"):
        assert (ROOT / "compactor" / pkg / "__init__.py").exists(), pkg


def test_the_walker_sees_a_cycle(tmp_path, monkeypatch):
    """The check itself can fail: two modules importing each other are reported."""
    pkg = tmp_path / "compactor"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from compactor.b import g\n")
    (pkg / "b.py").write_text("from compactor import a\n")
    for other in PACKAGES[1:]:
        (tmp_path / other).mkdir()
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    graph = imports()
    assert "compactor.b" in graph["compactor.a"] and "compactor.a" in graph["compactor.b"]


def test_the_readme_architecture_names_every_pipeline_module():
    """`ls compactor/*/` reads like README's Architecture: every module of the pipeline's
    packages is named there (a module added without a line there fails)."""
    readme = (ROOT / "README.md").read_text()
    arch = readme.split("## Architecture", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"\b([a-z0-9_]+)\.py\b", arch))
    missing = sorted(
        f"{pkg}/{p.name}"
        for pkg in ("store", "lifting", "summarize", "engine")
        for p in (ROOT / "compactor" / pkg).glob("*.py")
        if p.stem != "__init__" and p.stem not in named
    )
    missing += sorted(p.name for p in (ROOT / "compactor").glob("*.py")
                      if p.stem not in ("__init__", "__main__") and p.stem not in named)
    assert not missing, f"modules README's Architecture does not name: {missing}"
