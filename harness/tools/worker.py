"""Entry point of the fresh child that runs one synthetic tool call.

Run as ``<interpreter> -I -S -B <this file> [--confine POLICY_JSON] [--run FILE]``. The child
puts only the project root on ``sys.path``, confines itself when the parent passed a policy
(Linux; on macOS ``sandbox-exec`` confines it from outside), then reads one JSON request from
stdin, ``{"tool_id": str, "args": object, "world": object}``, and writes one JSON reply to
stdout: ``{"ok": true, "response": ...}`` or ``{"ok": false, "error": {"kind", "message"}}``.

The tool id ``echo`` answers with its args (the probes' positive control and the benchmark);
any other id goes to ``harness.tools.catalog.call_tool(world, tool_id, args)``, imported only
after confinement. ``--run FILE`` runs a Python file as ``__main__`` instead of a tool call,
under the same confinement (``harness sandbox exec``).

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
    "EXIT_USAGE",
    "MAX_REQUEST_BYTES",
    "main",
]

MAX_REQUEST_BYTES: Final = 32 * 1024 * 1024
EXIT_OK: Final = 0
EXIT_USAGE: Final = 119
EXIT_BAD_REQUEST: Final = 120
EXIT_CONFINE_FAILED: Final = 121

_REQUEST_KEYS: Final = frozenset({"tool_id", "args", "world"})


def _project_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _confine(root: str, policy_json: str) -> None:
    # Loaded by path: importing the ``harness.sandbox`` package would pull in the parent side
    # (structlog, blake3), which ``-S`` cannot import and start-up cannot afford. The loader
    # still uses the module's cached bytecode; ``importlib.util`` would cost more than it does.
    from importlib.machinery import PathFinder, SourceFileLoader

    name = "_harness_sandbox_confine"
    path = os.path.join(root, "harness", "sandbox", "_confine.py")
    module = type(sys)(name)
    module.__file__ = path
    SourceFileLoader(name, path).exec_module(module)
    policy = json.loads(policy_json)
    # Landlock allows reading the tool code but not listing the project root, which the import
    # system lists once to find ``harness``: fill that cache now (this runs no project code).
    PathFinder.find_spec("harness", [root])
    try:
        module.apply(policy)
    except module.ConfineError as e:
        sys.stderr.write(f"sandbox: {e}\n")
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
        return {
            "ok": False,
            "error": {"kind": "tool_exception", "message": f"{type(e).__name__}: {e}"},
        }
    return {"ok": True, "response": response}


def main(argv: list[str]) -> int:
    """Run one tool call (or ``--run FILE``) and return the process exit status."""
    root = _project_root()
    sys.path.insert(0, root)
    policy_json: str | None = None
    run_file: str | None = None
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag in ("--confine", "--run") and args:
            value = args.pop(0)
            if flag == "--confine":
                policy_json = value
            else:
                run_file = value
        else:
            sys.stderr.write(f"worker: unknown argument {flag!r}\n")
            return EXIT_USAGE
    if policy_json is not None:
        _confine(root, policy_json)
    if run_file is not None:
        import runpy

        sys.argv = [run_file]
        runpy.run_path(run_file, run_name="__main__")
        return EXIT_OK
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
