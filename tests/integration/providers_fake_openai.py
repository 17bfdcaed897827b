"""A fake OpenAI-compatible chat-completions endpoint on 127.0.0.1 for the real ``openai`` client.

It plays the Gemini fake's ``Answer``s (``providers_fake_gemini``: replies, disconnects before
a response byte, resets after the request, partial bodies, slow replies) and records requests
the same way, on the chat-completions wire format. ``POST {base}/chat/completions`` is answered
from the script, then from the ``responder`` (default: the simulated responder below, which
answers as the simulated provider would). ``GET {base}/models/{model}`` (the preflight request)
is answered from its own script, then with the model object.

``SimulatedChat`` answers a chat-completions request with the simulated provider's behaviour,
from the request bytes alone: the system message tells the prompt (hence the role), the user
message holds the rendered view (parsed back out of the prompt template), the body carries the
seed and the response schema. A model sees no cell id, so the caller says which cell a request
belongs to through ``cell_of`` (a test runs one cell at a time and knows it); without it the
constant ``loopback`` stands in. The request-to-output part (``simulated_output``) is
independent of the wire format, so the Gemini fake can use the same function.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from providers_fake_gemini import (
    Answer,
    RecordedRequest,
    body,
    disconnect_before_response,
    slow,
)

from harness.canonical import canonical_bytes
from harness.providers.config import GenerationConfig, default_generation_config
from harness.providers.kinds import Role
from harness.providers.loopback import stream
from harness.providers.prompts import load_prompt, prompt_ids
from harness.providers.protocol import Message, ProviderRequest
from harness.providers.simulated import default_behaviours, request_stream

__all__ = [
    "FakeOpenAI",
    "SimulatedChat",
    "chat_error",
    "chat_output",
    "chat_text",
    "simulated_output",
]

LOOPBACK_CELL: Final = "loopback"
DEFAULT_USAGE: Final = {"prompt": 120, "output": 30}

Responder = Callable[[RecordedRequest], Answer]


def chat_text(
    content: str | None, *, finish_reason: str | None = "stop", usage: dict[str, int] | None = None
) -> Answer:
    """A 200 chat completion whose one choice carries ``content``."""
    tokens = usage or DEFAULT_USAGE
    doc = {
        "id": "chatcmpl-fake-1",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model-1",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": tokens["prompt"],
            "completion_tokens": tokens["output"],
            "total_tokens": tokens["prompt"] + tokens["output"],
        },
    }
    return Answer("reply", payload=json.dumps(doc).encode())


def chat_output(value: Any, *, usage: dict[str, int] | None = None) -> Answer:
    """A 200 chat completion whose content is ``value`` as JSON, finished with ``stop``."""
    return chat_text(json.dumps(value), usage=usage)


def chat_error(status: int, message: str, kind: str = "invalid_request_error") -> Answer:
    """An error reply the way the OpenAI API words one."""
    doc = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return body(status, json.dumps(doc).encode())


def _model_object(model: str) -> Answer:
    doc = {"id": model, "object": "model", "created": 0, "owned_by": "fake"}
    return body(200, json.dumps(doc).encode())


def _prompts() -> dict[str, tuple[str, Role, str, str]]:
    known: dict[str, tuple[str, Role, str, str]] = {}
    for prompt_id in prompt_ids():
        template = load_prompt(prompt_id)
        prefix, _, suffix = template.user.template.partition("${view}")
        role = Role.PLANNER if prompt_id.startswith("planner.") else Role.CRITIC
        known[template.system] = (prompt_id, role, prefix, suffix)
    return known


def simulated_output(
    system: str,
    user: str,
    *,
    seed: int,
    schema: dict[str, Any],
    cell_id: str,
    config: GenerationConfig,
) -> dict[str, Any] | str:
    """What the simulated provider answers to this prompt (or why the request is not one)."""
    found = _prompts().get(system)
    if found is None:
        return "request does not use a known prompt"
    prompt_id, role, prefix, suffix = found
    if not user.startswith(prefix) or not user.endswith(suffix):
        return "the user message is not the prompt's"
    view = json.loads(user[len(prefix) : len(user) - len(suffix)])
    request = ProviderRequest(
        role=role,
        cell_id=cell_id,
        prompt_id=prompt_id,
        messages=(Message(role="system", text=system), Message(role="user", text=user)),
        view=view,
        response_schema=schema,
        seed=seed,
        config=config,
    )
    return default_behaviours()[role].respond(request, request_stream(request))


class SimulatedChat:
    """Answers chat-completions requests as the simulated provider (see the module docs).

    ``latency_s`` delays every reply; ``faults`` maps a request number (0-based, in arrival
    order) to a transport fault played instead of the reply.
    """

    def __init__(
        self,
        *,
        config: GenerationConfig | None = None,
        cell_of: Callable[[], str] | None = None,
        latency_s: float = 0.0,
        faults: dict[int, Answer] | None = None,
    ) -> None:
        """Answer with ``config``'s simulated behaviours, for the cell ``cell_of`` names."""
        self._config = config or default_generation_config()
        self._cell_of = cell_of
        self._latency_s = latency_s
        self._faults = dict(faults or {})
        self._lock = threading.Lock()
        self.answered = 0

    def __call__(self, recorded: RecordedRequest) -> Answer:
        """The answer to one request."""
        with self._lock:
            number = self.answered
            self.answered += 1
        fault = self._faults.get(number)
        answer = fault if fault is not None else self._answer(recorded.body)
        return slow(self._latency_s, answer) if self._latency_s > 0 else answer

    def _answer(self, data: bytes) -> Answer:
        try:
            doc = json.loads(data)
            messages = doc["messages"]
            system = next(m["content"] for m in messages if m["role"] == "system")
            user = messages[-1]["content"]
            seed = int(doc["seed"])
            schema = doc["response_format"]["json_schema"]["schema"]
        except (ValueError, KeyError, TypeError, StopIteration) as e:
            return chat_error(400, f"request not understood: {e}")
        cell = LOOPBACK_CELL if self._cell_of is None else self._cell_of()
        value = simulated_output(
            system, user, seed=seed, schema=schema, cell_id=cell, config=self._config
        )
        if isinstance(value, str):
            return chat_error(400, value)
        per_token = self._config.simulated.chars_per_token
        usage = {
            "prompt": math.ceil((len(system) + len(user)) / per_token),
            "output": math.ceil(len(canonical_bytes(value)) / per_token),
        }
        return chat_output(value, usage=usage)


@dataclass
class _State:
    script: deque[Answer] = field(default_factory=deque)
    metadata: deque[Answer] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, responder: Responder) -> None:
        super().__init__(("127.0.0.1", 0), _ChatHandler)
        self.state = _State()
        self.responder = responder

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away is not a fault: no stdlib traceback in the captured output."""
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class _ChatHandler(BaseHTTPRequestHandler):
    # The Gemini fake's answer kinds, played on the chat-completions routes.
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the stdlib's per-request stderr line."""

    def _play(self, answer: Answer) -> None:
        if answer.kind == "slow":
            if self.server.state.stopping.wait(answer.delay_s):
                return
            assert answer.then is not None
            try:
                self._play(answer.then)
            except OSError:
                return  # the client gave up first
        elif answer.kind == "disconnect":
            self.connection.shutdown(socket.SHUT_RDWR)
        elif answer.kind == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        elif answer.kind == "stream":
            stream(self, answer, self.server.state.stopping)
        else:
            cut = answer.kind == "partial"
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.payload)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(answer.payload[: len(answer.payload) // 2] if cut else answer.payload)
            self.wfile.flush()

    def do_POST(self) -> None:
        """Record the request, then play the script, then the responder."""
        length = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(length)
        state = self.server.state
        recorded = RecordedRequest(
            method="POST",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=data,
        )
        with state.lock:
            state.requests.append(recorded)
            scripted = state.script.popleft() if state.script else None
        answer = scripted if scripted is not None else self.server.responder(recorded)
        self.close_connection = True
        if not self.path.rstrip("/").endswith("/chat/completions"):
            answer = chat_error(404, f"no route {self.path}")
        self._play(answer)

    def do_GET(self) -> None:
        """Record a model request, then play the metadata script, then the model object."""
        state = self.server.state
        recorded = RecordedRequest(
            method="GET",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=b"",
        )
        model = self.path.rsplit("/", 1)[-1].split("?", 1)[0]
        with state.lock:
            state.requests.append(recorded)
            answer = state.metadata.popleft() if state.metadata else _model_object(model)
        self.close_connection = True
        self._play(answer)


class FakeOpenAI:
    """A running fake chat-completions endpoint; use as a context manager."""

    def __init__(self, responder: Responder | None = None) -> None:
        """Answer past the script with ``responder`` (default: ``SimulatedChat()``)."""
        self._server = _Server(responder or SimulatedChat())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests received so far, in arrival order."""
        with self._server.state.lock:
            return list(self._server.state.requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The chat-completions requests received so far."""
        return [r for r in self.requests if r.method == "POST"]

    def script(self, *answers: Answer) -> None:
        """Queue answers, one per future chat request, before the responder."""
        with self._server.state.lock:
            self._server.state.script.extend(answers)

    def metadata(self, *answers: Answer) -> None:
        """Queue answers to model (``GET models/<model>``) requests."""
        with self._server.state.lock:
            self._server.state.metadata.extend(answers)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.state.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


__all__ += ["disconnect_before_response"]
