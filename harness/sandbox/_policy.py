"""The pinned sandbox policy files: where they live, their digests, and the Linux policy's schema.

The Linux policy (``sandbox_profiles/linux-tool-worker.json``) is data the child enforces
(``_confine.py``); the Seatbelt profile (``sandbox_profiles/tool-worker.sb``) is text
``sandbox-exec`` enforces. Both are hashed as the bytes on disk under
``Domain.SANDBOX_PROFILE`` (bytes as read, never re-encoded), and those digests are what a
study lock pins and what ``describe()`` reports.

This module reads and checks files and fills in paths; it spawns nothing and judges no
confinement: the probes do that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from harness.canonical import Domain, digest_bytes
from harness.errors import SandboxPolicyError
from harness.resources import data_path

__all__ = [
    "LINUX_POLICY_SCHEMA",
    "LandlockSpec",
    "LinuxPolicy",
    "LoadedPolicy",
    "SeccompSpec",
    "TierSpec",
    "default_linux_policy_path",
    "default_seatbelt_profile_path",
    "instantiate_tier",
    "load_linux_policy",
    "profile_digest",
    "profiles_dir",
    "read_profile_bytes",
]

LINUX_POLICY_SCHEMA: Final = "harness.sandbox.linux-policy.v1"
MAX_POLICY_BYTES: Final = 1 << 20

Namespace = Literal["user", "net", "mount", "ipc", "uts"]
Scope = Literal["abstract_unix_socket", "signal"]
_PLACEHOLDERS: Final = frozenset({"{interpreter_prefix}", "{tool_code}"})


class TierSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One tier: which confinement steps the child applies, in the order of ``_confine``."""

    name: str
    unshare: tuple[Namespace, ...]
    readonly_root: bool
    not_dumpable: bool
    drop_capabilities: bool
    no_new_privs: bool
    landlock: bool
    seccomp: bool


class LandlockSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Landlock: the read allowlist, the read-write allowlist, TCP and scopes."""

    min_abi: int
    read: tuple[str, ...]
    read_write: tuple[str, ...]
    deny_tcp: bool
    scopes: tuple[Scope, ...]


class SeccompSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Seccomp: syscalls answered EPERM or ENOSYS, process creation, signals to others."""

    deny: tuple[str, ...]
    unified_numbers: dict[str, int]
    enosys: tuple[str, ...]
    deny_process_clone: bool
    signal_only_self: tuple[str, ...]


class LinuxPolicy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole Linux policy file."""

    schema: str
    about: str
    tiers: tuple[TierSpec, ...]
    landlock: LandlockSpec
    seccomp: SeccompSpec


class LoadedPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """A policy as loaded: its path, its digest over the bytes read, and its parsed content."""

    path: str
    digest: str
    policy: LinuxPolicy


def profiles_dir() -> Path:
    """The pinned ``sandbox_profiles/`` directory (the checkout's, or the wheel's copy)."""
    return data_path("sandbox_profiles")


def default_linux_policy_path() -> Path:
    """Path of the pinned Linux policy file."""
    return profiles_dir() / "linux-tool-worker.json"


def default_seatbelt_profile_path() -> Path:
    """Path of the pinned macOS Seatbelt profile."""
    return profiles_dir() / "tool-worker.sb"


def read_profile_bytes(path: Path, what: str) -> bytes:
    """Read a policy or profile file, refusing a missing, unreadable or oversized one."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SandboxPolicyError(f"cannot read the {what} {str(path)!r}: {e.strerror}") from e
    if len(data) > MAX_POLICY_BYTES:
        raise SandboxPolicyError(f"the {what} {str(path)!r} exceeds {MAX_POLICY_BYTES} bytes")
    return data


def profile_digest(data: bytes) -> str:
    """Digest of a policy or profile file's bytes, as a lock pins it."""
    return digest_bytes(Domain.SANDBOX_PROFILE, data)


def _check(policy: LinuxPolicy, where: str) -> None:
    if policy.schema != LINUX_POLICY_SCHEMA:
        raise SandboxPolicyError(
            f"{where}: schema is {policy.schema!r}, expected {LINUX_POLICY_SCHEMA!r}"
        )
    if not policy.tiers:
        raise SandboxPolicyError(f"{where}: no tiers")
    names = [t.name for t in policy.tiers]
    if len(set(names)) != len(names) or not all(names):
        raise SandboxPolicyError(f"{where}: tier names must be non-empty and distinct")
    for tier in policy.tiers:
        if tier.readonly_root and "mount" not in tier.unshare:
            raise SandboxPolicyError(
                f"{where}: tier {tier.name!r} remounts / read-only without a mount namespace"
            )
        if tier.unshare and "user" not in tier.unshare:
            raise SandboxPolicyError(
                f"{where}: tier {tier.name!r} unshares namespaces without a user namespace"
            )
        if (tier.landlock or tier.seccomp) and not tier.no_new_privs:
            raise SandboxPolicyError(
                f"{where}: tier {tier.name!r} needs no_new_privs for Landlock and seccomp"
            )
    for path in (*policy.landlock.read, *policy.landlock.read_write):
        if path not in _PLACEHOLDERS and not path.startswith("/"):
            raise SandboxPolicyError(f"{where}: Landlock path {path!r} is not absolute")
    if policy.landlock.read_write != ("/dev/null",):
        raise SandboxPolicyError(f"{where}: the only writable path must be /dev/null")


def load_linux_policy(path: Path | None = None) -> LoadedPolicy:
    """Read, digest and check a Linux policy file (the pinned one by default).

    Raises:
        SandboxPolicyError: when the file is unreadable, not the schema, or inconsistent.
    """
    where = path if path is not None else default_linux_policy_path()
    data = read_profile_bytes(where, "Linux sandbox policy")
    try:
        policy = msgspec.json.decode(data, type=LinuxPolicy)
    except msgspec.ValidationError as e:
        raise SandboxPolicyError(f"Linux sandbox policy {str(where)!r}: {e}") from e
    except msgspec.DecodeError as e:
        raise SandboxPolicyError(f"Linux sandbox policy {str(where)!r} is not JSON: {e}") from e
    _check(policy, f"Linux sandbox policy {str(where)!r}")
    return LoadedPolicy(path=str(where), digest=profile_digest(data), policy=policy)


def instantiate_tier(
    policy: LinuxPolicy,
    tier_name: str,
    *,
    interpreter_prefix: str,
    tool_code: str,
    extra_read: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The child's view of one tier: every placeholder replaced by a resolved absolute path.

    Args:
        policy: the loaded policy.
        tier_name: which tier.
        interpreter_prefix: resolved prefix of the child's interpreter (its stdlib lives there).
        tool_code: resolved ``harness`` package directory (the tool code and the worker).
        extra_read: further resolved paths to allow reading (``sandbox exec`` adds its file).

    Raises:
        SandboxPolicyError: when the tier does not exist in the policy.
    """
    tiers = {t.name: t for t in policy.tiers}
    if tier_name not in tiers:
        raise SandboxPolicyError(
            f"no tier {tier_name!r} in the Linux sandbox policy (tiers: {', '.join(tiers)})"
        )
    tier = tiers[tier_name]
    fill = {"{interpreter_prefix}": interpreter_prefix, "{tool_code}": tool_code}
    landlock: dict[str, Any] | None = None
    if tier.landlock:
        spec = policy.landlock
        landlock = {
            "min_abi": spec.min_abi,
            "read": [fill.get(p, p) for p in spec.read] + list(extra_read),
            "read_write": list(spec.read_write),
            "deny_tcp": spec.deny_tcp,
            "scopes": list(spec.scopes),
        }
    seccomp: dict[str, Any] | None = None
    if tier.seccomp:
        seccomp = msgspec.to_builtins(policy.seccomp)
    return {
        "tier": tier.name,
        "unshare": list(tier.unshare),
        "readonly_root": tier.readonly_root,
        "not_dumpable": tier.not_dumpable,
        "drop_capabilities": tier.drop_capabilities,
        "no_new_privs": tier.no_new_privs,
        "landlock": landlock,
        "seccomp": seccomp,
    }
