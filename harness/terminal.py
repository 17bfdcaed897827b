"""What reaches a terminal: text from any untrusted source made inert first.

Model text, provider failure details, SDK warnings, directory names and store contents may hold
terminal controls: an escape sequence that sets the window title, writes the clipboard (OSC 52)
or clears the screen, a carriage return that overwrites a line, a bidirectional override that
shows text in another order than it is stored. Every command prints through this module, so
none reaches the terminal raw:

- ``escape`` is the one escaping function: every control character (Unicode ``Cc``: C0, DEL,
  C1), format character (``Cf``: bidi overrides and isolates, zero-width characters), line or
  paragraph separator (``Zl``, ``Zp``), surrogate and unassigned code point (``Cs``, ``Cn``) is
  written as a visible escape (``\\x1b``, ``\\u202e``, ``\\U000e0001``). ``multiline`` keeps
  newline and tab, for text whose lines are its layout; everything else is escaped.
- ``echo`` prints a line through ``escape`` (``click.echo`` for the command-line modules).
- ``json_out`` prints JSON with the same characters written as JSON escapes (``\\u202e``):
  the document decodes to the same value, and no raw control reaches the terminal.
- ``LoggingHandler`` and ``show_warning`` escape what libraries log or warn during a run
  (``harness.log`` installs them).

Escaping is for display only: stored bytes, hashes and files written are never changed here.
The backslash itself is not escaped, so ``\\x1b`` in the text and an escaped ESC look alike:
what shows is inert, not a reversible encoding.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import unicodedata
from typing import Final, TextIO

__all__ = ["LoggingHandler", "echo", "escape", "json_out", "show_warning"]

# Everything but printable ASCII is looked at; a character is escaped when its category is one
# of these (judged by the running Python's Unicode tables, so no list goes stale).
_LOOK: Final = re.compile(r"[^\x20-\x7e]")
_ESCAPED: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"})
_KEPT_IN_LINES: Final = frozenset({"\n", "\t"})


def _unsafe(char: str) -> bool:
    return unicodedata.category(char) in _ESCAPED


def _visible(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _replace(match: re.Match[str]) -> str:
    char = match.group()
    return _visible(char) if _unsafe(char) else char


def _replace_in_lines(match: re.Match[str]) -> str:
    char = match.group()
    return char if char in _KEPT_IN_LINES or not _unsafe(char) else _visible(char)


def escape(text: str, *, multiline: bool = False) -> str:
    """``text`` with every terminal control and invisible format character made visible.

    Args:
        text: text from anywhere (a model, a provider, a file name, a store).
        multiline: keep newline and tab (text laid out in lines); otherwise they are escaped
            too, so a one-line field stays one line.
    """
    if text.isascii() and text.isprintable():
        return text
    return _LOOK.sub(_replace_in_lines if multiline else _replace, text)


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print ``text`` and (``nl``) a newline, on stderr with ``err``, escaped keeping its lines."""
    import click  # here, not at the top: the logging setup imports this module everywhere

    click.echo(escape(text, multiline=True), err=err, nl=nl)


def _json_escape(match: re.Match[str]) -> str:
    char = match.group()
    if not _unsafe(char):
        return char
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a JSON escape of an astral character is its surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_out(data: bytes | str) -> None:
    """Print a JSON document (UTF-8) and a newline on stdout, its unsafe characters escaped.

    JSON encoders escape C0 controls but write C1 controls, bidi and format characters raw;
    here they become ``\\uHHHH`` escapes, which decode to the same value.
    """
    text = data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data
    if not (text.isascii() and text.isprintable()):
        text = _LOOK.sub(lambda m: m.group() if m.group() == "\n" else _json_escape(m), text)
    out = sys.stdout
    out.flush()  # text written before goes first
    out.buffer.write(text.encode("utf-8", "surrogateescape") + b"\n")
    out.flush()


class LoggingHandler(logging.Handler):
    """A standard-library logging handler writing escaped records to the current stderr.

    Installed as ``logging.lastResort``: what a library logs with no handler of its own (an
    SDK's warning about a response) is shown as it would be, made inert.
    """

    def emit(self, record: logging.LogRecord) -> None:
        """Write one record, escaped keeping its lines."""
        try:
            sys.stderr.write(escape(self.format(record), multiline=True) + "\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)


def show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` with the warning text escaped (a library's warning may quote
    a response)."""
    import warnings

    text = warnings.formatwarning(message, category, filename, lineno, line)
    stream = file if file is not None else sys.stderr
    with contextlib.suppress(OSError):  # as warnings does: a closed stderr loses the warning
        stream.write(escape(text, multiline=True))
