"""The Seatbelt profile's static checker, and the macOS backend's command line (no spawn)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from harness.sandbox import Limits, SeatbeltBackend, check_profile, default_seatbelt_profile_path
from harness.sandbox._sbpl import Atom, SbplSyntaxError, parse_sbpl

GOOD = """
(version 1)
(deny default)
(allow process-exec (subpath (param "INTERPRETER_PREFIX")))
(allow file-read* (literal "/") (subpath (param "INTERPRETER_PREFIX"))
    (subpath (param "TOOL_CODE")) (literal (param "RUN_FILE")) (subpath "/usr/lib"))
(allow file-read-metadata)
(allow file-write* (literal "/dev/null"))
(allow sysctl-read)
"""


def test_committed_profile_has_the_required_shape() -> None:
    assert check_profile(default_seatbelt_profile_path().read_text()) == []


def test_reference_profile_has_the_required_shape() -> None:
    assert check_profile(GOOD) == []


def _with(extra: str) -> str:
    return GOOD + extra + "\n"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (GOOD.replace("(deny default)", ""), r"^the profile has no \(deny default\)$"),
        (GOOD.replace("(version 1)", "(version 2)"), r"^the profile must start with"),
        (_with("(allow default)"), r"allows default$"),
        (_with("(allow network-outbound)"), r"operation network-outbound is not allowed"),
        (_with('(allow network* (remote ip "localhost:*"))'), r"operation network\* is not"),
        (_with("(allow system-socket)"), r"operation system-socket is not allowed"),
        (_with('(allow mach-lookup (global-name "x"))'), r"operation mach-lookup is not"),
        (_with("(allow process-fork)"), r"operation process-fork is not allowed"),
        (_with("(allow sysctl-write)"), r"operation sysctl-write is not allowed"),
        (_with("(allow file-write*)"), r"file-write\* is allowed everywhere"),
        (_with("(allow file-read*)"), r"file-read\* is allowed everywhere"),
        (_with('(allow file-write* (subpath "/tmp"))'), r"'/tmp' is not a listed system path"),
        (
            _with('(allow file-write* (subpath (param "TOOL_CODE")))'),
            r"writes may go only to \(literal \"/dev/null\"\)",
        ),
        (_with('(allow process-exec (subpath "/bin"))'), r"exec is allowed only under"),
        (_with('(allow file-read* (regex #"^/Users/"))'), r"is not \(literal P\) or \(subpath P\)"),
        (_with('(allow file-read* (literal "/Users/me/.netrc"))'), r"not a listed system path"),
        (_with('(allow file-read* (subpath "/"))'), r"never a subpath$"),
        (_with('(allow file-read* (subpath (param "HOME")))'), r"unknown parameter 'HOME'$"),
        (_with('(import "system.sb")'), r"only \(version 1\), \(deny \.\.\.\) and \(allow"),
        (_with('(define x "y")'), r"only \(version 1\)"),
        (GOOD.replace('(literal (param "RUN_FILE"))', ""), r"^parameters never used: RUN_FILE$"),
        ("(version 1) (deny default", r"^not well-formed: unbalanced '\('$"),
        ('(version 1) (deny "default)', r"^not well-formed: unterminated string"),
    ],
    ids=[
        "no-deny-default",
        "version-2",
        "allow-default",
        "network-outbound",
        "network-star",
        "system-socket",
        "mach-lookup",
        "process-fork",
        "sysctl-write",
        "write-everywhere",
        "read-everywhere",
        "write-tmp",
        "write-tool-code",
        "exec-bin",
        "regex",
        "home-literal",
        "root-subpath",
        "unknown-param",
        "import",
        "define",
        "unused-param",
        "unbalanced",
        "unterminated",
    ],
)
def test_checker_rejects(text: str, problem: str) -> None:
    problems = check_profile(text)
    assert any(re.search(problem, p) for p in problems), problems


def test_parser_reads_comments_strings_and_nesting() -> None:
    forms = parse_sbpl('; comment\n(a "b \\" c" (d))  ; tail\n(e)')
    assert forms == [[Atom("a"), 'b " c', [Atom("d")]], [Atom("e")]]
    assert isinstance(forms[0][0], Atom)
    assert not isinstance(forms[0][1], Atom)


def test_parser_rejects_stray_close() -> None:
    with pytest.raises(SbplSyntaxError, match=r"^unbalanced '\)'$"):
        parse_sbpl("(a))")


def test_seatbelt_argv_passes_paths_only_as_params(tmp_path: Path) -> None:
    interp = tmp_path / "prefix" / "bin" / "python3.11"
    root = tmp_path / "project"
    text = default_seatbelt_profile_path().read_text()
    backend = SeatbeltBackend(
        profile_text=text,
        profile_path="p",
        profile_digest="blake3:" + "0" * 64,
        interpreter=interp,
        project_root=root,
        limits=Limits(),
    )
    worker = str(root / "harness" / "tools" / "worker.py")
    assert backend.argv() == [
        "/usr/bin/sandbox-exec",
        "-p",
        text,
        "-D",
        f"INTERPRETER_PREFIX={tmp_path / 'prefix'}",
        "-D",
        f"TOOL_CODE={root / 'harness'}",
        "-D",
        f"RUN_FILE={worker}",
        "--",
        str(interp),
        "-I",
        "-S",
        "-B",
        worker,
        "--parent",
        str(os.getpid()),
    ]
    # ``sandbox exec`` hands the file over open: the profile names no path of it.
    run_argv = backend.argv(7, str(tmp_path / "x.py"))
    assert run_argv[8] == f"RUN_FILE={worker}"
    assert run_argv[-4:] == ["--run-fd", "7", "--run-name", str(tmp_path / "x.py")]
    info = backend.describe()
    assert (info.backend, info.tier, info.landlock_abi) == ("seatbelt", "seatbelt", None)
