"""The loopback fake endpoint stays silent when a client goes away mid-request.

The stdlib's socketserver prints a traceback to stderr for any exception in a handler; a client
that resets its connection while the server reads the body raised one, which pytest captured
into an unrelated test's output and failed it. Real sockets on 127.0.0.1, a real reset.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from harness.providers.loopback import FakeGemini


def _reset_mid_body(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(
            b"POST /v1beta/models/m:generateContent HTTP/1.1\r\n"
            b'Host: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n{"partial":'
        )
        time.sleep(0.05)  # the server is now blocked reading the rest of the body
        # SO_LINGER 0: close sends RST, so the server's read fails with ECONNRESET.
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_client_reset_prints_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    with FakeGemini() as fake:
        for _ in range(3):
            _reset_mid_body(fake.port)
        deadline = time.monotonic() + 10
        while fake.dropped_clients < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert fake.dropped_clients == 3
        assert fake.requests == []
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err
    assert "Exception occurred during processing" not in captured.err
