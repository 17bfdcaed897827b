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
    if tool_id == "hog_memory":  # fill memory 64 MiB at a time, up to args["mib"]
        blocks = [b"\x01" * (64 << 20) for _ in range(int(args["mib"]) // 64)]
        return {"status": "ok", "filled_mib": 64 * len(blocks)}
    if tool_id == "threads":  # start args["count"] threads with small stacks
        import threading

        threading.stack_size(64 * 1024)
        release = threading.Event()
        started = []
        for _ in range(int(args["count"])):
            t = threading.Thread(target=release.wait, daemon=True)
            t.start()
            started.append(t)
        release.set()
        return {"status": "ok", "threads": len(started)}
    if tool_id == "memfd":  # write args["mib"] MiB into a memfd
        fd = os.memfd_create("tool")
        for _ in range(int(args["mib"])):
            os.write(fd, b"\x01" * (1 << 20))
        return {"status": "ok"}
    if tool_id == "spin":  # burn CPU for args["seconds"] of CPU time
        end = time.process_time() + float(args["seconds"])
        while time.process_time() < end:
            pass
        return {"status": "ok"}
    if tool_id == "ignore_xcpu_spin":  # as spin, but ignoring the soft CPU limit's signal
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        end = time.process_time() + float(args["seconds"])
        while time.process_time() < end:
            pass
        return {"status": "ok"}
    if tool_id == "open_files":  # open /dev/null args["count"] times
        fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(int(args["count"]))]
        return {"status": "ok", "opened": len(fds)}
    if tool_id == "own_limits":  # what a tool may do to itself: lower a limit, read affinity
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
        return {"status": "ok", "cpus": len(os.sched_getaffinity(0))}
    return {"status": "error", "error": {"code": "UNKNOWN_TOOL", "tool_id": tool_id}}
