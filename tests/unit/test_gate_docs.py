"""The session example in docs/gate.md runs as written (its asserts are the check)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "gate.md"


def test_the_session_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert blocks, "docs/gate.md has no python example"
    example = blocks[0]
    assert len(example.splitlines()) <= 60
    namespace: dict[str, object] = {"__name__": "gate_example"}
    exec(compile(example, str(DOC), "exec"), namespace)
    accepted = namespace["accepted"]
    assert getattr(accepted, "complete", False) is True
