"""Framework adapters over ``harness.gate``, one module per framework, each an extra.

- ``harness.integrations.inspect`` (``[inspect]``, inspect-ai): ``ect_react``, ``ect_solver``,
  ``ect_certified``;
- ``harness.integrations.openai_agents`` (``[agents]``, openai-agents): ``EctAgentsGate``.

Nothing here is imported by ``harness`` itself; importing this package imports no framework.
"""
