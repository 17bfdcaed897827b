"""Explicit credential input: the API key comes only from a source the user names.

Two sources exist: a file (``--credential-file PATH``, one key on one line) or an environment
variable (``--credential-env NAME``). Ambient ``GOOGLE_*``/``GEMINI_*`` variables are never read
as a key: ``scrub_ambient`` removes them from the process environment, so neither google-genai
(which reads ``GOOGLE_API_KEY``, ``GEMINI_API_KEY``, ``GOOGLE_GENAI_*``, ``GOOGLE_GEMINI_BASE_URL``
silently) nor any child process can see them. A key read from a named variable is removed from
the environment too, so no child inherits it.

The key lives only inside a ``Credential``: its repr names the source, never the key; it refuses
pickling; it can mask itself out of any string, byte string or JSON value before that is
recorded, in every spelling a decoder turns back into the key (raw, JSON ``\\uHHHH`` or
backslash escapes at any nesting depth, percent escapes: ``key_pattern``). Error
messages name the source and what is wrong with it, never any content.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, Final, Literal, NoReturn

import msgspec

from harness._credential_pipe import inherited_key
from harness.errors import CredentialError
from harness.log import get_logger

__all__ = [
    "AMBIENT_PREFIXES",
    "REDACTED",
    "Credential",
    "CredentialSource",
    "KeyScan",
    "key_pattern",
    "load_credential",
    "scrub_ambient",
]

AMBIENT_PREFIXES: Final = ("GOOGLE_", "GEMINI_", "OPENAI_")
REDACTED: Final = "[REDACTED]"
_MAX_KEY_LEN: Final = 1024
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Printable ASCII without spaces: what can travel in an HTTP header unmodified.
_KEY_CHARS: Final = re.compile(r"[\x21-\x7e]+")

_log = get_logger("harness.providers")


class CredentialSource(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where the key comes from (recorded in the run config; holds no secret)."""

    kind: Literal["file", "env"]
    name: str

    def describe(self) -> str:
        """``credential file '/path'`` or ``credential variable 'NAME'``."""
        noun = "credential file" if self.kind == "file" else "credential variable"
        return f"{noun} {self.name!r}"


def _spellings(char: str) -> str:
    """A regex for one key character as it may be written in stored text: itself, a JSON
    ``\\uHHHH`` escape behind any number of backslashes (JSON inside JSON), a backslash escape
    (``\\/``, ``\\"``, ``\\\\``) or a percent escape."""
    code = ord(char)
    hexes = "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{code:04x}")
    pct = "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{code:02x}")
    options = [re.escape(char), r"\\+u" + hexes, "%" + pct]
    if char in '"/\\':
        options.append(r"\\+" + re.escape(char))
    return "(?:" + "|".join(options) + ")"


def key_pattern(key: str) -> re.Pattern[str]:
    """Every spelling of ``key`` that text can carry and a JSON or URL decoder turns back into
    the key: raw, JSON-escaped (any character, at any depth of nesting) or percent-escaped."""
    return re.compile("".join(_spellings(c) for c in key))


class KeyScan:
    """Finds one key, in any spelling ``key_pattern`` knows, in text or bytes.

    Built from a ``Credential`` for the time of a scan (audit, export, a store write); holds the
    key only inside its compiled patterns and never shows it.
    """

    __slots__ = ("_bytes", "_text")

    def __init__(self, key: str) -> None:
        self._text = key_pattern(key)
        self._bytes = re.compile(self._text.pattern.encode("ascii"))

    def sub_text(self, text: str) -> tuple[str, bool]:
        """``text`` with every spelling of the key replaced by ``[REDACTED]``, and whether any."""
        clean, count = self._text.subn(REDACTED, text)
        return clean, count > 0

    def sub_bytes(self, data: bytes) -> tuple[bytes, bool]:
        """``data`` with every spelling of the key replaced by ``[REDACTED]``, and whether any."""
        clean, count = self._bytes.subn(REDACTED.encode("ascii"), data)
        return clean, count > 0

    def offsets(self, data: bytes) -> list[int]:
        """Where the key occurs in ``data`` (byte offsets of each spelling found)."""
        return [m.start() for m in self._bytes.finditer(data)]

    def found_in(self, data: bytes) -> bool:
        """Whether the key occurs in ``data`` in any spelling."""
        return self._bytes.search(data) is not None

    def __repr__(self) -> str:
        return "KeyScan(key=[REDACTED])"

    def __reduce__(self) -> NoReturn:
        raise TypeError("a KeyScan cannot be pickled")


class Credential:
    """An API key and its source. The key is revealed only to the HTTP client."""

    __slots__ = ("_key", "_scan", "source")

    def __init__(self, key: str, source: CredentialSource) -> None:
        self._key = key
        self._scan = KeyScan(key)
        self.source = source

    def reveal(self) -> str:
        """The key itself: pass it to the client, never to a log, record or child."""
        return self._key

    def scan(self) -> KeyScan:
        """The matcher of the key's spellings (raw, JSON- or percent-escaped)."""
        return self._scan

    def redact(self, text: str) -> str:
        """``text`` with every spelling of the key replaced by ``[REDACTED]``."""
        return self._scan.sub_text(text)[0]

    def redact_bytes(self, data: bytes) -> tuple[bytes, bool]:
        """``data`` with every spelling of the key masked, and whether one occurred."""
        return self._scan.sub_bytes(data)

    def redact_value(self, value: Any) -> tuple[Any, bool]:
        """A JSON-like ``value`` with the key masked in every string (object keys included),
        and whether one occurred."""
        if isinstance(value, str):
            return self._scan.sub_text(value)
        if isinstance(value, dict):
            found = False
            clean: dict[Any, Any] = {}
            for k, v in value.items():
                k2, a = self.redact_value(k)
                v2, b = self.redact_value(v)
                clean[k2] = v2
                found = found or a or b
            return (clean, True) if found else (value, False)
        if isinstance(value, (list, tuple)):
            parts = [self.redact_value(v) for v in value]
            if any(b for _, b in parts):
                return type(value)(v for v, _ in parts), True
            return value, False
        return value, False

    def __repr__(self) -> str:
        return f"Credential(source={self.source.describe()}, key={REDACTED})"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Credential cannot be pickled")


def scrub_ambient(environ: MutableMapping[str, str] | None = None) -> tuple[str, ...]:
    """Remove every ``GOOGLE_*``/``GEMINI_*`` variable; return the removed names (sorted)."""
    env = os.environ if environ is None else environ
    names = sorted(name for name in env if name.upper().startswith(AMBIENT_PREFIXES))
    for name in names:
        del env[name]
    if names:
        _log.info("provider.environment.scrubbed", names=names)
    return tuple(names)


def _checked(key: str, source: CredentialSource) -> str:
    key = key.strip()
    if not key:
        raise CredentialError(f"{source.describe()} is empty")
    if len(key) > _MAX_KEY_LEN or _KEY_CHARS.fullmatch(key) is None:
        raise CredentialError(
            f"{source.describe()} must hold one API key: a single line of printable ASCII "
            f"without spaces, at most {_MAX_KEY_LEN} characters"
        )
    return key


def _read_file(source: CredentialSource) -> str:
    path = Path(source.name)
    try:
        with path.open("rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            data = handle.read()
    except FileNotFoundError as e:
        raise CredentialError(f"{source.describe()} does not exist") from e
    except IsADirectoryError as e:
        raise CredentialError(f"{source.describe()} is a directory") from e
    except OSError as e:
        raise CredentialError(f"cannot read {source.describe()}: {e.strerror}") from e
    if mode & 0o077:
        # Readable (or writable) by others than its owner: the key may already be shared.
        _log.warning(
            "provider.credential.file_open_to_others",
            name=path.name,
            mode=oct(mode & 0o777),
            fix=f"chmod 600 {path.name}",
        )
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        # No chaining: the decode error would quote the offending bytes of the file.
        raise CredentialError(
            f"{source.describe()} must hold one API key: a single line of printable ASCII "
            f"without spaces, at most {_MAX_KEY_LEN} characters"
        ) from None


def load_credential(
    source: CredentialSource, environ: MutableMapping[str, str] | None = None
) -> Credential:
    """Read the key from ``source``.

    A variable named by ``source`` is removed from the environment after it is read.

    Raises:
        CredentialError: when the source is missing, unreadable, empty or not one key.
    """
    env = os.environ if environ is None else environ
    if source.kind == "file":
        raw = _read_file(source)
    else:
        if _ENV_NAME.fullmatch(source.name) is None:
            raise CredentialError(f"{source.describe()} is not a valid variable name")
        inherited = None if source.name in env else inherited_key(source.name)
        if inherited is not None:
            # Moved out of the environment by a re-execution before any provider call.
            raw = inherited
        elif source.name not in env:
            raise CredentialError(f"{source.describe()} is not set")
        else:
            raw = env.pop(source.name)
    credential = Credential(_checked(raw, source), source)
    # A file is logged by its name only: no log line carries the absolute path of a key file.
    shown = Path(source.name).name if source.kind == "file" else source.name
    _log.info("provider.credential.loaded", source=source.kind, name=shown)
    return credential
