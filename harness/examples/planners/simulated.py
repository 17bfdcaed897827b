"""The built-in simulated planner as a plug-in, for you to edit.

Use: ``--planner python:harness.examples.planners.simulated:PLANNER``.

Copy this file and edit ``respond`` to change the agent: it rebuilds the request the simulated
provider would answer (same cell, seed, messages and view) and asks the built-in fallible
planner (``harness.providers.sim_planner``) for its action, drawing from the same seeded stream.
Unedited, a run with it gives the simulated run's outcome rows (labelled as a plug-in run).
``BEHAVIOUR`` holds the fallibility rates (``PlannerBehaviour``): change one to get a more or
less careful agent.
"""

from __future__ import annotations

from typing import Any

import msgspec

from harness.providers.config import default_generation_config
from harness.providers.kinds import Role
from harness.providers.protocol import Message, ProviderRequest
from harness.providers.sim_planner import FalliblePlanner
from harness.providers.simulated import request_stream

CONFIG = default_generation_config()
BEHAVIOUR = CONFIG.simulated.planner  # e.g. msgspec.structs.replace(BEHAVIOUR, premature_rate=0.2)


class SimulatedPlanner:
    """The built-in fallible planner behind the plug-in interface."""

    def __init__(self) -> None:
        """Use ``BEHAVIOUR``'s rates."""
        simulated = msgspec.structs.replace(CONFIG.simulated, planner=BEHAVIOUR)
        self._config = msgspec.structs.replace(CONFIG, simulated=simulated)
        self._planner = FalliblePlanner()

    def respond(self, request: dict[str, Any]) -> dict[str, Any]:
        """The simulated planner's action for this decision."""
        provider_request = ProviderRequest(
            role=Role.PLANNER,
            cell_id=request["cell_id"],
            prompt_id=request["prompt_id"],
            messages=tuple(Message(role=m["role"], text=m["text"]) for m in request["messages"]),
            view=request["view"],
            response_schema=request["response_schema"],
            seed=request["seed"],
            config=self._config,
        )
        return self._planner.respond(provider_request, request_stream(provider_request))


PLANNER = SimulatedPlanner()
