"""Example planner plug-ins for ``--planner python:PATH_OR_MODULE:ATTR``.

- ``minimal``: a deterministic planner in a page of plain Python (no harness imports), showing
  the request it gets and the three actions it can return.
- ``simulated``: a wrapper around the built-in simulated planner; copy it and edit ``respond``
  to change how the agent behaves.

Use them by module name (``python:harness.examples.planners.minimal:PLANNER``) or copy a file
and name its path (``python:./my_planner.py:PLANNER``). A plug-in is trusted code: it runs
inside the harness process.
"""
