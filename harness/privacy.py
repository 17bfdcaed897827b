"""Scanning bytes for what must never leave a machine: credentials and local identifiers.

Two scans share one finding type:

- ``credential_findings``: credential-shaped strings (Google API keys, bearer tokens, private key
  blocks, common cloud and forge token formats, ``api_key = ...`` assignments with a long value).
  Used by the audit (nothing credential-shaped may be in a store) and by the export check.
- ``key_findings``: one known key (the run's own, whatever its shape), in every spelling its
  finder knows (``harness.providers.credentials.KeyScan``: raw, JSON- or percent-escaped). Used
  by the audit and the export check when the key is given to them.
- ``local_findings``: local absolute paths (home, root, temp and mount directories, macOS
  ``/Users``, Windows drive paths) and the given user and host names as whole words.

A finding names where (a label and byte offset) and which pattern matched, never the matched
text, so a report about a leaked secret does not leak it again. The patterns are deliberately
shaped (prefix plus length) rather than entropy based: store records are full of 64-hex-digit
digests, which must not count. This module is pure: it takes bytes and names, and performs no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Protocol

import msgspec

__all__ = [
    "CREDENTIAL_PATTERNS",
    "GENERIC_ACCOUNTS",
    "KEY_FINDING",
    "LOCAL_PATH_PATTERNS",
    "KeyFinding",
    "KeyFinder",
    "credential_findings",
    "key_findings",
    "local_findings",
]


class KeyFinding(msgspec.Struct, frozen=True, kw_only=True):
    """One match: where (``label`` and byte ``offset``) and what kind; never the text itself."""

    label: str
    offset: int
    kind: str

    def line(self) -> str:
        """``<label> at byte <offset>: <kind>``."""
        return f"{self.label} at byte {self.offset}: {self.kind}"


CREDENTIAL_PATTERNS: Final[tuple[tuple[str, re.Pattern[bytes]], ...]] = (
    ("Google API key", re.compile(rb"AIza[0-9A-Za-z_\-]{35}")),
    ("Google OAuth token", re.compile(rb"ya29\.[0-9A-Za-z_\-]{20,}")),
    ("private key block", re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("AWS access key id", re.compile(rb"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("GitHub token", re.compile(rb"\bgh[pousr]_[0-9A-Za-z]{30,}")),
    ("GitHub fine-grained token", re.compile(rb"\bgithub_pat_[0-9A-Za-z_]{30,}")),
    ("OpenAI-style secret key", re.compile(rb"\bsk-(?:proj-|ant-)?[0-9A-Za-z_\-]{20,}")),
    ("Slack token", re.compile(rb"\bxox[abposr]-[0-9A-Za-z\-]{10,}")),
    ("bearer token", re.compile(rb"(?i)\bbearer\s+[0-9A-Za-z\-._~+/]{20,}=*")),
    ("API key header", re.compile(rb"(?i)x-goog-api-key\s*[:=]\s*[\"']?[^\s\"'\[]{8,}")),
    (
        "secret assignment",
        re.compile(
            rb"(?i)\b(?:api[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token|password|"
            rb"passwd|client[_-]?secret)\b[\"']?\s*[:=]\s*[\"']?(?!\[REDACTED\])"
            rb"[0-9A-Za-z_\-./+]{16,}"
        ),
    ),
)
"""(kind, pattern) pairs a credential-shaped string matches."""

LOCAL_PATH_PATTERNS: Final[tuple[tuple[str, re.Pattern[bytes]], ...]] = (
    (
        "local absolute path",
        re.compile(
            rb"(?<![0-9A-Za-z_.\-~:/])/(?:home|root|Users|tmp|var/folders|private/var|private/tmp|"
            rb"mnt|media|work|srv|opt/homebrew|run/user)(?:/[^\s\"'<>|,;)\]}]*)?(?=[\s\"'<>|,;)\]}]|$)"
        ),
    ),
    ("Windows drive path", re.compile(rb"\b[A-Za-z]:\\\\?(?:Users|Documents and Settings)\b")),
    ("file URL", re.compile(rb"file://")),
)
"""(kind, pattern) pairs for local absolute paths."""


def _scan(
    label: str, data: bytes, patterns: Iterable[tuple[str, re.Pattern[bytes]]]
) -> list[KeyFinding]:
    found = [
        KeyFinding(label=label, offset=m.start(), kind=kind)
        for kind, pattern in patterns
        for m in pattern.finditer(data)
    ]
    return sorted(found, key=lambda f: (f.offset, f.kind))


def credential_findings(label: str, data: bytes) -> list[KeyFinding]:
    """Every credential-shaped string in ``data`` (``label`` says where the bytes came from)."""
    return _scan(label, data, CREDENTIAL_PATTERNS)


KEY_FINDING: Final = "the run's API key"
"""The finding kind of the run's own key (never the key itself)."""


class KeyFinder(Protocol):
    """Finds one known key in bytes (``KeyScan``), without ever showing it."""

    def offsets(self, data: bytes) -> list[int]:
        """Byte offsets where the key occurs in ``data``, in any spelling the finder knows."""
        ...


def key_findings(label: str, data: bytes, finder: KeyFinder) -> list[KeyFinding]:
    """Every occurrence of the finder's key in ``data``."""
    return [KeyFinding(label=label, offset=o, kind=KEY_FINDING) for o in finder.offsets(data)]


GENERIC_ACCOUNTS: Final = frozenset(
    {"root", "runner", "user", "admin", "ubuntu", "debian", "nobody", "vscode", "localhost"}
)
"""Account and host names that identify no one; matching them would flag ordinary words."""


def local_findings(label: str, data: bytes, names: Iterable[str] = ()) -> list[KeyFinding]:
    """Local absolute paths in ``data``, and each of ``names`` (user, host) as a whole word.

    Names are matched case-insensitively. Names shorter than three characters, and the generic
    ones in ``GENERIC_ACCOUNTS``, are skipped: they would match ordinary text.
    """
    patterns = list(LOCAL_PATH_PATTERNS)
    wanted = {n for n in names if len(n) >= 3 and n.lower() not in GENERIC_ACCOUNTS}
    for name in sorted(wanted):
        word = re.escape(name.encode("utf-8"))
        pattern = re.compile(rb"(?i)(?<![0-9A-Za-z_])" + word + rb"(?![0-9A-Za-z_])")
        patterns.append(("local user or host name", pattern))
    return _scan(label, data, patterns)
