"""The benchmark's evidence tools as gate sources: its trusted adapter, one extractor per tool.

``catalog_sources()`` maps every tool of ``harness.tools.catalog`` to an extractor that reads a
result exactly as the studies' trusted adapter does (``harness.tools.adapter``), so a gated run
over the benchmark records the receipts a study would. The Inspect and Agents SDK examples
gate the benchmark's tasks with these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

from harness.gate.extract import Extractor, Observation, ToolResult
from harness.tools.adapter import ToolCall, receipts_for_call
from harness.tools.catalog import TOOL_IDS

__all__ = ["catalog_sources"]


def _read(call: ToolResult) -> Sequence[Observation]:
    receipts = receipts_for_call(
        "task",
        ToolCall(call_id=call.call_id, tool_id=call.tool_id, args=call.args, response=call.result),
    )
    return tuple(
        Observation(
            source_path=r.source_path,
            value=r.value,
            scope=r.scope,
            ok=r.exec_status == "ok",
            validated=r.validation == "validated",
        )
        for r in receipts
    )


_SOURCES: Final[Mapping[str, Extractor]] = MappingProxyType(dict.fromkeys(TOOL_IDS, _read))


def catalog_sources() -> Mapping[str, Extractor]:
    """Tool id -> extractor for every benchmark tool (read-only)."""
    return _SOURCES
