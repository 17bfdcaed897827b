"""What the proxy makes of an upstream result, and what it hands back (pure: no ``mcp`` import).

An upstream ``tools/call`` result is JSON as the upstream sent it (every field kept). The
contract's extractors read the *result document*: that object with ``isError`` always a boolean
(absent is false), ``structuredContent`` null when absent and ``content`` a list. The document's
hash is each receipt's response hash. An error result (``isError: true``) still goes through the
extractor, but the proxy marks every value it yields as not ok, so no claim may cite it.

The forwarded result is the upstream's, unchanged but for one appended text block naming the
receipts (what the model reads) and ``_meta["ect/receipts"]`` (what a client program reads);
the upstream's server identity stamp is dropped so the proxy answers as itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from harness.ect.model import Receipt, Verdict
from harness.gate import GateDecision, RecordedCall

__all__ = [
    "RECEIPTS_META",
    "SERVER_INFO_META",
    "VERDICT_META",
    "error_result",
    "forwarded_result",
    "result_document",
    "receipts_text",
    "result_problem",
    "submit_result",
    "submit_schema",
]

RECEIPTS_META: Final = "ect/receipts"
VERDICT_META: Final = "ect/verdict"
SERVER_INFO_META: Final = "io.modelcontextprotocol/serverInfo"
_MAX_VALUE_TEXT: Final = 120
_MAX_LISTED: Final = 200


def result_problem(raw: Any, size: int, max_bytes: int) -> str | None:
    """Why ``raw`` (``size`` bytes as JSON) is not a result the proxy forwards, or None."""
    if size > max_bytes:
        return f"the result is {size} bytes, over the proxy's limit of {max_bytes}"
    if not isinstance(raw, dict):
        return "the result is not a JSON object"
    if raw.get("resultType", "complete") != "complete":
        return f"the upstream asked for more ({raw.get('resultType')!r}), which is not forwarded"
    content = raw.get("content", [])
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        return "the result's content is not a list of blocks"
    if not isinstance(raw.get("isError", False), bool):
        return "the result's isError is not a boolean"
    return None


def result_document(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The document the extractors read (see the module docstring)."""
    doc = dict(raw)
    doc["content"] = raw.get("content", [])
    doc["structuredContent"] = raw.get("structuredContent")
    doc["isError"] = raw.get("isError", False) is True
    return doc


def _value_text(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _MAX_VALUE_TEXT else text[: _MAX_VALUE_TEXT - 3] + "..."


def _receipt_line(r: Receipt) -> str:
    s = r.scope
    where = f"entity {s.entity}, attribute {s.attribute}, level {s.level}, date {s.date or 'none'}"
    usable = "" if r.exec_status == "ok" else "; the call failed: no claim may cite it"
    if r.validation != "validated":
        usable += "; the result did not match the contract's schema: no claim may cite it"
    return f"- {r.receipt_id} = {_value_text(r.value)} at {r.source_path} ({where}){usable}"


def receipts_text(recorded: RecordedCall) -> str:
    """The text block appended to a forwarded result."""
    if not recorded.receipts:
        why = recorded.note or "no value the contract reads"
        return f"[ECT] call {recorded.call_id}: no receipt ({why})."
    lines = [f"[ECT] call {recorded.call_id} receipts (cite these ids when you submit):"]
    lines += [_receipt_line(r) for r in recorded.receipts[:_MAX_LISTED]]
    if len(recorded.receipts) > _MAX_LISTED:
        lines.append(f"- ... {len(recorded.receipts) - _MAX_LISTED} more, ids up to "
                     f"{recorded.receipts[-1].receipt_id}")  # fmt: skip
    return "\n".join(lines)


def forwarded_result(
    raw: Mapping[str, Any], recorded: RecordedCall, *, object_structured_only: bool
) -> dict[str, Any]:
    """The upstream result with its receipts named (see the module docstring).

    ``object_structured_only``: the client speaks a protocol revision whose structured content
    must be an object; other structured content is left out (the text content still carries it
    when the upstream put it there).
    """
    out = {k: v for k, v in raw.items() if k not in ("_meta", "resultType")}
    content: list[Any] = list(raw.get("content", []))
    content.append({"type": "text", "text": receipts_text(recorded)})
    out["content"] = content
    structured = out.get("structuredContent")
    if object_structured_only and structured is not None and not isinstance(structured, dict):
        del out["structuredContent"]
    meta = raw.get("_meta")
    kept = (
        {k: v for k, v in meta.items() if k != SERVER_INFO_META} if isinstance(meta, dict) else {}
    )
    kept[RECEIPTS_META] = {
        "call_id": recorded.call_id,
        "receipts": [r.receipt_id for r in recorded.receipts],
    }
    out["_meta"] = kept
    return out


def error_result(text: str) -> dict[str, Any]:
    """An error result (``isError: true``) carrying ``text``."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


def submit_result(decision: GateDecision) -> dict[str, Any]:
    """The submit tool's result for one gate decision.

    ``complete``: the certified answer, no error. ``continue``: an error result whose text lists
    every reason code and what to do, so a client that stops only on an error-free submit goes
    on. ``stuck``: no error (the run must end), the text saying it is not done.
    """
    meta = {
        VERDICT_META: {
            "verdict": decision.verdict.value,
            "submission": decision.submission,
            "refusals": decision.refusals,
            "max_refusals": decision.max_refusals,
            "reason_codes": list(decision.reason_codes),
        }
    }
    if decision.verdict is Verdict.COMPLETE:
        answer = msgspec.json.encode(decision.answer, order="sorted").decode()
        text = f"{decision.feedback}\nCertified answer: {answer}"
        return {
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"verdict": "complete", "answer": decision.answer},
            "isError": False,
            "_meta": meta,
        }
    if decision.verdict is Verdict.STUCK:
        text = (
            "STOPPED, NOT DONE: the gate refused this run's answer "
            f"{decision.refusals} times (its budget). No answer is certified.\n"
            f"{decision.feedback}"
        )
        return {
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"verdict": "stuck", "answer": None},
            "isError": False,
            "_meta": meta,
        }
    text = (
        f"{decision.feedback}\nWhat to do: gather the evidence named above with the tools, or "
        "cite receipt ids already listed in tool results, fix each claim and the answer, and "
        "submit again."
    )
    return {"content": [{"type": "text", "text": text}], "isError": True, "_meta": meta}


def submit_schema() -> dict[str, Any]:
    """The submit tool's input schema: claims (array) and answer (object)."""
    claim = {
        "type": "object",
        "properties": {
            "slot": {"type": "string"},
            "value": {},
            "evidence": {"type": "array", "items": {"type": "string"}},
            "transform": {"type": "object"},
        },
        "required": ["slot", "value", "evidence", "transform"],
    }
    return {
        "type": "object",
        "properties": {
            "claims": {
                "type": "array",
                "items": claim,
                "description": "One claim per required slot: its value, the receipt ids it "
                "rests on, and the transform that derives it from them.",
            },
            "answer": {
                "type": "object",
                "description": "Each required slot mapped to the value you claim for it.",
            },
        },
        "required": ["claims", "answer"],
    }
