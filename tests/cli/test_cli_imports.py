"""`harness verify` and `harness --help` import only the core: subcommands load on first use.

The import set is asserted, not the time (timing lives in scripts/bench_cli.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from harness.cli import _LAZY, main

EXAMPLE = Path(__file__).resolve().parents[2] / "harness" / "examples" / "regional-sum"
HEAVY = ("numpy", "matplotlib", "google.genai", "trio", "mcp", "mcp_types")
# The gate adapters' frameworks: extras, loaded only by code that imports an adapter.
FRAMEWORKS = ("inspect_ai", "agents", "harness.integrations")

# Run the CLI in a fresh interpreter and print, at exit, every module it imported.
_PROBE = (
    "import atexit, sys\n"
    "def dump():\n"
    "    sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
    "atexit.register(dump)\n"
    "from harness.cli import main\n"
    "main()\n"
)


def _imported(*args: str) -> tuple[int, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, check=False
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
    return done.returncode, set(line.split()[1:])


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("verify", "--help"),
        (
            "verify",
            "--descriptor",
            str(EXAMPLE / "descriptor.json"),
            "--requirements",
            str(EXAMPLE / "requirements.json"),
            "--ledger",
            str(EXAMPLE / "ledger.json"),
            "--certificate",
            str(EXAMPLE / "certificate.json"),
        ),
    ],
)
def test_core_commands_import_no_heavy_module(args: tuple[str, ...]) -> None:
    code, modules = _imported(*args)
    assert code == 0
    loaded = sorted(
        m for m in modules for h in (*HEAVY, *FRAMEWORKS) if m == h or m.startswith(h + ".")
    )
    assert loaded == []


def _modules_after(statement: str) -> set[str]:
    probe = f"import sys\n{statement}\nprint(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


@pytest.mark.parametrize("statement", ["import harness.gate", "import harness.integrations"])
def test_the_gate_imports_no_framework(statement: str) -> None:
    modules = _modules_after(statement)
    loaded = sorted(m for m in modules for h in FRAMEWORKS[:2] if m == h or m.startswith(h + "."))
    assert loaded == []


# A finder that hides one top-level package, as if its extra were not installed.
_HIDE = (
    "import sys\n"
    "class Hide:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] == {hidden!r}:\n"
    "            raise ModuleNotFoundError(name)\n"
    "sys.meta_path.insert(0, Hide())\n"
    "try:\n"
    "    import {module}\n"
    "except Exception as e:\n"
    "    print(type(e).__name__, e)\n"
)


@pytest.mark.parametrize(
    ("module", "hidden", "extra"),
    [
        ("harness.integrations.inspect", "inspect_ai", "inspect"),
        ("harness.integrations.openai_agents", "agents", "agents"),
    ],
)
def test_an_adapter_without_its_extra_names_the_extra(module: str, hidden: str, extra: str) -> None:
    probe = _HIDE.format(hidden=hidden, module=module)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == (
        f"MissingExtraError {module} needs the [{extra}] extra: pip install 'ect-harness[{extra}]'"
    )


def test_mcp_proxy_help_imports_nothing_of_mcp() -> None:
    # The SDK is imported only once the contract and the upstream specs have been checked.
    code, modules = _imported("mcp-proxy", "--help")
    assert code == 0
    assert sorted(m for m in modules if m in ("mcp", "mcp_types") or m.startswith("mcp.")) == []


def test_a_study_command_still_loads_its_modules() -> None:
    # The probe can see heavy imports: a command that needs trio does import it.
    code, modules = _imported("v2", "--help")
    assert code == 0
    assert "trio" in modules


@pytest.mark.parametrize("name", sorted(_LAZY))
def test_every_lazy_entry_resolves_to_its_command(name: str) -> None:
    command = main.get_command(click.Context(main), name)
    assert command is not None
    assert command.name == name
    assert _LAZY[name][1]


def test_help_lists_every_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "--help"], capture_output=True, text=True, check=True
    )
    rows = done.stdout.split("Commands:")[1].splitlines()
    # A command row starts with two spaces; wrapped help continues further indented.
    listed = {row.split()[0] for row in rows if row.startswith("  ") and row[2] != " "}
    assert listed == {"examples", "schema", "verify", *_LAZY}


def test_an_older_python_gets_one_line_naming_the_fix() -> None:
    # The guard reads sys.version_info before anything else of the package is imported.
    code = "import sys; sys.version_info = (3, 10, 14, 'final', 0); import harness.cli"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: ect-harness needs Python >= 3.11 (this is 3.10): run it with a newer python3, "
        "e.g. PYTHON=/path/to/python3.11 scripts/run"
    ]


# Every package below the command line (and preflight), imported together in one interpreter.
_LIBRARY = (
    "harness.providers",
    "harness.providers.selection",
    "harness.providers.network",
    "harness.store",
    "harness.sandbox",
    "harness.gate",
    "harness.mcp_proxy",
    "harness.worlds",
    "harness.benchmark",
    "harness.audit",
    "harness.studies.static.run",
    "harness.studies.v2.study",
    "harness.studies.v2.report",
    "preflight",
)


def test_no_library_package_loads_click() -> None:
    # The provider options are the command line's (harness.cli.provider_options).
    modules = _modules_after("\n".join(f"import {name}" for name in _LIBRARY))
    assert set(_LIBRARY) <= modules
    assert sorted(m for m in modules if m == "click" or m.startswith("click.")) == []
    assert "click" in _modules_after("import harness.cli.provider_options")
