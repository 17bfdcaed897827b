"""The catalog runs in a bare interpreter (``python -I -S``) with only the project on sys.path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.tools.catalog import call_tool
from harness.worlds import generate_world

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from harness.tools.catalog import call_tool
request = json.load(sys.stdin)
response = call_tool(request["world"], request["tool_id"], request["args"])
third_party = sorted(m for m in ("msgspec", "blake3", "numpy", "structlog") if m in sys.modules)
json.dump({"response": response, "third_party": third_party}, sys.stdout)
"""


def test_call_tool_in_a_bare_child_matches_in_process() -> None:
    world = generate_world("11").to_plain()
    calls = [
        ("get_metric", {"entity": "R1.D1.S1", "metric": "visits", "period": "2024-04"}),
        (
            "get_series",
            {"entity": "R1.D1.S2", "metric": "visits", "start": "2024-01", "end": "2024-03"},
        ),
        ("list_children", {"entity": "R1"}),
        ("get_metric", {"entity": "R1.D1", "metric": "visits", "period": "2024-04"}),
    ]
    for tool_id, args in calls:
        request = json.dumps({"world": world, "tool_id": tool_id, "args": args})
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", CHILD, str(ROOT)],
            input=request,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
            env={},
        )
        out = json.loads(done.stdout)
        assert out["third_party"] == []
        assert out["response"] == call_tool(world, tool_id, args)
