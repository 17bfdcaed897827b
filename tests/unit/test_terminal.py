"""Text reaching a terminal is inert: the one escaping function, its JSON form, the logging and
warnings hooks, and a guard that every command prints through ``harness.terminal``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.terminal import escape, json_out

WINDOW_TITLE = "\x1b]0;pwned-title\x07"
OSC_52 = "\x1b]52;c;cHduZWQ=\x07"  # writes "pwned" to the clipboard
CLEAR_SCREEN = "\x1b[2J\x1b[H"
BIDI = "\u202eevil\u202c and \u2066isolated\u2069"
C1_CSI = "\x9b31m"
OVERWRITE = "ok\rFAIL"
PAYLOADS = [WINDOW_TITLE, OSC_52, CLEAR_SCREEN, BIDI, C1_CSI, OVERWRITE]
_UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"}


def unsafe_chars(text: str, *, multiline: bool = False) -> list[str]:
    """Characters a terminal would act on or hide (newline and tab allowed with ``multiline``)."""
    keep = {"\n", "\t"} if multiline else set()
    return [c for c in text if unicodedata.category(c) in _UNSAFE and c not in keep]


@pytest.mark.parametrize(
    ("payload", "shown"),
    [
        (WINDOW_TITLE, "\\x1b]0;pwned-title\\x07"),
        (OSC_52, "\\x1b]52;c;cHduZWQ=\\x07"),
        (CLEAR_SCREEN, "\\x1b[2J\\x1b[H"),
        (BIDI, "\\u202eevil\\u202c and \\u2066isolated\\u2069"),
        (C1_CSI, "\\x9b31m"),
        (OVERWRITE, "ok\\x0dFAIL"),
    ],
    ids=["window-title", "osc-52", "clear-screen", "bidi", "c1-csi", "carriage-return"],
)
def test_each_payload_is_shown_inert(payload: str, shown: str) -> None:
    assert escape(payload) == shown
    assert escape(payload, multiline=True) == shown


def test_lines_are_kept_only_when_asked() -> None:
    text = "line one\n\tline two \u00e9\u4e2d\U0001f600"
    assert escape(text, multiline=True) == text  # letters and emoji are left alone
    assert escape(text) == "line one\\x0a\\x09line two \u00e9\u4e2d\U0001f600"
    assert escape("plain ascii") == "plain ascii"
    assert escape("tag \U000e0041 zero\u200bwidth") == "tag \\U000e0041 zero\\u200bwidth"


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_nothing_unsafe_survives(text: str) -> None:
    assert unsafe_chars(escape(text)) == []
    assert unsafe_chars(escape(text, multiline=True), multiline=True) == []


@given(st.text(alphabet=st.characters(exclude_categories=("Cc", "Cf", "Zl", "Zp", "Cs", "Cn"))))
def test_safe_text_is_unchanged(text: str) -> None:
    assert escape(text) == text


def test_json_out_decodes_to_the_same_value(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    value = {"text": "".join(PAYLOADS) + "\U000e0001", "n": 1}
    encoded = json.dumps(value, ensure_ascii=False, indent=2)
    json_out(encoded.encode())
    out = capsysbinary.readouterr().out.decode()
    assert unsafe_chars(out, multiline=True) == []
    assert json.loads(out) == value


_LIBRARY = """
import logging, sys, warnings
from harness.log import configure
configure(verbose=0)
payload = sys.argv[1]
logging.getLogger("google_genai.types").warning("response said %s", payload)
warnings.warn("deprecated " + payload, UserWarning, stacklevel=1)
"""


def test_library_logging_and_warnings_are_escaped() -> None:
    """What an SDK logs with no handler of its own (google-genai's logger) and a warning it
    raises reach stderr made inert: a real process, with logging as a command has it."""
    payload = WINDOW_TITLE + OSC_52 + BIDI
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", _LIBRARY, payload],  # shown, not raised
        capture_output=True,
        timeout=60,
        check=True,
        cwd=_ROOT,
    )
    err = done.stderr.decode()
    assert unsafe_chars(err, multiline=True) == []
    shown = "\\x1b]0;pwned-title\\x07\\x1b]52;c;cHduZWQ=\\x07\\u202eevil"
    assert f"response said {shown}" in err
    assert f"deprecated {shown}" in err


_EVENT = """
import sys
from harness.log import configure, get_logger
configure(verbose=0)
get_logger("harness.test").warning("provider.detail", detail=sys.argv[1])
"""


def test_harness_log_events_are_escaped() -> None:
    """An event's value (a provider's detail) reaches stderr inert: a real process, so the
    logger writes to the stderr a command has."""
    done = subprocess.run(
        [sys.executable, "-c", _EVENT, CLEAR_SCREEN + C1_CSI],
        capture_output=True,
        timeout=60,
        check=True,
        cwd=_ROOT,
    )
    err = done.stderr.decode()
    assert unsafe_chars(err, multiline=True) == []
    assert "\\x1b[2J\\x1b[H\\x9b31m" in err


_ROOT = Path(__file__).resolve().parents[2]
_RAW_OUTPUT = re.compile(
    r"click\.(echo|secho|echo_via_pager)\(|sys\.std(out|err)\.(buffer\.)?write\(|print\("
)
# Writers that never print untrusted text to a terminal: the sandboxed child's own protocol
# streams, the progress line (counts only), the start-up checks before anything is read.
_ALLOWED = {
    "harness/terminal.py",
    "harness/__init__.py",
    "harness/_entry.py",
    "harness/tools/worker.py",
    "harness/sandbox/_zygote.py",
    "harness/sandbox/_probe_child.py",
    "harness/studies/progress.py",
}


def test_every_command_prints_through_the_terminal_module() -> None:
    """No module of the harness or preflight writes to stdout/stderr by itself (the ones
    listed print no untrusted text), so every output boundary goes through the escaping."""
    found = []
    for path in sorted([*(_ROOT / "harness").rglob("*.py"), *(_ROOT / "preflight").rglob("*.py")]):
        name = path.relative_to(_ROOT).as_posix()
        if name in _ALLOWED or name.startswith("harness/examples/"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if _RAW_OUTPUT.search(line) and "# terminal: " not in line:
                found.append(f"{name}:{number}: {line.strip()}")
    assert found == []
