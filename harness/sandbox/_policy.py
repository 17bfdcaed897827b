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
from typing import Annotated, Any, Final, Literal

import msgspec

from harness.canonical import Domain, digest_bytes
from harness.errors import SandboxPolicyError
from harness.resources import data_path

__all__ = [
    "LINUX_POLICY_SCHEMA",
    "NO_TASK_CAP",
    "LandlockSpec",
    "LimitsSpec",
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
    "scopes_closed_by_seccomp",
]

LINUX_POLICY_SCHEMA: Final = "harness.sandbox.linux-policy.v2"
MAX_POLICY_BYTES: Final = 1 << 20

Namespace = Literal["user", "net", "mount", "ipc", "uts", "pid"]
Scope = Literal["abstract_unix_socket", "signal"]
_PLACEHOLDERS: Final = frozenset({"{interpreter_prefix}", "{tool_code}"})
NO_TASK_CAP: Final = (
    "none: this tier cannot cap a call's threads and processes (no user namespace of its own, "
    "and no cgroup with the pids controller can be made here); the userns tier is preferred"
)
"""What ``describe`` and ``probe`` say of a tier without a task cap."""


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


class LimitsSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Resource caps of one call, applied as soft = hard resource limits in the child.

    ``tasks`` (threads and processes, ``RLIMIT_NPROC``) holds only in a tier with a user
    namespace of its own: elsewhere the kernel counts every process of the user, not one call.
    """

    address_space_bytes: Annotated[int, msgspec.Meta(ge=1 << 26)]
    tasks: Annotated[int, msgspec.Meta(ge=4)]
    file_size_bytes: Annotated[int, msgspec.Meta(ge=1)]
    cpu_seconds: Annotated[int, msgspec.Meta(ge=1)]
    open_files: Annotated[int, msgspec.Meta(ge=16)]


class LandlockSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Landlock: the read allowlist, the read-write allowlist, TCP and scopes."""

    min_abi: int
    read: tuple[str, ...]
    read_write: tuple[str, ...]
    deny_tcp: bool
    scopes: tuple[Scope, ...]


class SeccompSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Seccomp: syscalls answered EPERM or ENOSYS, process creation, signals to others.

    ``self_only`` maps a syscall to the index of its pid argument: any pid but 0 (the caller)
    is EPERM. ``deny_commands`` maps ``fcntl``/``ioctl`` to command numbers answered EPERM
    (compared on the low 32 bits, as the kernel reads them).
    """

    deny: tuple[str, ...]
    unified_numbers: dict[str, int]
    self_only: dict[str, Annotated[int, msgspec.Meta(ge=0, le=5)]]
    deny_commands: dict[Literal["fcntl", "ioctl"], tuple[int, ...]]
    enosys: tuple[str, ...]
    deny_process_clone: bool
    signal_only_self: tuple[str, ...]


class LinuxPolicy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole Linux policy file."""

    schema: str
    about: str
    tiers: tuple[TierSpec, ...]
    # ``none``: a zygote that dies or cannot prove its tier stops every call (fail closed);
    # ``spawn``: calls then spawn a fresh interpreter each, under the same tier.
    zygote_fallback: Literal["none", "spawn"] = "none"
    limits: LimitsSpec
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


# What closes each Landlock scope where the kernel's Landlock lacks it (ABI < 6).
_SIGNAL_SELF_ONLY: Final = frozenset(
    {"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"}
)
_SIGNAL_DENY: Final = frozenset({"pidfd_send_signal", "pidfd_open"})
_F_SETOWN: Final = 8
_F_SETOWN_EX: Final = 15
_FIOSETOWN: Final = 0x8901
_SIOCSPGRP: Final = 0x8902


def scopes_closed_by_seccomp(seccomp: SeccompSpec) -> tuple[Scope, ...]:
    """The Landlock scopes whose holes this seccomp filter closes on its own.

    ``signal``: signals, pidfd signals and SIGIO/SIGURG (an fd's owner set by ``F_SETOWN``,
    ``F_SETOWN_EX``, ``FIOSETOWN`` or ``SIOCSPGRP``) reach no process but the caller.
    ``abstract_unix_socket``: no socket can be created at all.
    """
    closed: list[Scope] = []
    if "socket" in seccomp.deny:
        closed.append("abstract_unix_socket")
    commands = seccomp.deny_commands
    if (
        set(seccomp.signal_only_self) >= _SIGNAL_SELF_ONLY
        and set(seccomp.deny) >= _SIGNAL_DENY
        and set(commands.get("fcntl", ())) >= {_F_SETOWN, _F_SETOWN_EX}
        and set(commands.get("ioctl", ())) >= {_FIOSETOWN, _SIOCSPGRP}
    ):
        closed.append("signal")
    return tuple(closed)


def instantiate_tier(
    policy: LinuxPolicy,
    tier_name: str,
    *,
    interpreter_prefix: str,
    tool_code: str,
    extra_read: tuple[str, ...] = (),
    task_cgroup: str | None = None,
) -> dict[str, Any]:
    """The child's view of one tier: every placeholder replaced by a resolved absolute path.

    Args:
        policy: the loaded policy.
        tier_name: which tier.
        interpreter_prefix: resolved prefix of the child's interpreter (its stdlib lives there).
        tool_code: resolved ``harness`` package directory (the tool code and the worker).
        extra_read: further resolved paths to allow reading (``sandbox exec`` adds its file).
        task_cgroup: the directory each call's child makes its capped cgroup in
            (``_cgroup.TaskCgroup``); used only by a tier without a user namespace.

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
            "closed_by_seccomp": list(scopes_closed_by_seccomp(policy.seccomp))
            if tier.seccomp
            else [],
        }
    seccomp: dict[str, Any] | None = None
    if tier.seccomp:
        seccomp = msgspec.to_builtins(policy.seccomp)
    caps = policy.limits
    return {
        "tier": tier.name,
        "unshare": list(tier.unshare),
        "limits": {
            "address_space_bytes": caps.address_space_bytes,
            # RLIMIT_NPROC counts one call alone only inside a user namespace of its own;
            # elsewhere a cgroup of the call's own caps it, where one can be made.
            "tasks": caps.tasks if "user" in tier.unshare else None,
            "task_cgroup": {"path": task_cgroup, "max": caps.tasks}
            if task_cgroup is not None and "user" not in tier.unshare
            else None,
            "file_size_bytes": caps.file_size_bytes,
            "cpu_seconds": caps.cpu_seconds,
            "open_files": caps.open_files,
        },
        "readonly_root": tier.readonly_root,
        "not_dumpable": tier.not_dumpable,
        "drop_capabilities": tier.drop_capabilities,
        "no_new_privs": tier.no_new_privs,
        "landlock": landlock,
        "seccomp": seccomp,
    }
