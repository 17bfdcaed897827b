"""A Gemini-shaped REST endpoint on 127.0.0.1: the real google-genai client with no network.

Two uses share this one server. The tests script it (``FakeGemini.script``): it plays failures
exactly where a test wants them. ``scripts/fake_gemini.py`` (and the concurrency tests and
benchmark) give it a *responder* instead (``loopback_sim.SimulatedResponder``): every
``generateContent`` request past the script is answered with the simulated provider's
behaviour, computed from the request bytes alone.

The server listens on a loopback port (0: a free one), records every request it receives
(method, path, headers, body bytes; ``record=False`` keeps none, for long runs) and answers each
one with the next scripted ``Answer``: a well-formed
``generateContent`` reply, an HTTP error (JSON or HTML), a malformed or truncated body, a
blocked or empty reply, a disconnect before any response byte, a connection reset after the
request was read, a partial body, a reply slower than the client's timeout, or a streamed body
(``huge``, ``endless``, ``gzip_bomb``, ``drip``: what a hostile endpoint can send).

Scripted, it is not a model: it never interprets a prompt. It answers ``POST
/v1beta/models/<model>:generateContent`` from the script (then the responder's answer, else
``always``'s answer, by default an off-schema 200), and ``GET /v1beta/models/<model>`` (the
model's metadata: the preflight request) from its own script (then ``metadata_always``'s
answer, by default the model's metadata).
Every reply closes the connection (``Connection: close``) so no request ever rides on a reused
socket and each attempt is one connection.
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
    "Answer",
    "FakeGemini",
    "Responder",
    "RecordedRequest",
    "blocked",
    "body",
    "disconnect_before_response",
    "drip",
    "echo_credential",
    "endless",
    "error",
    "gzip_bomb",
    "huge",
    "model_metadata",
    "no_candidates",
    "output",
    "partial_body",
    "reset_after_request",
    "slow",
    "stream",
    "text",
]

DEFAULT_USAGE: Final = {"prompt": 120, "output": 30, "thoughts": 50}
_MODEL_VERSION: Final = "gemini-2.5-flash-fake"

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
    stops (both fakes play it)."""
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
"""Answers one generateContent request from its bytes (called on the server's threads)."""


@dataclass
class _State:
    script: deque[Answer] = field(default_factory=deque)
    default: Answer | None = None
    responder: Responder | None = None
    record: bool = True
    metadata: deque[Answer] = field(default_factory=deque)
    metadata_default: Answer | None = None
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the stdlib's per-request stderr line."""

    def do_POST(self) -> None:
        """Record the request, then play the next scripted answer."""
        length = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(length)
        state = self.server.state
        recorded = RecordedRequest(
            method="POST",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=data,
        )
        responder = None
        with state.lock:
            if state.record:
                state.requests.append(recorded)
            if state.script:
                answer = state.script.popleft()
            elif state.responder is not None:
                responder = state.responder
            else:
                answer = state.default or output({"unscripted": True})
        if responder is not None:
            answer = responder(recorded)
        self.close_connection = True
        self._play(answer, recorded)

    def do_GET(self) -> None:
        """Record a metadata request, then play the next scripted metadata answer."""
        state = self.server.state
        recorded = RecordedRequest(
            method="GET",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=b"",
        )
        model = self.path.rsplit("/", 1)[-1].split("?", 1)[0]
        with state.lock:
            if state.record:
                state.requests.append(recorded)
            if state.metadata:
                answer = state.metadata.popleft()
            else:
                answer = state.metadata_default or model_metadata(model)
        self.close_connection = True
        self._play(answer, recorded)

    def _play(self, answer: Answer, recorded: RecordedRequest) -> None:
        if answer.kind == "slow":
            if self.server.state.stopping.wait(answer.delay_s):
                return
            assert answer.then is not None
            try:
                self._play(answer.then, recorded)
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
            key = recorded.headers.get("x-goog-api-key", "")
            error = {"error": {"code": answer.status, "message": f"bad key {key}", "status": "X"}}
            self._send(answer.status, "application/json", json.dumps(error).encode())
        else:
            self._send(answer.status, answer.content_type, answer.payload)

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


class FakeGemini:
    """A running fake endpoint; use as a context manager.

    Example:
        with FakeGemini() as fake:
            fake.script(output({"decision": "complete", "reason": "ok"}))
            ... point the client at fake.base_url ...
            assert len(fake.requests) == 1
    """

    def __init__(
        self, *, port: int = 0, responder: Responder | None = None, record: bool = True
    ) -> None:
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.state = _State(responder=responder, record=record)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests received so far, in arrival order."""
        with self._server.state.lock:
            return list(self._server.state.requests)

    def script(self, *answers: Answer) -> None:
        """Queue answers, one per future request; unscripted requests get a plain 200."""
        with self._server.state.lock:
            self._server.state.script.extend(answers)

    def always(self, answer: Answer | None) -> None:
        """Answer every generateContent request past the script with ``answer`` (None: the
        default off-schema 200)."""
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

    @property
    def dropped_clients(self) -> int:
        """How many clients went away mid-request (reset or closed socket); never printed."""
        with self._server.state.lock:
            return self._server.dropped_clients

    @property
    def generate_requests(self) -> list[RecordedRequest]:
        """The generateContent requests received so far."""
        return [r for r in self.requests if r.method == "POST"]

    def __enter__(self) -> FakeGemini:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.state.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
