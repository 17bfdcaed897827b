"""``harness fake-endpoint gemini|openai``: the loopback endpoint a user rehearses with.

The real command in its own process on a free port; requests over real loopback sockets. The
first stdout line is the port; ``--status-every N CODE`` answers every N-th model request with
CODE in the shape's error format, ``--deny-key`` every request as a revoked key, ``--fail-rate``
with ``--seed`` the same faults for the same bytes; SIGINT stops it with its counts, exit 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

import pytest

from harness.providers.loopback import FakeOpenAI


def _start(*args: str) -> tuple[subprocess.Popen[str], int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", "fake-endpoint", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    return process, int(process.stdout.readline())


def _call(url: str, data: bytes | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "Traceback" not in err
    return out.strip()


def test_openai_status_every_answers_every_nth_request_in_the_openai_format() -> None:
    process, port = _start("openai", "--status-every", "2", "429")
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    statuses = [_call(url, b"{}") for _ in range(4)]
    assert [s for s, _ in statuses] == [400, 429, 400, 429]
    assert statuses[1][1]["error"]["type"] == "rate_limit_exceeded"
    assert _call(f"http://127.0.0.1:{port}/v1/models/m")[0] == 200
    summary = _stop(process)
    assert summary.startswith("received 5 requests (4 model requests, 0 transport faults)")
    assert "delivered 1 replies" in summary  # the model object; the rest were errors
    assert "400: 2, 429: 2" in summary


def test_gemini_deny_key_refuses_every_request_the_preflight_included() -> None:
    process, port = _start("gemini", "--deny-key")
    status, doc = _call(f"http://127.0.0.1:{port}/v1beta/models/gemini-2.5-flash")
    assert status == 403
    assert doc["error"]["status"] == "PERMISSION_DENIED"
    status, _ = _call(
        f"http://127.0.0.1:{port}/v1beta/models/gemini-2.5-flash:generateContent", b"{}"
    )
    assert status == 403
    assert "403: 2" in _stop(process)


def test_a_port_in_use_is_a_one_line_error() -> None:
    with FakeOpenAI() as taken:
        result = subprocess.run(
            [sys.executable, "-m", "harness", "fake-endpoint", "openai", "--port",
             str(taken.port)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().startswith(f"error: cannot listen on 127.0.0.1:{taken.port}")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [["--fail-rate", "2"], ["--status-every", "0", "429"]])
def test_bad_options_are_refused(args: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "harness", "fake-endpoint", "gemini", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
