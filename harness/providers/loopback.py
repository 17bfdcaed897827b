"""Loopback endpoints on 127.0.0.1 of both wire shapes: the real clients, with no network.

One server speaks either shape: ``gemini`` (the google-genai REST format: ``POST
/v1beta/models/<model>:generateContent``, ``GET /v1beta/models/<model>`` for the model's
metadata, the preflight request) or ``openai`` (an OpenAI-compatible endpoint: ``POST
{base}/chat/completions``, ``GET {base}/models/<model>``). ``FakeGemini`` and ``FakeOpenAI``
are the two; ``harness fake-endpoint gemini|openai`` serves one from the command line, so a user
can rehearse a paid run, a dead key and a quota error with no code (``serve_forever``).

Two uses share it. The tests script it (``script``): it plays failures exactly where a test
wants them. Rehearsals, the concurrency tests and the benchmark give it a *responder* instead
(``loopback_sim.SimulatedResponder``): every request past the script is answered with the
simulated provider's behaviour, computed from the request bytes alone.

The server listens on a loopback port (0: a free one), records every request it receives
(method, path, headers, body bytes; ``record=False`` keeps none, for long runs), counts them and
the replies it delivered with the tokens they reported (``served``), and answers each one with
the next scripted ``Answer``: a well-formed reply, an HTTP error (JSON or HTML), a malformed or
truncated body, a blocked or empty reply, a disconnect before any response byte, a connection
reset after the request was read, a partial body, a reply slower than the client's timeout, or a
streamed body (``huge``, ``endless``, ``gzip_bomb``, ``drip``: what a hostile endpoint can send).
Besides the script: ``deny_key`` answers every request as a revoked key would (Gemini 403
``PERMISSION_DENIED``, OpenAI 401); ``status_every=(N, CODE)`` answers every N-th model request
with HTTP CODE (429: a quota error) in the shape's own error format; ``hold`` keeps every
reply back until ``release`` (a reply held when the server stops is never sent).

Scripted, it is not a model: it never interprets a prompt. Model requests are answered from the
script (then the responder's answer, else ``always``'s answer, by default an off-schema 200),
metadata requests from their own script (then ``metadata_always``'s answer, by default the
model's metadata). Every reply closes the connection (``Connection: close``) so no request
ever rides on a reused socket and each attempt is one connection.
"""

from __future__ import annotations

import functools
import json
import socket
import struct
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final, Literal

__all__ = [
    "DEFAULT_USAGE",
    "Answer",
    "FakeEndpoint",
    "FakeGemini",
    "FakeOpenAI",
    "RecordedRequest",
    "Responder",
    "Served",
    "Shape",
    "blocked",
    "body",
    "chat_error",
    "chat_output",
    "chat_text",
    "disconnect_before_response",
    "drip",
    "echo_credential",
    "endless",
    "error",
    "gzip_bomb",
    "huge",
    "model_metadata",
    "model_object",
    "no_candidates",
    "output",
    "partial_body",
    "reset_after_request",
    "slow",
    "status_error",
    "stream",
    "text",
]

Shape = Literal["gemini", "openai"]
DEFAULT_USAGE: Final = {"prompt": 120, "output": 30, "thoughts": 50}
_CHAT_USAGE: Final = {"prompt": 120, "output": 30}
_MODEL_VERSION: Final = "gemini-2.5-flash-fake"
_GRPC: Final = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_CHAT_KIND: Final = {
    400: "invalid_request_error",
    401: "invalid_api_key",
    403: "permission_denied",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}

AnswerKind = Literal["reply", "disconnect", "reset", "partial", "slow", "echo_credential", "stream"]


@dataclass(frozen=True)
class Answer:
    """One scripted reaction to one request."""

    kind: AnswerKind
    status: int = 200
    content_type: str = "application/json; charset=UTF-8"
    payload: bytes = b""
    delay_s: float = 0.0
    then: Answer | None = None
    # ``stream``: the body's pieces, made afresh for each request; a declared length (None:
    # the body ends when the connection closes) and a content coding.
    chunks: Callable[[], Iterator[bytes]] | None = None
    length: int | None = None
    encoding: str | None = None


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the server received it (headers lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body decoded as JSON."""
        return json.loads(self.body)


# --- Gemini replies ---------------------------------------------------------------------------


def _candidate_reply(
    candidate_text: str | None,
    finish_reason: str,
    usage: dict[str, int],
) -> dict[str, Any]:
    parts = [] if candidate_text is None else [{"text": candidate_text}]
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": finish_reason,
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": usage["prompt"],
            "candidatesTokenCount": usage["output"],
            "thoughtsTokenCount": usage["thoughts"],
            "totalTokenCount": usage["prompt"] + usage["output"] + usage["thoughts"],
        },
        "modelVersion": _MODEL_VERSION,
        "responseId": "fake-response-1",
    }


def text(
    candidate_text: str | None,
    *,
    finish_reason: str = "STOP",
    usage: dict[str, int] | None = None,
) -> Answer:
    """A 200 reply whose single candidate carries ``candidate_text`` (None: no parts)."""
    reply = _candidate_reply(candidate_text, finish_reason, usage or DEFAULT_USAGE)
    return Answer("reply", payload=json.dumps(reply).encode())


def output(value: Any, *, usage: dict[str, int] | None = None) -> Answer:
    """A 200 reply whose candidate text is ``value`` as JSON, finished with STOP."""
    return text(json.dumps(value), usage=usage)


def body(status: int, payload: bytes, content_type: str = "application/json") -> Answer:
    """A reply with exactly this status, content type and body bytes."""
    return Answer("reply", status=status, content_type=content_type, payload=payload)


def error(status: int, grpc_status: str, message: str) -> Answer:
    """A JSON error reply the way the Gemini API words one."""
    doc = {"error": {"code": status, "message": message, "status": grpc_status}}
    return body(status, json.dumps(doc).encode())


def model_metadata(model: str = "gemini-2.5-flash") -> Answer:
    """A 200 reply to ``GET models/<model>``: the metadata the preflight request reads."""
    doc = {
        "name": f"models/{model}",
        "displayName": "Gemini 2.5 Flash (fake)",
        "inputTokenLimit": 1048576,
        "outputTokenLimit": 65536,
        "supportedGenerationMethods": ["generateContent", "countTokens"],
    }
    return Answer("reply", payload=json.dumps(doc).encode())


def no_candidates() -> Answer:
    """A 200 reply with usage metadata but no candidates at all."""
    reply = {
        "usageMetadata": {"promptTokenCount": 120, "totalTokenCount": 120},
        "modelVersion": _MODEL_VERSION,
    }
    return Answer("reply", payload=json.dumps(reply).encode())


def blocked(reason: str = "SAFETY") -> Answer:
    """A 200 reply whose prompt was blocked: prompt feedback, no candidates."""
    reply = {
        "promptFeedback": {"blockReason": reason},
        "usageMetadata": {"promptTokenCount": 120, "totalTokenCount": 120},
        "modelVersion": _MODEL_VERSION,
    }
    return Answer("reply", payload=json.dumps(reply).encode())


def disconnect_before_response() -> Answer:
    """Read the request, then close the connection without sending a single byte."""
    return Answer("disconnect")


def reset_after_request() -> Answer:
    """Read the request, then abort the connection with a TCP reset (SO_LINGER 0)."""
    return Answer("reset")


def partial_body(value: Any) -> Answer:
    """Send status, headers and the first half of a reply, then close mid-body."""
    reply = _candidate_reply(json.dumps(value), "STOP", DEFAULT_USAGE)
    return Answer("partial", payload=json.dumps(reply).encode())


def slow(delay_s: float, then: Answer) -> Answer:
    """Wait ``delay_s`` seconds (cut short when the server stops), then answer ``then``."""
    return Answer("slow", delay_s=delay_s, then=then)


def echo_credential(status: int = 400) -> Answer:
    """An error reply that echoes the request's API key header back in its body.

    A hostile or buggy gateway could do this; the harness must not store the key regardless.
    """
    return Answer("echo_credential", status=status)


# --- OpenAI-compatible replies -----------------------------------------------------------------


def chat_text(
    content: str | None, *, finish_reason: str | None = "stop", usage: dict[str, int] | None = None
) -> Answer:
    """A 200 chat completion whose one choice carries ``content``."""
    tokens = usage or _CHAT_USAGE
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


def model_object(model: str) -> Answer:
    """A 200 reply to ``GET models/<model>`` on an OpenAI-compatible endpoint."""
    doc = {"id": model, "object": "model", "created": 0, "owned_by": "fake"}
    return body(200, json.dumps(doc).encode())


def status_error(shape: Shape, status: int, message: str | None = None) -> Answer:
    """An HTTP ``status`` error in ``shape``'s own error format."""
    text_ = message or f"HTTP {status} from the loopback endpoint"
    if shape == "gemini":
        return error(status, _GRPC.get(status, "UNKNOWN"), text_)
    return chat_error(status, text_, _CHAT_KIND.get(status, "api_error"))


def _denied(shape: Shape) -> Answer:
    if shape == "gemini":
        return error(403, "PERMISSION_DENIED", "Permission denied: the API key was revoked.")
    return chat_error(401, "Incorrect API key provided.", "invalid_api_key")


def _usage_of(shape: Shape, payload: bytes) -> tuple[int, int, int] | None:
    """(prompt, output, thought) tokens a delivered 200 reply reports, or None."""
    try:
        doc = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    if shape == "gemini":
        usage = doc.get("usageMetadata")
        if not isinstance(usage, dict):
            return None
        return (
            int(usage.get("promptTokenCount", 0)),
            int(usage.get("candidatesTokenCount", 0)),
            int(usage.get("thoughtsTokenCount", 0)),
        )
    usage = doc.get("usage")
    if not isinstance(usage, dict):
        return None
    return int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)), 0


# --- Streamed bodies (what a hostile endpoint can send; either shape) ----------------------


def _repeat(piece: bytes, count: int | None, delay_s: float = 0.0) -> Iterator[bytes]:
    sent = 0
    while count is None or sent < count:
        if delay_s:
            time.sleep(delay_s)
        yield piece
        sent += 1


def huge(size: int) -> Answer:
    """A 200 whose body (declared with its length) is ``size`` bytes of JSON whitespace."""
    piece = b" " * (64 << 10)
    count = -(-size // len(piece))
    return Answer(
        "stream",
        chunks=functools.partial(_repeat, piece, count),
        length=count * len(piece),
    )


def endless() -> Answer:
    """A 200 whose body never ends (no length: it would end only when the connection closes)."""
    return Answer("stream", chunks=functools.partial(_repeat, b" " * (64 << 10), None))


@functools.cache
def _bomb(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    parts = [packer.compress(block) for _ in range(size >> 20)]
    return b"".join([*parts, packer.flush()])


def gzip_bomb(size: int = 1 << 30) -> Answer:
    """A 200 with ``Content-Encoding: gzip`` whose body inflates to ``size`` zero bytes (1 GiB:
    about 1 MiB on the wire)."""
    data = _bomb(size)
    return Answer("stream", chunks=lambda: iter((data,)), length=len(data), encoding="gzip")


def drip(interval_s: float) -> Answer:
    """A 200 that declares a 1 MiB body and sends it one byte per ``interval_s``: every read
    succeeds well within any read timeout, and the reply never finishes."""
    return Answer(
        "stream", chunks=functools.partial(_repeat, b" ", None, interval_s), length=1 << 20
    )


def stream(handler: BaseHTTPRequestHandler, answer: Answer, stopping: threading.Event) -> None:
    """Play a ``stream`` answer on ``handler`` until it ends, the client leaves or the server
    stops (either wire shape: the body is the same bytes)."""
    assert answer.chunks is not None
    handler.close_connection = True
    try:
        handler.send_response(answer.status)
        handler.send_header("Content-Type", answer.content_type)
        if answer.length is not None:
            handler.send_header("Content-Length", str(answer.length))
        if answer.encoding is not None:
            handler.send_header("Content-Encoding", answer.encoding)
        handler.send_header("Connection", "close")
        handler.end_headers()
        for piece in answer.chunks():
            if stopping.is_set():
                return
            handler.wfile.write(piece)
            handler.wfile.flush()
    except OSError:
        return  # the client stopped reading and closed the connection


Responder = Callable[["RecordedRequest"], Answer]
"""Answers one model request from its bytes (called on the server's threads)."""


@dataclass
class Served:
    """What the server counted: requests received, replies delivered, tokens they reported.

    ``delivered`` counts replies with status 200 written in full (metadata replies included);
    the token sums are those of the model replies among them. A reply held back, cut off, never
    answered or streamed (``huge``, ``endless``, ``gzip_bomb``, ``drip``) is not delivered.
    """

    requests: int = 0
    model_requests: int = 0
    delivered: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    thought_tokens: int = 0
    by_status: dict[int, int] = field(default_factory=dict)


@dataclass
class _State:
    shape: Shape
    script: deque[Answer] = field(default_factory=deque)
    default: Answer | None = None
    responder: Responder | None = None
    record: bool = True
    deny_key: bool = False
    status_every: tuple[int, int] | None = None
    metadata: deque[Answer] = field(default_factory=deque)
    metadata_default: Answer | None = None
    requests: list[RecordedRequest] = field(default_factory=list)
    served: Served = field(default_factory=Served)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    held: int = 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the stdlib's per-request stderr line."""

    def _recorded(self, method: str, data: bytes) -> RecordedRequest:
        return RecordedRequest(
            method=method,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=data,
        )

    def do_POST(self) -> None:
        """Record the request, then play the next answer (see the module docstring)."""
        length = int(self.headers.get("Content-Length", "0"))
        recorded = self._recorded("POST", self.rfile.read(length))
        state = self.server.state
        responder = None
        with state.lock:
            if state.record:
                state.requests.append(recorded)
            state.served.requests += 1
            state.served.model_requests += 1
            number = state.served.model_requests
            every = state.status_every
            if state.shape == "openai" and not self.path.rstrip("/").endswith("/chat/completions"):
                answer = chat_error(404, f"no route {self.path}")
            elif state.deny_key:
                answer = _denied(state.shape)
            elif every is not None and number % every[0] == 0:
                answer = status_error(state.shape, every[1])
            elif state.script:
                answer = state.script.popleft()
            elif state.responder is not None:
                responder = state.responder
            else:
                answer = state.default or (
                    output({"unscripted": True})
                    if state.shape == "gemini"
                    else chat_output({"unscripted": True})
                )
        if responder is not None:
            answer = responder(recorded)
        self.close_connection = True
        self._play(answer, recorded, model=True)

    def do_GET(self) -> None:
        """Record a metadata request, then play the next metadata answer."""
        state = self.server.state
        recorded = self._recorded("GET", b"")
        model = self.path.rsplit("/", 1)[-1].split("?", 1)[0]
        with state.lock:
            if state.record:
                state.requests.append(recorded)
            state.served.requests += 1
            if state.deny_key:
                answer = _denied(state.shape)
            elif state.metadata:
                answer = state.metadata.popleft()
            else:
                answer = state.metadata_default or (
                    model_metadata(model) if state.shape == "gemini" else model_object(model)
                )
        self.close_connection = True
        self._play(answer, recorded, model=False)

    def _hold(self) -> bool:
        """Wait while replies are held; False when the server stopped meanwhile."""
        state = self.server.state
        if state.released.is_set():
            return True
        with state.lock:
            state.held += 1
        try:
            while not state.released.wait(0.02):
                if state.stopping.is_set():
                    return False
        finally:
            with state.lock:
                state.held -= 1
        return not state.stopping.is_set()

    def _play(self, answer: Answer, recorded: RecordedRequest, *, model: bool) -> None:
        if not self._hold():
            return
        if answer.kind == "slow":
            if self.server.state.stopping.wait(answer.delay_s):
                return
            assert answer.then is not None
            try:
                self._play(answer.then, recorded, model=model)
            except OSError:
                # The client gave up (its timeout fired) and closed the socket first.
                return
        elif answer.kind == "disconnect":
            self.connection.shutdown(socket.SHUT_RDWR)
        elif answer.kind == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        elif answer.kind == "partial":
            self._send(answer.status, answer.content_type, answer.payload, cut=True)
        elif answer.kind == "stream":
            stream(self, answer, self.server.state.stopping)
        elif answer.kind == "echo_credential":
            if self.server.state.shape == "gemini":
                key = recorded.headers.get("x-goog-api-key", "")
            else:
                key = recorded.headers.get("authorization", "").removeprefix("Bearer ")
            doc = {"error": {"code": answer.status, "message": f"bad key {key}", "status": "X"}}
            self._send(answer.status, "application/json", json.dumps(doc).encode())
        else:
            self._send(answer.status, answer.content_type, answer.payload)
            self._count(answer, model=model)

    def _count(self, answer: Answer, *, model: bool) -> None:
        state = self.server.state
        usage = _usage_of(state.shape, answer.payload) if model and answer.status == 200 else None
        with state.lock:
            served = state.served
            served.by_status[answer.status] = served.by_status.get(answer.status, 0) + 1
            if answer.status == 200:
                served.delivered += 1
                if usage is not None:
                    served.prompt_tokens += usage[0]
                    served.output_tokens += usage[1]
                    served.thought_tokens += usage[2]

    def _send(self, status: int, content_type: str, payload: bytes, *, cut: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload[: len(payload) // 2] if cut else payload)
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Many cells in flight open connections in bursts (one per request); the stdlib's backlog
    # of 5 would refuse some of them, which the client sees as a transport failure.
    request_queue_size = 256
    state: _State
    dropped_clients: int = 0

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request is not a server fault: count it, print nothing.

        The stdlib prints a traceback to stderr for it, which lands in a test's captured output;
        anything else is still reported as the stdlib does.
        """
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            with self.state.lock:
                self.dropped_clients += 1
            return
        super().handle_error(request, client_address)


class FakeEndpoint:
    """A running loopback endpoint of one ``shape``; use as a context manager.

    Example:
        with FakeGemini() as fake:
            fake.script(output({"decision": "complete", "reason": "ok"}))
            ... point the client at fake.base_url ...
            assert len(fake.requests) == 1

    Raises:
        OSError: the port cannot be bound.
    """

    def __init__(
        self,
        shape: Shape,
        *,
        port: int = 0,
        responder: Responder | None = None,
        record: bool = True,
        deny_key: bool = False,
        status_every: tuple[int, int] | None = None,
    ) -> None:
        if status_every is not None and status_every[0] < 1:
            raise ValueError("status_every needs N >= 1")
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.state = _State(
            shape=shape,
            responder=responder,
            record=record,
            deny_key=deny_key,
            status_every=status_every,
        )
        self._server.state.released.set()
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def shape(self) -> Shape:
        """The wire shape served."""
        return self._server.state.shape

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/`` (Gemini) or ``http://127.0.0.1:<port>/v1`` (OpenAI)."""
        host, port = self._server.server_address[:2]
        return (
            f"http://{host!s}:{port}/" if self.shape == "gemini" else f"http://{host!s}:{port}/v1"
        )

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests received so far, in arrival order."""
        with self._server.state.lock:
            return list(self._server.state.requests)

    @property
    def generate_requests(self) -> list[RecordedRequest]:
        """The model (POST) requests received so far."""
        return [r for r in self.requests if r.method == "POST"]

    chat_requests = generate_requests

    @property
    def served(self) -> Served:
        """A copy of the counts (requests, delivered replies, their tokens)."""
        with self._server.state.lock:
            s = self._server.state.served
            return Served(
                s.requests,
                s.model_requests,
                s.delivered,
                s.prompt_tokens,
                s.output_tokens,
                s.thought_tokens,
                dict(s.by_status),
            )

    @property
    def held(self) -> int:
        """Replies held back right now (``hold``)."""
        with self._server.state.lock:
            return self._server.state.held

    def script(self, *answers: Answer) -> None:
        """Queue answers, one per future model request, before the responder."""
        with self._server.state.lock:
            self._server.state.script.extend(answers)

    def always(self, answer: Answer | None) -> None:
        """Answer every model request past the script with ``answer`` (None: the default
        off-schema 200)."""
        with self._server.state.lock:
            self._server.state.default = answer

    def metadata(self, *answers: Answer) -> None:
        """Queue answers to metadata (``GET models/<model>``) requests."""
        with self._server.state.lock:
            self._server.state.metadata.extend(answers)

    def metadata_always(self, answer: Answer | None) -> None:
        """Answer every metadata request past its script with ``answer`` (None: the metadata)."""
        with self._server.state.lock:
            self._server.state.metadata_default = answer

    def deny_key(self, deny: bool = True) -> None:
        """Answer every request from now on as a revoked key would (False: serve again)."""
        with self._server.state.lock:
            self._server.state.deny_key = deny

    @property
    def dropped_clients(self) -> int:
        """How many clients went away mid-request (reset or closed socket); never printed."""
        with self._server.state.lock:
            return self._server.dropped_clients

    def hold(self) -> None:
        """Keep every reply back from now on, until ``release`` (or the server stops)."""
        self._server.state.released.clear()

    def release(self) -> None:
        """Send the held replies and stop holding."""
        self._server.state.released.set()

    def __enter__(self) -> FakeEndpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: held and slow replies are never sent, the port is closed."""
        self._server.state.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._server.state.stopping.is_set():
            self.stop()


class FakeGemini(FakeEndpoint):
    """A loopback endpoint of the Gemini shape."""

    def __init__(
        self,
        *,
        port: int = 0,
        responder: Responder | None = None,
        record: bool = True,
        deny_key: bool = False,
        status_every: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(
            "gemini",
            port=port,
            responder=responder,
            record=record,
            deny_key=deny_key,
            status_every=status_every,
        )

    def __enter__(self) -> FakeGemini:
        self._thread.start()
        return self


class FakeOpenAI(FakeEndpoint):
    """A loopback endpoint of the OpenAI-compatible shape."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        port: int = 0,
        record: bool = True,
        deny_key: bool = False,
        status_every: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(
            "openai",
            port=port,
            responder=responder,
            record=record,
            deny_key=deny_key,
            status_every=status_every,
        )

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self
