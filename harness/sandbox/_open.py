"""Pick and prove the sandbox backend for this machine, or refuse in one sentence.

On Linux the tiers of the pinned policy are tried in order; on macOS the Seatbelt profile is
checked statically and then tried. A backend or tier counts only once a real confined child
has answered the echo control correctly: nothing is assumed from kernel version or flags.
Elsewhere, or when nothing can be proven, :class:`SandboxUnavailableError` says what is
missing. The chosen backend, tier and Landlock ABI are logged (``sandbox.backend``).

This module does not run the denial probes (``_probes`` does, and preflight requires them).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import py_compile
import sys
from pathlib import Path
from typing import Final

from harness.errors import (
    SandboxError,
    SandboxPolicyError,
    SandboxUnavailableError,
    SandboxZygoteError,
)
from harness.log import get_logger
from harness.resources import code_root
from harness.sandbox._backend import ChildBackend, Limits, resolve_interpreter
from harness.sandbox._confine import ConfineError
from harness.sandbox._linux import LinuxBackend, kernel_landlock_abi
from harness.sandbox._policy import (
    default_seatbelt_profile_path,
    load_linux_policy,
    profile_digest,
    read_profile_bytes,
)
from harness.sandbox._result import ToolCallResult
from harness.sandbox._sbpl import check_profile
from harness.sandbox._seatbelt import SANDBOX_EXEC, SeatbeltBackend

__all__ = ["SELF_TEST_TIMEOUT_S", "default_project_root", "open_backend", "self_test"]

SELF_TEST_TIMEOUT_S: Final = 20.0
_log = get_logger("harness.sandbox")


def default_project_root() -> Path:
    """The directory holding the ``harness`` package this process imported."""
    return code_root()


def warm_bytecode(root: Path) -> None:
    """Write fresh bytecode for what every child imports, since a child can write none.

    The child runs with ``-B`` under a read-only view, so a module without a fresh ``.pyc``
    would be compiled again on every call (milliseconds each, with ``PYTHONDONTWRITEBYTECODE``
    set or a tree never imported). Only performance depends on this: a tree that cannot be
    written is left as it is.
    """
    sources = [root / "harness" / "__init__.py"]
    sources += [root / "harness" / "sandbox" / name for name in ("_confine.py", "_zygote.py")]
    sources += sorted((root / "harness" / "tools").glob("*.py"))
    for source in sources:
        cached = Path(importlib.util.cache_from_source(str(source)))
        with contextlib.suppress(OSError, py_compile.PyCompileError):
            if cached.exists() and cached.stat().st_mtime >= source.stat().st_mtime:
                continue
            py_compile.compile(str(source), cfile=str(cached), doraise=True)


def self_test(backend: ChildBackend, *, timeout_s: float = SELF_TEST_TIMEOUT_S) -> str | None:
    """Run the echo control through ``backend``; None when it answered correctly, else why not."""
    args = {"control": "echo", "values": [0, 1.5, "text", None, True, {"nested": []}]}
    result: ToolCallResult = backend.call(
        {"tool_id": "echo", "args": args, "world": {}}, timeout_s=timeout_s
    )
    if not result:
        return f"{result.outcome}: {result.error}"
    if result.response != args:
        return f"the echo control answered {result.response!r}, not its arguments"
    return None


def open_backend(
    *,
    tier: str | None = None,
    policy_path: Path | None = None,
    interpreter: str | os.PathLike[str] | None = None,
    project_root: Path | None = None,
    limits: Limits | None = None,
    self_test_timeout_s: float = SELF_TEST_TIMEOUT_S,
    spawn: bool = False,
) -> ChildBackend:
    """Open the sandbox backend for this machine, proven by a confined echo control.

    On Linux every call's child is forked by a zygote started here (before the caller reads
    any credential) unless ``spawn`` asks for a fresh interpreter per call; macOS always
    spawns one ``sandbox-exec`` child per call.

    Args:
        tier: on Linux, use only this tier of the policy (default: the first that works).
        policy_path: the Linux policy or Seatbelt profile (default: the pinned file).
        interpreter: the child's interpreter (default: this one, resolved to its binary).
        project_root: the directory holding the ``harness`` package the child runs.
        limits: request, reply and stderr size limits.
        self_test_timeout_s: wall-clock limit for each proving child.
        spawn: Linux: spawn a fresh interpreter per call instead of forking from a zygote.

    Raises:
        SandboxUnavailableError: when no backend or tier can be proven here.
        SandboxPolicyError: when the policy or profile file is unusable.
        SandboxError: when the interpreter is not an executable binary.
    """
    interp = resolve_interpreter(interpreter if interpreter is not None else sys.executable)
    root = (project_root if project_root is not None else default_project_root()).resolve()
    if not (root / "harness" / "tools" / "worker.py").is_file():
        raise SandboxError(f"{str(root)!r} holds no harness/tools/worker.py")
    lim = limits if limits is not None else Limits()
    warm_bytecode(root)
    platform: str = sys.platform  # a plain str: the checker must not drop the other branches
    if platform == "linux":
        return _open_linux(tier, policy_path, interp, root, lim, self_test_timeout_s, spawn=spawn)
    if platform == "darwin":
        if tier not in (None, "seatbelt"):
            raise SandboxPolicyError(f"macOS has only the tier 'seatbelt', not {tier!r}")
        return _open_seatbelt(policy_path, interp, root, lim, self_test_timeout_s)
    raise SandboxUnavailableError(
        f"cannot sandbox tool calls on platform {platform!r}: only Linux and macOS have a "
        "sandbox backend"
    )


def _open_linux(
    tier: str | None,
    policy_path: Path | None,
    interp: Path,
    root: Path,
    limits: Limits,
    timeout_s: float,
    *,
    spawn: bool,
) -> ChildBackend:
    loaded = load_linux_policy(policy_path)
    fallback = loaded.policy.zygote_fallback == "spawn"
    names = [t.name for t in loaded.policy.tiers]
    if tier is not None:
        if tier not in names:
            raise SandboxPolicyError(
                f"no tier {tier!r} in the Linux sandbox policy (tiers: {', '.join(names)})"
            )
        names = [tier]
    abi = kernel_landlock_abi()
    reasons: list[str] = []
    for name in names:
        try:
            backend = LinuxBackend(
                loaded=loaded,
                tier=name,
                interpreter=interp,
                project_root=root,
                limits=limits,
                landlock_abi=abi,
            )
        except ConfineError as e:
            _log.warning("sandbox.tier_unavailable", tier=name, reason=str(e))
            reasons.append(f"tier {name!r}: {e}")
            continue
        why = _prove(backend, spawn=spawn, fallback=fallback, timeout_s=timeout_s)
        if why is None:
            info = backend.describe()
            _log.info(
                "sandbox.backend",
                backend=info.backend,
                tier=info.tier,
                mode=info.mode,
                landlock_abi=info.landlock_abi,
                profile_digest=info.profile_digest,
            )
            return backend
        backend.close()
        _log.warning("sandbox.tier_unavailable", tier=name, reason=why)
        reasons.append(f"tier {name!r}: {why}")
    raise SandboxUnavailableError(
        "cannot sandbox tool calls on this machine, no tier of the Linux policy can be proven "
        f"(Landlock ABI {abi or 'unavailable'}; " + "; ".join(reasons) + ")"
    )


def _prove(backend: LinuxBackend, *, spawn: bool, fallback: bool, timeout_s: float) -> str | None:
    """Start the zygote (unless ``spawn``) and run the echo control; None when it answered.

    A zygote that cannot start or whose child fails the control is the tier's failure, unless
    the policy allows the spawn fallback: then the same tier is proven by a spawned child.
    """
    if not spawn:
        try:
            backend.start_zygote()
        except SandboxZygoteError as e:
            if not fallback:
                return f"{e} (the policy allows no spawn fallback)"
            _log.warning("sandbox.zygote_fallback", tier=backend.tier, reason=str(e))
            return self_test(backend, timeout_s=timeout_s)
    why = self_test(backend, timeout_s=timeout_s)
    if why is not None and not spawn and fallback:
        _log.warning("sandbox.zygote_fallback", tier=backend.tier, reason=why)
        backend.close()
        return self_test(backend, timeout_s=timeout_s)
    return why


def _open_seatbelt(
    profile_path: Path | None,
    interp: Path,
    root: Path,
    limits: Limits,
    timeout_s: float,
) -> ChildBackend:
    if not os.access(SANDBOX_EXEC, os.X_OK):
        raise SandboxUnavailableError(f"cannot sandbox tool calls: {SANDBOX_EXEC} is missing")
    path = profile_path if profile_path is not None else default_seatbelt_profile_path()
    data = read_profile_bytes(path, "Seatbelt profile")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SandboxPolicyError(f"the Seatbelt profile {str(path)!r} is not UTF-8") from e
    problems = check_profile(text)
    if problems:
        raise SandboxPolicyError(
            f"the Seatbelt profile {str(path)!r} is not deny-default as required: {problems[0]}"
        )
    backend = SeatbeltBackend(
        profile_text=text,
        profile_path=str(path),
        profile_digest=profile_digest(data),
        interpreter=interp,
        project_root=root,
        limits=limits,
    )
    why = self_test(backend, timeout_s=timeout_s)
    if why is not None:
        raise SandboxUnavailableError(
            f"cannot sandbox tool calls: sandbox-exec with the pinned profile failed ({why})"
        )
    info = backend.describe()
    _log.info(
        "sandbox.backend",
        backend=info.backend,
        tier=info.tier,
        landlock_abi=None,
        profile_digest=info.profile_digest,
    )
    return backend
