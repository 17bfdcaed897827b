"""Pure parts of the proxy: what ``--upstream`` means, the names tools are exposed under.

No ``mcp`` import: the command line parses and checks all of this before any upstream starts.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Final

import msgspec

from harness.errors import InputError

__all__ = [
    "DEFAULT_SUBMIT_TOOL",
    "EPISODE_HEADER",
    "ExposedTool",
    "Upstream",
    "check_episode",
    "check_tool_name",
    "check_upstreams",
    "expose",
    "parse_upstream",
]

DEFAULT_SUBMIT_TOOL: Final = "ect_submit"
"""Not ``submit``: clients such as Inspect's ``react()`` bring a ``submit`` tool of their own."""

EPISODE_HEADER: Final = "ect-episode"
"""The HTTP header naming the agent run (the ledger) a request belongs to."""

_UPSTREAM_NAME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
_TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_EPISODE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_SEPARATOR: Final = "__"


class Upstream(msgspec.Struct, frozen=True, kw_only=True):
    """One ``--upstream NAME=COMMAND`` (an argv, run over stdio) or ``NAME=URL`` (HTTP)."""

    name: str
    argv: tuple[str, ...] = ()
    url: str | None = None


class ExposedTool(msgspec.Struct, frozen=True, kw_only=True):
    """An upstream tool under the name the proxy's client sees (the contract's tool id)."""

    name: str
    upstream: str
    tool: str


def parse_upstream(text: str) -> Upstream:
    """Parse ``NAME=COMMAND`` or ``NAME=http(s)://...``.

    Raises:
        InputError: one line naming what is wrong.
    """
    name, sep, target = text.partition("=")
    if not sep or not target.strip():
        raise InputError(f"--upstream {text!r}: expected NAME=COMMAND or NAME=URL")
    if not _UPSTREAM_NAME.match(name):
        raise InputError(
            f"--upstream {text!r}: NAME must be a letter then up to 31 letters, digits, _ or -"
        )
    if target.startswith(("http://", "https://")):
        return Upstream(name=name, url=target)
    try:
        argv = tuple(shlex.split(target))
    except ValueError as e:
        raise InputError(f"--upstream {name}: the command does not parse ({e})") from None
    return Upstream(name=name, argv=argv)


def check_upstreams(upstreams: Sequence[Upstream]) -> None:
    """Refuse no upstream, or one name given twice.

    Raises:
        InputError: one line.
    """
    if not upstreams:
        raise InputError("give at least one --upstream NAME=COMMAND or NAME=URL")
    twice = sorted(n for n, k in Counter(u.name for u in upstreams).items() if k > 1)
    if twice:
        raise InputError(f"--upstream names must differ: {', '.join(twice)} is given twice")


def check_tool_name(name: str, what: str) -> None:
    """Refuse a tool name MCP does not allow.

    Raises:
        InputError: one line.
    """
    if not _TOOL_NAME.match(name):
        raise InputError(f"{what} {name!r}: a tool name is 1-128 of A-Z a-z 0-9 . _ -")


def check_episode(value: str | None) -> str | None:
    """The episode id when ``value`` is one (1-64 of A-Z a-z 0-9 _ -, not starting with _ or
    -), else None."""
    return value if value is not None and _EPISODE.match(value) else None


def expose(
    listed: Iterable[tuple[str, str]], submit_tool: str
) -> tuple[tuple[ExposedTool, ...], tuple[str, ...]]:
    """Collision-free names for ``(upstream, tool)`` pairs, in the order given.

    A tool keeps its own name unless another upstream lists the same name or it is the submit
    tool's; then every holder of that name is exposed as ``<upstream>__<tool>``. Returns the
    exposed tools and one line per tool left out (a name MCP does not allow, or one that is
    still taken after prefixing).
    """
    pairs = list(listed)
    counts = Counter(tool for _, tool in pairs)
    skipped: list[str] = []
    chosen: list[ExposedTool] = []
    for upstream, tool in pairs:
        if not _TOOL_NAME.match(tool):
            skipped.append(f"{upstream}: tool {tool[:140]!r} has a name MCP does not allow")
            continue
        name = tool
        if counts[tool] > 1 or tool == submit_tool:
            name = f"{upstream}{_SEPARATOR}{tool}"
        chosen.append(ExposedTool(name=name, upstream=upstream, tool=tool))
    taken = Counter(t.name for t in chosen)
    out: list[ExposedTool] = []
    for t in chosen:
        if taken[t.name] > 1 or t.name == submit_tool or not _TOOL_NAME.match(t.name):
            skipped.append(f"{t.upstream}: tool {t.tool!r} cannot be named uniquely ({t.name!r})")
            continue
        out.append(t)
    return tuple(out), tuple(skipped)
