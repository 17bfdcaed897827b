"""Entry point of the fresh child that runs one synthetic tool call.

Run as ``<interpreter> -I -S -B <this file> [--parent PID] [--confine POLICY_JSON]
[--run-fd N --run-name NAME]``. The child puts only the project root on ``sys.path``, confines
itself when the parent passed a policy (Linux, which also ties it to the parent ``PID``; on
macOS ``sandbox-exec`` confines it from outside), then reads one JSON request from
stdin, ``{"tool_id": str, "args": object, "world": object}``, and writes one JSON reply to
stdout: ``{"ok": true, "response": ...}`` or ``{"ok": false, "error": {"kind", "message"}}``.

The tool id ``echo`` answers with its args (the probes' positive control and the benchmark);
any other id goes to ``harness.tools.catalog.call_tool(world, tool_id, args)``, imported only
after confinement. ``--run-fd N`` runs the Python source open at descriptor N (opened by the
parent; its path is never looked up here) as ``__main__`` instead of a tool call, under the
same confinement (``harness sandbox exec``). A call that runs into a per-call resource cap
(memory, threads, file size, open files) is answered as the error kind ``resource_limit``, or
with :data:`EXIT_RESOURCE` when no reply can be written.

Standard library only, and nothing imported that the call does not need, so start-up stays
near the bare interpreter's. This module does not spawn, time or judge anything: the parent
(``harness.sandbox``) owns limits, timeouts and verdicts, and imports the constants below.
"""

from __future__ import annotations

import json
import os
import sys

# ``typing`` costs milliseconds to import, on every call: only the type checker sees it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

__all__ = [
    "EXIT_BAD_REQUEST",
    "EXIT_CONFINE_FAILED",
    "EXIT_OK",
    "EXIT_RESOURCE",
    "EXIT_USAGE",
    "MAX_REQUEST_BYTES",
    "RESOURCE_LIMIT_KIND",
    "confine",
    "entry",
    "load_confine",
    "main",
    "parse_policy",
]

MAX_REQUEST_BYTES: Final = 32 * 1024 * 1024
EXIT_OK: Final = 0
EXIT_USAGE: Final = 119
EXIT_BAD_REQUEST: Final = 120
EXIT_CONFINE_FAILED: Final = 121
EXIT_RESOURCE: Final = 122
RESOURCE_LIMIT_KIND: Final = "resource_limit"
# errno values meaning a per-call cap was hit: out of memory, file too large, too many files.
_RESOURCE_ERRNOS: Final = frozenset({12, 27, 24})

_REQUEST_KEYS: Final = frozenset({"tool_id", "args", "world"})


def _project_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _is_resource_error(e: BaseException) -> bool:
    """True when ``e`` is a per-call cap biting, not a fault of the tool."""
    if isinstance(e, MemoryError):
        return True
    if isinstance(e, OSError) and e.errno in _RESOURCE_ERRNOS:
        return True
    return isinstance(e, RuntimeError) and "can't start new thread" in str(e)


def load_confine(root: str) -> Any:
    """The child-side confinement module (``harness/sandbox/_confine.py``), loaded once.

    Loaded by path: importing the ``harness.sandbox`` package would pull in the parent side
    (structlog, blake3), which ``-S`` cannot import and start-up cannot afford. The loader
    still uses the module's cached bytecode; ``importlib.util`` would cost more than it does.
    A zygote loads it before it forks, so its children find it here already.
    """
    name = "_harness_sandbox_confine"
    module = sys.modules.get(name)
    if module is not None:
        return module
    from importlib.machinery import SourceFileLoader

    path = os.path.join(root, "harness", "sandbox", "_confine.py")
    module = type(sys)(name)
    module.__file__ = path
    SourceFileLoader(name, path).exec_module(module)
    sys.modules[name] = module
    return module


_POLICIES: dict[str, Any] = {}


def parse_policy(policy_json: str) -> Any:
    """The tier the parent passed, decoded once per process image (a zygote decodes it first)."""
    policy = _POLICIES.get(policy_json)
    if policy is None:
        policy = _POLICIES[policy_json] = json.loads(policy_json)
    return policy


def confine(
    root: str, policy_json: str, parent: int | None, report_fd: int | None = None
) -> str | None:
    """Apply the tier to this process; None when it holds, else the one line saying why not.

    A process that gets a reason must not run the tool (it exits :data:`EXIT_CONFINE_FAILED`
    once it can say why).
    """
    from importlib.machinery import PathFinder

    module = load_confine(root)
    policy = parse_policy(policy_json)
    # Landlock allows reading the tool code but not listing the project root, which the import
    # system lists once to find ``harness``: fill that cache now (this runs no project code).
    PathFinder.find_spec("harness", [root])
    try:
        module.apply(policy, parent=parent, report_fd=report_fd)
    except module.ConfineError as e:
        return f"sandbox: {e}"
    return None


def _confine(root: str, policy_json: str, parent: int | None) -> None:
    why = confine(root, policy_json, parent)
    if why is not None:
        sys.stderr.write(f"{why}\n")
        sys.stderr.flush()
        os._exit(EXIT_CONFINE_FAILED)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not allowed")


def _reply(obj: dict[str, Any]) -> None:
    data = json.dumps(obj, allow_nan=False, sort_keys=True, separators=(",", ":"))
    sys.stdout.write(data)
    sys.stdout.flush()


def _bad_request(message: str) -> int:
    sys.stderr.write(f"worker: bad request: {message}\n")
    sys.stderr.flush()
    return EXIT_BAD_REQUEST


def _call(request: dict[str, Any]) -> dict[str, Any]:
    tool_id = request["tool_id"]
    if tool_id == "echo":
        return {"ok": True, "response": request["args"]}
    try:
        from harness.tools.catalog import call_tool
    except Exception as e:  # noqa: BLE001 - a missing or broken catalog fails the call, not the child
        return {"ok": False, "error": {"kind": "catalog_unavailable", "message": repr(e)}}
    try:
        response = call_tool(request["world"], tool_id, request["args"])
    except Exception as e:  # noqa: BLE001 - a tool's exception is its reply, not a crash
        if _is_resource_error(e):
            return {
                "ok": False,
                "error": {"kind": RESOURCE_LIMIT_KIND, "message": f"{type(e).__name__}: {e}"},
            }
        return {
            "ok": False,
            "error": {"kind": "tool_exception", "message": f"{type(e).__name__}: {e}"},
        }
    return {"ok": True, "response": response}


def _run_source(fd: int, name: str) -> int:
    """Run the Python source open at ``fd`` as ``__main__`` (``name`` only labels it)."""
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    code = compile(b"".join(chunks), name, "exec")
    # A module of its own: this worker is ``__main__`` too and keeps its globals.
    module = type(sys)("__main__")
    module.__file__ = name
    sys.modules["__main__"] = module
    sys.argv = [name]
    exec(code, module.__dict__)  # noqa: S102 - running the caller's file is what ``sandbox exec`` is for
    return EXIT_OK


_FLAGS: Final = ("--parent", "--confine", "--run-fd", "--run-name")


def main(argv: list[str]) -> int:
    """Run one tool call (or ``--run-fd N``) and return the process exit status."""
    root = _project_root()
    sys.path.insert(0, root)
    values: dict[str, str] = {}
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag in _FLAGS and args and flag not in values:
            values[flag] = args.pop(0)
        else:
            sys.stderr.write(f"worker: unknown argument {flag!r}\n")
            return EXIT_USAGE
    numbers = {}
    for flag in ("--parent", "--run-fd"):
        if flag in values:
            if not values[flag].isdigit():
                sys.stderr.write(f"worker: {flag} needs a number, got {values[flag]!r}\n")
                return EXIT_USAGE
            numbers[flag] = int(values[flag])
    if "--confine" in values:
        _confine(root, values["--confine"], numbers.get("--parent"))
    if "--run-fd" in numbers:
        return _run_source(numbers["--run-fd"], values.get("--run-name", "<sandbox exec>"))
    data = sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1)
    if len(data) > MAX_REQUEST_BYTES:
        return _bad_request(f"request exceeds {MAX_REQUEST_BYTES} bytes")
    try:
        request = json.loads(data, parse_constant=_refuse_constant)
    except ValueError as e:
        return _bad_request(f"not JSON: {e}")
    if not isinstance(request, dict) or set(request) != _REQUEST_KEYS:
        return _bad_request(f"expected an object with exactly the keys {sorted(_REQUEST_KEYS)}")
    if not isinstance(request["tool_id"], str):
        return _bad_request("tool_id is not a string")
    try:
        _reply(_call(request))
    except (
        TypeError,
        ValueError,
    ) as e:  # the tool answered with something JSON cannot carry (NaN, cycles)
        _reply({"ok": False, "error": {"kind": "unencodable_response", "message": str(e)}})
    return EXIT_OK


def entry(argv: list[str]) -> int:
    """Run :func:`main`; a ``MemoryError`` that escapes it is the call's memory cap."""
    try:
        return main(argv)
    except MemoryError:
        # Whatever was allocated is unwound by now: say why, without allocating much.
        os.write(2, b"worker: MemoryError: the call passed its memory cap\n")
        return EXIT_RESOURCE


if __name__ == "__main__":
    status = entry(sys.argv[1:])
    if "--run-fd" in sys.argv:
        sys.exit(status)  # a file run by ``sandbox exec`` ends as Python programs do
    # A tool call has written its whole reply: skip the interpreter's finalization (several
    # milliseconds of module teardown on every call) once the streams are flushed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
