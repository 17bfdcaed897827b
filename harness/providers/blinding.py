"""Blinding: a prompt view must never carry split, fault or gold information.

A view is the structured JSON a prompt is rendered from, built from a typed view (a msgspec
Struct such as ``PlannerView`` or ``CriticView``). The study's blinded prompts omit the split
(development or held out), the injected fault, whether a fault cluster is primary, the gold
answer and gold decision, and the oracle that knows them; so must every view.

The check is by identity and by type: ``check_blinded`` refuses a view whose *type* declares a
field, at any depth, whose wire name is one of the harness's own withheld fields
(``WITHHELD_KEYS``: exactly the names the harness's records give them - ``Task.split``,
``Task.gold``, ``Snapshot.fault``, ``Snapshot.gold_decision``, ``Row.primary``...). Fields typed
as free data (``Any``, ``dict[str, Any]``: tool arguments, tool values, the agent's answer and
claims) are the agent's or the world's content; they are never inspected, so an argument named
``use_default_period`` or ``gold`` reaches the planner as data and cannot stop a run. A view type
is judged once (cached); the harness's view builders call ``check_blinded`` on every request.

Values cannot be judged generically (an agent's correct answer legitimately equals gold), so the
builders of views are responsible for values; tests scan rendered prompts for planted ones. This
module performs no I/O.
"""

from __future__ import annotations

import functools
from typing import Final

import msgspec
import msgspec.inspect as mi

from harness.errors import PromptBlindingError

__all__ = ["WITHHELD_KEYS", "blinding_findings", "check_blinded"]

WITHHELD_KEYS: Final = frozenset(
    {"split", "fault", "primary", "gold", "gold_decision", "oracle", "oracle_answer"}
)
"""The exact field names under which the harness keeps what a blinded view withholds."""


def _walk(info: mi.Type, path: str, seen: set[type], found: list[str]) -> None:
    if isinstance(info, mi.StructType):
        if info.cls in seen:
            return
        seen = seen | {info.cls}
        for field in info.fields:
            where = f"{path}.{field.encode_name}"
            if field.encode_name in WITHHELD_KEYS or field.name in WITHHELD_KEYS:
                found.append(where)
            _walk(field.type, where, seen, found)
    elif isinstance(info, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        _walk(info.item_type, f"{path}[]", seen, found)
    elif isinstance(info, mi.TupleType):
        for index, item in enumerate(info.item_types):
            _walk(item, f"{path}[{index}]", seen, found)
    elif isinstance(info, mi.UnionType):
        for member in info.types:
            _walk(member, path, seen, found)
    elif isinstance(info, mi.DictType):
        # Keys of a dict are data, not declared fields; its values may still be typed views.
        _walk(info.value_type, f"{path}{{}}", seen, found)
    # Any, str, int, ...: free data; never inspected.


@functools.cache
def blinding_findings(view_type: type[msgspec.Struct]) -> tuple[str, ...]:
    """The path of every field ``view_type`` declares (at any depth) under a withheld name."""
    found: list[str] = []
    _walk(mi.type_info(view_type), "$", set(), found)
    return tuple(found)


def check_blinded(view: msgspec.Struct, *, what: str) -> None:
    """Raise unless ``view``'s type is blinded (see the module docstring).

    Args:
        view: a typed view (a msgspec Struct); its free-data fields are not inspected.
        what: what the view is for (a prompt id), for the message.

    Raises:
        PromptBlindingError: naming the paths of the offending fields (never their values).
    """
    found = blinding_findings(type(view))
    if found:
        raise PromptBlindingError(
            f"view for {what} declares withheld fields (split/fault/gold/oracle): "
            f"{', '.join(found)}"
        )
