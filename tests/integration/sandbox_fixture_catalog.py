"""A catalog-like module for the sandbox tests: tools that misbehave on purpose.

The tests copy the project to a temporary root and install this file there as
``harness/tools/catalog.py`` (never in the real tree), so the worker dispatches to it exactly as
it dispatches to the real catalog. Standard library only, like the real one.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any


def call_tool(world: Any, tool_id: str, args: Any) -> dict[str, Any]:
    """Answer ``tool_id`` with ``args``; each tool fails in its own way."""
    if tool_id == "world_value":
        return {"status": "ok", "value": world[args["key"]]}
    if tool_id == "sleep":
        time.sleep(float(args["seconds"]))
        return {"status": "ok"}
    if tool_id == "exit":
        sys.stdout.flush()
        os._exit(int(args["code"]))
    if tool_id == "kill_self":
        os.kill(os.getpid(), signal.SIGKILL)
    if tool_id == "garbage":
        sys.stdout.write(str(args["text"]))
        sys.stdout.flush()
        os._exit(0)
    if tool_id == "huge":
        chunk = "x" * 65536
        for _ in range(int(args["chunks"])):
            sys.stdout.write(chunk)
        sys.stdout.flush()
        os._exit(0)
    if tool_id == "stderr_flood":
        sys.stderr.write("e" * int(args["bytes"]) + "\nlast line of stderr\n")
        sys.stderr.flush()
        return {"status": "ok"}
    if tool_id == "raise":
        raise ValueError(str(args["message"]))
    if tool_id == "nan":
        return {"value": float("nan")}
    return {"status": "error", "error": {"code": "UNKNOWN_TOOL", "tool_id": tool_id}}
