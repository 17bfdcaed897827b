"""Versioned prompt files and their rendering from a blinded view.

Prompts live in ``harness/prompts/<name>.v<N>.txt``; the file name is the prompt id
(``critic.v1``). A file is a header line ``# <prompt id>: <purpose>``, then a ``[system]``
section and a ``[user]`` section. The user section holds ``${view}`` exactly once; rendering
substitutes the view's canonical JSON (sorted keys, two-space indent), so the same view always
renders to the same bytes. A changed prompt is a new file with a new version, never an edit:
prompt files are digested into the study lock (``prompt_bytes``).

The request builders check a view's blinding on its typed form (see ``blinding``). This
module reads packaged files; it performs no other I/O and never calls a provider.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from string import Template
from typing import Any, Final

import msgspec

from harness.canonical import NonCanonicalError, canonical_bytes
from harness.errors import PromptTemplateError
from harness.providers.protocol import Message

__all__ = [
    "PromptTemplate",
    "load_prompt",
    "prompt_bytes",
    "prompt_ids",
    "render_prompt",
    "view_json",
]

_ID: Final = re.compile(r"[a-z][a-z0-9_]*\.v[1-9][0-9]*")
_SUFFIX: Final = ".txt"


@dataclass(frozen=True)
class PromptTemplate:
    """A parsed prompt file."""

    prompt_id: str
    purpose: str
    system: str
    user: Template


def _package_dir() -> Traversable:
    return resources.files("harness").joinpath("prompts")


def prompt_ids() -> tuple[str, ...]:
    """Every packaged prompt id, sorted."""
    names = (entry.name for entry in _package_dir().iterdir())
    return tuple(sorted(n[: -len(_SUFFIX)] for n in names if n.endswith(_SUFFIX)))


def prompt_bytes(prompt_id: str) -> bytes:
    """The exact bytes of a prompt file (what the lock digests).

    Raises:
        PromptTemplateError: when no such prompt is packaged.
    """
    if _ID.fullmatch(prompt_id) is None:
        raise PromptTemplateError(f"prompt id {prompt_id!r} is not of the form name.vN")
    entry = _package_dir().joinpath(prompt_id + _SUFFIX)
    if not entry.is_file():
        raise PromptTemplateError(f"no prompt file for {prompt_id!r}")
    return entry.read_bytes()


def _parse(prompt_id: str, text: str) -> PromptTemplate:
    def bad(why: str) -> PromptTemplateError:
        return PromptTemplateError(f"prompt file {prompt_id}{_SUFFIX}: {why}")

    header, _, rest = text.partition("\n")
    prefix = f"# {prompt_id}: "
    if not header.startswith(prefix) or len(header) == len(prefix):
        raise bad(f"first line must be '{prefix}<purpose>'")
    lines = rest.split("\n")
    if lines.count("[system]") != 1 or lines.count("[user]") != 1:
        raise bad("needs exactly one [system] line and one [user] line")
    first, second = lines.index("[system]"), lines.index("[user]")
    if first != 0 or second < first:
        raise bad("[system] must follow the header, and [user] must follow [system]")
    system = "\n".join(lines[first + 1 : second]).strip()
    user_text = "\n".join(lines[second + 1 :]).strip()
    if not system or not user_text:
        raise bad("[system] and [user] sections must not be empty")
    if "$" in system:
        raise bad("the [system] section takes no placeholders")
    user = Template(user_text)
    if not user.is_valid() or user.get_identifiers() != ["view"]:
        raise bad("the [user] section must use the one placeholder ${view}")
    if user_text.count("${view}") != 1:
        raise bad("the [user] section must hold ${view} exactly once")
    return PromptTemplate(
        prompt_id=prompt_id, purpose=header[len(prefix) :], system=system, user=user
    )


@functools.cache
def load_prompt(prompt_id: str) -> PromptTemplate:
    """Load and parse a packaged prompt.

    Raises:
        PromptTemplateError: when the file is missing, not UTF-8 or malformed.
    """
    data = prompt_bytes(prompt_id)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PromptTemplateError(f"prompt file {prompt_id}{_SUFFIX} is not UTF-8") from e
    return _parse(prompt_id, text)


def view_json(view: Any) -> str:
    """The view as it appears in a prompt: canonical JSON, two-space indent."""
    try:
        return msgspec.json.format(canonical_bytes(view), indent=2).decode("utf-8")
    except NonCanonicalError as e:
        raise PromptTemplateError(f"view cannot be rendered: {e}") from e


def render_prompt(prompt_id: str, view: Any) -> tuple[Message, ...]:
    """Render ``prompt_id`` from ``view``: a system message and one user message.

    The view's blinding is checked on its typed form by the request builders
    (``check_blinded``), never here on plain JSON, whose keys may be the agent's.

    Raises:
        PromptTemplateError: when the prompt is missing or malformed, or the view cannot be
            encoded canonically.
    """
    template = load_prompt(prompt_id)
    return (
        Message(role="system", text=template.system),
        Message(role="user", text=template.user.substitute(view=view_json(view))),
    )
