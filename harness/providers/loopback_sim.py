"""The simulated provider's behaviour behind a loopback endpoint, from request bytes alone.

``SimulatedResponder`` answers one model request of either wire shape (Gemini
``generateContent`` or OpenAI-compatible ``chat/completions``) the way the simulated provider
answers the same call, using only what a real model is sent: the system instruction tells the
prompt (hence the role), the user turn holds the view (the prompt renders its canonical JSON,
which is parsed back out), the body carries the seed and the response schema. A model sees no
cell id, so the stream is keyed with the constant ``LOOPBACK_CELL`` in its place (a test that
runs one cell at a time may name it through ``cell_of``): the same request bytes always get the
same reply, whatever the order or concurrency of the run, and the outcome rows of a loopback run
therefore never depend on ``--max-cells``. They are not the simulated run's rows (there the cell
id is part of every draw).

The reply carries the output as JSON text, finished normally, with usage estimated like the
simulated provider's (characters / ``chars_per_token``, no thinking tokens). Latency is
``latency_ms``, jittered by up to +-``jitter`` of itself with a draw keyed by ``seed`` and the
request bytes; ``fail_rate`` of requests (chosen by the same kind of keyed draw, so a retry of
the same bytes fails again: the seed makes a rehearsal repeatable) get a transport fault instead
of a reply: the connection is reset or closed after the request was read. ``faults`` plays a
given answer at given request numbers (in arrival order) instead.
"""

from __future__ import annotations

import functools
import json
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.providers.config import GenerationConfig
from harness.providers.kinds import Role
from harness.providers.loopback import (
    Answer,
    RecordedRequest,
    Shape,
    chat_output,
    disconnect_before_response,
    reset_after_request,
    slow,
    status_error,
    text,
)
from harness.providers.prompts import load_prompt, prompt_ids
from harness.providers.protocol import Message, ProviderRequest
from harness.providers.simulated import default_behaviours, request_stream

__all__ = ["LOOPBACK_CELL", "SimulatedResponder", "simulated_output"]

LOOPBACK_CELL: Final = "loopback"
_ROLES: Final = {"planner": Role.PLANNER}


@dataclass(frozen=True)
class _Prompt:
    prompt_id: str
    role: Role
    prefix: str
    suffix: str


@functools.cache
def _prompts() -> dict[str, _Prompt]:
    """Every packaged prompt by its system text (read once)."""
    known: dict[str, _Prompt] = {}
    for prompt_id in prompt_ids():
        template = load_prompt(prompt_id)
        prefix, _, suffix = template.user.template.partition("${view}")
        role = _ROLES.get(prompt_id.split(".", 1)[0], Role.CRITIC)
        known[template.system] = _Prompt(prompt_id, role, prefix, suffix)
    return known


def _unit(*parts: bytes) -> float:
    """A draw in [0, 1) keyed by ``parts`` (BLAKE3, no process state)."""
    key = digest_bytes(Domain.LOOPBACK_DRAW, b"\x00".join(parts))
    return int(key.split(":", 1)[1][:13], 16) / float(16**13)


def simulated_output(
    system: str,
    user: str,
    *,
    seed: int,
    schema: dict[str, Any],
    config: GenerationConfig,
    cell_id: str = LOOPBACK_CELL,
) -> dict[str, Any] | str:
    """What the simulated provider answers to this prompt, or why the request is not one."""
    prompt = _prompts().get(system)
    if prompt is None or not user.startswith(prompt.prefix) or not user.endswith(prompt.suffix):
        return "request does not use a known prompt"
    view_text = user[len(prompt.prefix) : len(user) - len(prompt.suffix)]
    try:
        view = json.loads(view_text)
    except ValueError as e:
        return f"the prompt's view is not JSON: {e}"
    request = ProviderRequest(
        role=prompt.role,
        cell_id=cell_id,
        prompt_id=prompt.prompt_id,
        messages=(Message(role="system", text=system), Message(role="user", text=user)),
        view=view,
        response_schema=schema,
        seed=seed,
        config=config,
    )
    output: dict[str, Any] = default_behaviours()[prompt.role].respond(
        request, request_stream(request)
    )
    return output


def _parse(shape: Shape, data: bytes) -> tuple[str, str, int, dict[str, Any]]:
    """(system text, last user text, seed, response schema) of a request body.

    Raises:
        ValueError, KeyError, TypeError, IndexError, StopIteration: not such a request.
    """
    body = json.loads(data)
    if shape == "gemini":
        system = "".join(p["text"] for p in _get(body, "systemInstruction")["parts"])
        user = "".join(p["text"] for p in body["contents"][-1]["parts"])
        config = _get(body, "generationConfig")
        return system, user, int(config["seed"]), _get(config, "responseJsonSchema")
    messages = body["messages"]
    system = next(m["content"] for m in messages if m["role"] == "system")
    schema = body["response_format"]["json_schema"]["schema"]
    return system, messages[-1]["content"], int(body["seed"]), schema


class SimulatedResponder:
    """Answers model requests with the simulated behaviours (see the module docs)."""

    def __init__(
        self,
        generation: GenerationConfig,
        *,
        shape: Shape = "gemini",
        latency_ms: float = 0.0,
        jitter: float = 0.0,
        fail_rate: float = 0.0,
        seed: int = 0,
        cell_of: Callable[[], str] | None = None,
        faults: Mapping[int, Answer] | None = None,
    ) -> None:
        if latency_ms < 0 or not 0.0 <= jitter <= 1.0 or not 0.0 <= fail_rate <= 1.0:
            raise ValueError("latency_ms >= 0, jitter and fail_rate in [0, 1]")
        self._generation = generation
        self._shape: Shape = shape
        self._latency_s = latency_ms / 1000.0
        self._jitter = jitter
        self._fail_rate = fail_rate
        self._seed = str(seed).encode()
        self._cell_of = cell_of
        self._faults = dict(faults or {})
        self._lock = threading.Lock()
        self.answered = 0
        self.faults = 0

    def __call__(self, recorded: RecordedRequest) -> Answer:
        """The answer to one request (delayed by the latency, or a transport fault)."""
        with self._lock:
            number = self.answered
            self.answered += 1
        answer = self._faults.get(number) or self._answer(recorded.body)
        delay = self._latency_s
        if self._jitter and delay:
            delay *= 1.0 + self._jitter * (2.0 * _unit(self._seed, b"latency", recorded.body) - 1)
        faulty = self._fail_rate and _unit(self._seed, b"fault", recorded.body) < self._fail_rate
        if faulty:
            kind = _unit(self._seed, b"kind", recorded.body)
            answer = reset_after_request() if kind < 0.5 else disconnect_before_response()
        if faulty or number in self._faults:
            with self._lock:
                self.faults += 1
        return slow(delay, answer) if delay > 0 else answer

    def _answer(self, data: bytes) -> Answer:
        try:
            system, user, seed, schema = _parse(self._shape, data)
        except (ValueError, KeyError, TypeError, IndexError, StopIteration) as e:
            return status_error(self._shape, 400, f"request not understood: {e}")
        cell = LOOPBACK_CELL if self._cell_of is None else self._cell_of()
        output = simulated_output(
            system, user, seed=seed, schema=schema, config=self._generation, cell_id=cell
        )
        if isinstance(output, str):
            return status_error(self._shape, 400, output)
        per_token = self._generation.simulated.chars_per_token
        prompt = math.ceil((len(system) + len(user)) / per_token)
        out = math.ceil(len(canonical_bytes(output)) / per_token)
        if self._shape == "gemini":
            return text(json.dumps(output), usage={"prompt": prompt, "output": out, "thoughts": 0})
        return chat_output(output, usage={"prompt": prompt, "output": out})


def _get(doc: dict[str, Any], camel: str) -> Any:
    """A field by its camelCase or snake_case name (the client may send either)."""
    if camel in doc:
        return doc[camel]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return doc[snake]
