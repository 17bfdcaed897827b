"""The pinned Linux policy file: loading, refusal of malformed policies, digests, instantiation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.canonical import Domain, digest_bytes, is_digest
from harness.errors import SandboxPolicyError
from harness.sandbox import default_linux_policy_path, load_linux_policy
from harness.sandbox._policy import instantiate_tier


def _policy() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(default_linux_policy_path().read_text())
    return loaded


def _write(tmp_path: Path, policy: dict[str, Any]) -> Path:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(policy))
    return path


def test_committed_policy_loads_and_its_digest_is_over_the_bytes() -> None:
    loaded = load_linux_policy()
    data = default_linux_policy_path().read_bytes()
    assert loaded.digest == digest_bytes(Domain.SANDBOX_PROFILE, data)
    assert is_digest(loaded.digest)
    assert [t.name for t in loaded.policy.tiers] == ["userns", "landlock"]
    assert loaded.policy.landlock.read_write == ("/dev/null",)
    assert {"socket", "socketpair", "execve", "ptrace", "unshare", "mount"} <= set(
        loaded.policy.seccomp.deny
    )


def test_digest_changes_with_any_byte(tmp_path: Path) -> None:
    data = default_linux_policy_path().read_bytes()
    path = tmp_path / "policy.json"
    path.write_bytes(data.replace(b'"min_abi": 3', b'"min_abi": 4'))
    assert load_linux_policy(path).digest != load_linux_policy().digest
    path.write_bytes(data + b"\n")  # even whitespace: the bytes are what is pinned
    assert load_linux_policy(path).digest != load_linux_policy().digest


def _set(path: tuple[str | int, ...], value: Any) -> Any:
    def mutate(policy: dict[str, Any]) -> None:
        node: Any = policy
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return mutate


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_set(("schema",), "other"), r"schema is 'other', expected"),
        (_set(("extra",), 1), r"Object contains unknown field `extra`"),
        (_set(("tiers",), []), r": no tiers$"),
        (_set(("tiers", 1, "name"), "userns"), r"tier names must be non-empty and distinct$"),
        (_set(("tiers", 0, "unshare"), ["user", "net"]), r"read-only without a mount namespace$"),
        (_set(("tiers", 0, "unshare"), ["net", "mount"]), r"without a user namespace$"),
        (
            _set(("tiers", 0, "unshare"), ["user", "cgroup"]),
            r"Invalid enum value 'cgroup' - at `\$.tiers\[0\].unshare\[1\]`$",
        ),
        (_set(("tiers", 1, "no_new_privs"), False), r"needs no_new_privs for Landlock"),
        (_set(("landlock", "read"), ["relative/path"]), r"'relative/path' is not absolute$"),
        (_set(("landlock", "read_write"), ["/dev/null", "/tmp"]), r"only writable path must be"),
        (_set(("seccomp", "deny"), "socket"), r"Expected `array`, got `str`"),
    ],
    ids=[
        "schema",
        "unknown-field",
        "no-tiers",
        "duplicate-tier",
        "ro-without-mount-ns",
        "ns-without-userns",
        "unknown-namespace",
        "landlock-without-nnp",
        "relative-path",
        "writable-tmp",
        "deny-not-list",
    ],
)
def test_malformed_policy_is_refused(tmp_path: Path, mutate: Any, message: str) -> None:
    policy = _policy()
    mutate(policy)
    with pytest.raises(SandboxPolicyError, match=message):
        load_linux_policy(_write(tmp_path, policy))


def test_unreadable_or_non_json_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxPolicyError, match=r"^cannot read the Linux sandbox policy"):
        load_linux_policy(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SandboxPolicyError, match=r"is not JSON"):
        load_linux_policy(bad)


def test_instantiate_fills_placeholders_and_drops_disabled_layers() -> None:
    policy = load_linux_policy().policy
    tier = instantiate_tier(
        policy, "userns", interpreter_prefix="/opt/py", tool_code="/p/harness", extra_read=("/f",)
    )
    assert tier["tier"] == "userns"
    assert tier["landlock"]["read"][:2] == ["/opt/py", "/p/harness"]
    assert tier["landlock"]["read"][-1] == "/f"
    assert not any("{" in p for p in tier["landlock"]["read"])
    assert list(tier["seccomp"]["deny"]) == list(policy.seccomp.deny)
    with pytest.raises(SandboxPolicyError, match=r"^no tier 'nope' in the Linux sandbox policy"):
        instantiate_tier(policy, "nope", interpreter_prefix="/", tool_code="/")


def test_a_task_cgroup_is_given_only_to_a_tier_without_a_user_namespace() -> None:
    policy = load_linux_policy().policy
    landlock = instantiate_tier(
        policy, "landlock", interpreter_prefix="/opt/py", tool_code="/p", task_cgroup="/cg/x"
    )["limits"]
    assert landlock["tasks"] is None  # RLIMIT_NPROC would count the whole user here
    assert landlock["task_cgroup"] == {"path": "/cg/x", "max": policy.limits.tasks}
    userns = instantiate_tier(
        policy, "userns", interpreter_prefix="/opt/py", tool_code="/p", task_cgroup="/cg/x"
    )["limits"]
    assert userns["tasks"] == policy.limits.tasks
    assert userns["task_cgroup"] is None
    plain = instantiate_tier(policy, "landlock", interpreter_prefix="/", tool_code="/")
    assert plain["limits"]["task_cgroup"] is None
