"""One meaning per public name: no two modules of harness/ or preflight/ define the same one.

A public name is a class, function or assigned constant at a module's top level that is not
private (no leading underscore) and, where the module has ``__all__``, is listed there. A name
re-exported by import is not a definition. The only names defined twice are the parallels below:
the same role played once in each of two packages of one shape (a study, an example, a framework
adapter, a process's entry point), listed with the modules that define them, so a new collision
fails here and a resolved one must leave the list.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
PACKAGES: Final = ("harness", "preflight")

_STATIC_V2: Final = ("harness.studies.static", "harness.studies.v2")
# name -> (why it is one meaning, the packages whose modules define it)
PARALLELS: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "analyze": ("each study's analysis of its verified store", _STATIC_V2),
    "load_run": ("each study's verified store, loaded", _STATIC_V2),
    "render_files": ("each study's report files, rendered", _STATIC_V2),
    "render_html": ("each study's report page", _STATIC_V2),
    "write_report": ("each study's report, written", _STATIC_V2),
    "figure_caption": ("each study's figure caption", _STATIC_V2),
    "run_of": ("each study's run identity line", _STATIC_V2),
    "FIGURE_FILES": ("each study's figure file names", _STATIC_V2),
    "REPORT_DIR": ("each study's report directory name", _STATIC_V2),
    "REPORT_FILES": ("each study's report file names", _STATIC_V2),
    "resume_command": (
        "the shared resume command and each study's binding of its name",
        ("harness.studies._store_audit", *_STATIC_V2),
    ),
    "PLANNER": ("each example planner plug-in's entry", ("harness.examples.planners",)),
    "benchmark_tools": ("each example task's tools", ("harness.examples",)),
    "SUBMIT": ("each framework adapter's submit tool name", ("harness.integrations",)),
    "main": (
        "each process's entry point: the CLI, the sandbox zygote, its probe child, the tool child",
        ("harness.cli", "harness.sandbox", "harness.tools"),
    ),
}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _public_definitions(tree: ast.Module) -> list[str]:
    listed: set[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            listed = set(ast.literal_eval(node.value))
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [
        n
        for n in names
        if not n.startswith("_") and n != "__all__" and (listed is None or n in listed)
    ]


@functools.cache  # scanned once for the module's tests, which only read it
def definitions() -> Mapping[str, tuple[str, ...]]:
    """Public name -> the modules defining it, over every module of the packages."""
    found: dict[str, list[str]] = defaultdict(list)
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for name in _public_definitions(tree):
                found[name].append(module)
    return {name: tuple(modules) for name, modules in found.items()}


def collisions(found: Mapping[str, Sequence[str]]) -> dict[str, Sequence[str]]:
    """Names defined in more than one module that are not a listed parallel."""
    bad: dict[str, Sequence[str]] = {}
    for name, modules in sorted(found.items()):
        if len(modules) < 2:
            continue
        parallel = PARALLELS.get(name)
        if parallel is None or not all(any(_within(m, p) for p in parallel[1]) for m in modules):
            bad[name] = modules
    return bad


def test_no_public_name_has_two_meanings() -> None:
    bad = collisions(definitions())
    assert bad == {}, "\n".join(f"{name}: {', '.join(ms)}" for name, ms in bad.items())


def test_every_parallel_is_still_defined_twice() -> None:
    found = definitions()
    assert sorted(n for n in PARALLELS if len(found.get(n, ())) < 2) == []


def test_the_names_once_doubled_have_one_home() -> None:
    found = definitions()
    once = {
        "Verdict": "harness.ect.model",
        "Check": "harness.ect.verifier",
        "PreflightCheck": "harness.preflight_report",
        "BenchmarkManifest": "harness.benchmark.manifest",
        "StoreManifest": "harness.store._model",
        "AttemptTally": "harness.audit",
        "ReplayTally": "harness.studies._replay",
        "Progress": "harness.studies.progress",
        "Stream": "harness.streams",
        "KeyedStream": "harness.streams",
    }
    for name, home in once.items():
        assert found.get(name) == (home,), (name, found.get(name))
    assert "Manifest" not in found
    assert "Tally" not in found
    assert "analyse" not in found
    assert "load_results" not in found
    audits = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "harness").rglob("audit.py"))
    assert audits == ["harness/audit.py"]


def test_a_new_collision_is_reported() -> None:
    found = {"Thing": ["harness.store._model", "harness.gate.session"], "analyze": ["harness.x"]}
    assert collisions(found) == {"Thing": ["harness.store._model", "harness.gate.session"]}
    outside = {"analyze": ["harness.studies.v2.analysis", "harness.gate.session"]}
    assert collisions(outside) == outside
