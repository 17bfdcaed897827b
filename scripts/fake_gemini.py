"""A Gemini-shaped endpoint on 127.0.0.1 answering with the simulated provider's behaviour.

Speaks the ``generateContent`` wire format of the pinned google-genai client (and the model
metadata request preflight makes), and answers every planner and critic request as the simulated
provider would, deterministically from the request bytes alone (``harness.providers.loopback_sim``;
the server itself is ``harness.providers.loopback``, the one the tests script). With it the whole
study runs through the real Gemini client path, offline:

    .venv/bin/python scripts/fake_gemini.py --port 0 --latency-ms 200 &   # prints its port first
    HARNESS_FAKE_KEY=any harness v2 run --provider gemini \\
        --provider-base-url http://127.0.0.1:PORT --credential-env HARNESS_FAKE_KEY --max-cells 8

Options: ``--latency-ms N`` (each reply waits N ms), ``--jitter F`` (up to +-F*N, drawn from
``--seed`` and the request bytes), ``--fail-rate P`` (that share of requests, chosen the same
way, get a transport fault: reset or closed after the request was read), ``--port 0`` (a free
port). The first line of stdout is the port; the server runs until SIGINT or SIGTERM, then
prints how many requests it answered.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from harness.providers.loopback import FakeGemini
from harness.providers.loopback_sim import SimulatedResponder
from harness.resources import data_path
from harness.studies.v2.config import DEFAULT_CONFIG_PATH, load_config


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay of every reply")
    parser.add_argument("--jitter", type=float, default=0.0, help="latency jitter, share of it")
    parser.add_argument("--fail-rate", type=float, default=0.0, help="share of transport faults")
    parser.add_argument("--seed", type=int, default=0, help="seed of the jitter and fault draws")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be 0..65535, not {args.port}")
    if args.latency_ms < 0:
        parser.error(f"--latency-ms must be >= 0, not {args.latency_ms}")
    if not 0.0 <= args.jitter <= 1.0 or not 0.0 <= args.fail_rate <= 1.0:
        parser.error("--jitter and --fail-rate must be between 0 and 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGINT or SIGTERM."""
    args = _args(argv)
    config, _ = load_config(data_path(DEFAULT_CONFIG_PATH))
    responder = SimulatedResponder(
        config.generation_config,
        latency_ms=args.latency_ms,
        jitter=args.jitter,
        fail_rate=args.fail_rate,
        seed=args.seed,
    )
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    try:
        server = FakeGemini(port=args.port, responder=responder, record=False)
    except OSError as e:
        print(f"error: cannot listen on 127.0.0.1:{args.port}: {e.strerror}", file=sys.stderr)
        return 2
    with server:
        print(server.port, flush=True)
        print(f"listening on {server.base_url}", file=sys.stderr, flush=True)
        done.wait()
    print(f"answered {responder.answered} requests ({responder.faults} faults)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
