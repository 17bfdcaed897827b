"""Explicit credential input: the API key comes only from a source the user names.

Two sources exist: a file (``--credential-file PATH``, one key on one line) or an environment
variable (``--credential-env NAME``). Ambient ``GOOGLE_*``/``GEMINI_*`` variables are never read
as a key: ``scrub_ambient`` removes them from the process environment, so neither google-genai
(which reads ``GOOGLE_API_KEY``, ``GEMINI_API_KEY``, ``GOOGLE_GENAI_*``, ``GOOGLE_GEMINI_BASE_URL``
silently) nor any child process can see them. A key read from a named variable is removed from
the environment too, so no child inherits it.

The key lives only inside a ``Credential``: its repr names the source, never the key; it refuses
pickling; it can mask itself out of any string or byte string before that is recorded. Error
messages name the source and what is wrong with it, never any content.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from pathlib import Path
from typing import Final, Literal, NoReturn

import msgspec

from harness._credential_pipe import inherited_key
from harness.errors import CredentialError
from harness.log import get_logger

__all__ = [
    "AMBIENT_PREFIXES",
    "REDACTED",
    "Credential",
    "CredentialSource",
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


class Credential:
    """An API key and its source. The key is revealed only to the HTTP client."""

    __slots__ = ("_key", "source")

    def __init__(self, key: str, source: CredentialSource) -> None:
        self._key = key
        self.source = source

    def reveal(self) -> str:
        """The key itself: pass it to the client, never to a log, record or child."""
        return self._key

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of the key replaced by ``[REDACTED]``."""
        return text.replace(self._key, REDACTED)

    def redact_bytes(self, data: bytes) -> tuple[bytes, bool]:
        """``data`` with the key masked, and whether it occurred."""
        needle = self._key.encode("ascii")
        if needle not in data:
            return data, False
        return data.replace(needle, REDACTED.encode("ascii")), True

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
