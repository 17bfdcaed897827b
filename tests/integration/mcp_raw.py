"""An upstream written by hand (line-delimited JSON-RPC over stdio, no SDK) that sends results
the SDK's own servers would refuse to send: ``bad_shape`` (content is not a list) and
``not_a_result`` (a JSON array where an object belongs)."""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [
    {"name": "bad_shape", "inputSchema": {"type": "object"}},
    {"name": "not_a_result", "inputSchema": {"type": "object"}},
]


def _answer(message: dict[str, Any]) -> dict[str, Any] | None:
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        return None  # a notification
    if method == "initialize":
        result: Any = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and message["params"]["name"] == "bad_shape":
        result = {"content": "not a list of blocks"}
    elif method == "tools/call":
        result = [1, 2, 3]
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> None:
    """Answer each request line until stdin closes."""
    for line in sys.stdin:
        answer = _answer(json.loads(line))
        if answer is not None:
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
