"""An httpx2 transport that records what one provider attempt put on and got off the wire.

google-genai parses responses and raises its own errors; the attempt audit needs more than that:
the exact request body bytes (to prove a retry was byte-identical and to hash what was sent), the
response status and body bytes exactly as decoded from the wire (to store them for offline
replay), and whether *any* response byte arrived before a failure (the single-retry rule turns on
that). This transport wraps a real ``httpx2.HTTPTransport`` and writes those facts into the
``Capture`` bound to the calling thread.

It also bounds what an attempt may hold (``limits.MAX_REPLY_BYTES``): the body is read only up
to the bound as it arrives, and decompressed here (gzip and deflate, the encodings it asks for)
only up to the bound again, so neither an endless body nor a gzip bomb can grow the process. A
reply over the bound ends the call with ``ReplyTooLargeError`` and keeps its first
``limits.KEPT_PREFIX_BYTES``. And it holds the attempt to its overall deadline
(``Capture.deadline``): every timeout of the request is cut to the time left, and the body stops
being read once the deadline has passed, so a reply dripping a byte at a time cannot keep a
worker thread (and the capacity it holds) past the attempt.

It records, it does not decide: classification lives in each provider, the retry policy in
``network.py``. It never sees or stores request headers, so the API key (sent as a header)
cannot reach a capture.
"""

from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Final, NoReturn

import httpx2

from harness.providers.limits import KEPT_PREFIX_BYTES, MAX_REPLY_BYTES

__all__ = [
    "AttemptDeadlineError",
    "Capture",
    "CapturingTransport",
    "ReplyTooLargeError",
    "bind",
    "unbind",
]

# What this transport decodes itself, bounded; a server that uses anything else is refused.
_ACCEPT_ENCODING: Final = "gzip, deflate"
_TIMEOUTS: Final = ("connect", "read", "write", "pool")


class ReplyTooLargeError(httpx2.TransportError):
    """The reply exceeded ``MAX_REPLY_BYTES`` (as received or decompressed); it was not read on."""


class AttemptDeadlineError(httpx2.TimeoutException):
    """The attempt's overall deadline passed while its reply was still arriving."""


@dataclass
class Capture:
    """Wire facts of one attempt, filled in by the transport on the SDK's worker thread.

    ``deadline`` (a ``time.monotonic`` instant, set by the caller) bounds the whole attempt;
    ``too_large`` says why a reply over the bound was cut off (its first bytes are in
    ``partial_body``).
    """

    request_body: bytes | None = None
    requests_sent: int = 0
    status: int | None = None
    response_started: bool = False
    response_body: bytes | None = None
    response_complete: bool = False
    partial_body: bytes = field(default=b"")
    deadline: float | None = None
    too_large: str | None = None


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


class _OverflowError(Exception):
    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix


def _inflate_with(data: bytes, wbits: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    out = bytearray()
    pending = data
    while pending and not inflater.eof:
        # max_length: never more than one byte past the bound per step, whatever the ratio.
        out += inflater.decompress(pending, MAX_REPLY_BYTES + 1 - len(out))
        if len(out) > MAX_REPLY_BYTES:
            raise _OverflowError(bytes(out[:KEPT_PREFIX_BYTES]))
        pending = inflater.unconsumed_tail
    out += inflater.flush()
    if len(out) > MAX_REPLY_BYTES:
        raise _OverflowError(bytes(out[:KEPT_PREFIX_BYTES]))
    return bytes(out)


def _decode(data: bytes, header: str | None, request: httpx2.Request) -> bytes:
    """``data`` with its content codings undone (last applied first), bounded."""
    codings = [c.strip().lower() for c in (header or "").split(",") if c.strip()]
    for coding in reversed(codings):
        try:
            if coding in ("gzip", "x-gzip"):
                data = _inflate_with(data, 16 + zlib.MAX_WBITS)
            elif coding == "deflate":
                try:
                    data = _inflate_with(data, zlib.MAX_WBITS)
                except zlib.error:
                    data = _inflate_with(data, -zlib.MAX_WBITS)  # raw deflate, as some send
            elif coding != "identity":
                raise httpx2.DecodingError(
                    f"unsupported content-encoding {coding!r}", request=request
                )
        except zlib.error as e:
            raise httpx2.DecodingError(f"{coding} body: {e}", request=request) from e
    return data


def _cut_timeouts(request: httpx2.Request, deadline: float) -> None:
    """No single wait of ``request`` may outlast the attempt's deadline."""
    left = max(deadline - time.monotonic(), 0.001)
    timeouts = dict(request.extensions.get("timeout") or {})
    for name in _TIMEOUTS:
        value = timeouts.get(name)
        timeouts[name] = left if value is None else min(float(value), left)
    request.extensions["timeout"] = timeouts


class CapturingTransport(httpx2.BaseTransport):
    """Delegates to ``inner``; records request and response bytes into the bound Capture."""

    def __init__(self, inner: httpx2.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request``; read the body here, bounded, so partial bytes can be recorded."""
        capture = _current()
        deadline = None if capture is None else capture.deadline
        request.headers["Accept-Encoding"] = _ACCEPT_ENCODING
        if deadline is not None:
            if time.monotonic() >= deadline:
                raise AttemptDeadlineError("the attempt's deadline passed before it was sent")
            _cut_timeouts(request, deadline)
        if capture is not None:
            capture.request_body = request.read()
            capture.requests_sent += 1
        response = self._inner.handle_request(request)
        if capture is not None:
            capture.status = response.status_code
            capture.response_started = True
        chunks: list[bytes] = []
        received = 0
        try:
            for chunk in response.stream:  # type: ignore[union-attr]
                chunks.append(chunk)
                received += len(chunk)
                if received > MAX_REPLY_BYTES:
                    raw = b"".join(chunks)
                    self._too_large(
                        capture, raw[:KEPT_PREFIX_BYTES], f"more than {MAX_REPLY_BYTES} bytes"
                    )
                if deadline is not None and time.monotonic() >= deadline:
                    if capture is not None:
                        capture.partial_body = b"".join(chunks)
                    raise AttemptDeadlineError("the attempt's deadline passed mid-reply")
        except httpx2.TransportError:
            if capture is not None and capture.too_large is None and not capture.partial_body:
                capture.partial_body = b"".join(chunks)
            raise
        finally:
            response.close()
        raw = b"".join(chunks)
        del chunks
        headers = httpx2.Headers(response.headers)
        try:
            content = _decode(raw, headers.get("Content-Encoding"), request)
        except _OverflowError as e:
            self._too_large(
                capture, e.prefix, f"more than {MAX_REPLY_BYTES} bytes once decompressed"
            )
        # A fresh response over the decoded bytes: the client parses exactly what was kept.
        for name in ("Content-Encoding", "Content-Length", "Transfer-Encoding"):
            headers.pop(name, None)
        replay = httpx2.Response(
            status_code=response.status_code,
            headers=headers,
            content=content,
            request=request,
            extensions=response.extensions,
        )
        if capture is not None:
            capture.response_body = content
            capture.response_complete = True
        return replay

    @staticmethod
    def _too_large(capture: Capture | None, prefix: bytes, what: str) -> NoReturn:
        reason = (
            f"the reply body has {what} (the bound is {MAX_REPLY_BYTES}); "
            f"it was not read further and its first {len(prefix)} bytes are kept"
        )
        if capture is not None:
            capture.too_large = reason
            capture.partial_body = prefix
        raise ReplyTooLargeError(reason)

    def close(self) -> None:
        """Close the wrapped transport."""
        self._inner.close()
