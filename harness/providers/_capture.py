"""An httpx2 transport that records what one provider attempt put on and got off the wire.

google-genai parses responses and raises its own errors; the attempt audit needs more than that:
the exact request body bytes (to prove a retry was byte-identical and to hash what was sent), the
response status and body bytes exactly as decoded from the wire (to store them for offline
replay), and whether *any* response byte arrived before a failure (the single-retry rule turns on
that). This transport wraps a real ``httpx2.HTTPTransport`` and writes those facts into the
``Capture`` bound to the calling thread.

It records, it does not decide: classification lives in each provider, the retry policy in
``_attempts.py``. It never sees or stores request headers, so the API key (sent as a header)
cannot reach a capture.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import httpx2

__all__ = ["Capture", "CapturingTransport", "bind", "unbind"]


@dataclass
class Capture:
    """Wire facts of one attempt, filled in by the transport on the SDK's worker thread."""

    request_body: bytes | None = None
    requests_sent: int = 0
    status: int | None = None
    response_started: bool = False
    response_body: bytes | None = None
    response_complete: bool = False
    partial_body: bytes = field(default=b"")


_local = threading.local()


def bind(capture: Capture) -> None:
    """Route this thread's next transport calls into ``capture``."""
    _local.capture = capture


def unbind() -> None:
    """Stop recording on this thread."""
    _local.capture = None


def _current() -> Capture | None:
    capture: Capture | None = getattr(_local, "capture", None)
    return capture


class CapturingTransport(httpx2.BaseTransport):
    """Delegates to ``inner`` and records request and response bytes into the bound Capture."""

    def __init__(self, inner: httpx2.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request``; read the whole body here so partial bytes can be recorded."""
        capture = _current()
        if capture is not None:
            capture.request_body = request.read()
            capture.requests_sent += 1
        response = self._inner.handle_request(request)
        if capture is not None:
            capture.status = response.status_code
            capture.response_started = True
        chunks: list[bytes] = []
        try:
            for chunk in response.stream:  # type: ignore[union-attr]
                chunks.append(chunk)
        except httpx2.TransportError:
            if capture is not None:
                capture.partial_body = b"".join(chunks)
            raise
        finally:
            response.close()
        raw = b"".join(chunks)
        # A fresh response over the bytes already read: httpx2 decodes any Content-Encoding
        # again from them, exactly as it would have from the socket.
        replay = httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            content=raw,
            request=request,
            extensions=response.extensions,
        )
        if capture is not None:
            capture.response_body = replay.content
            capture.response_complete = True
        return replay

    def close(self) -> None:
        """Close the wrapped transport."""
        self._inner.close()
