"""Synthetic tools: the catalog the agents call, and the trusted adapter that records calls.

``harness.tools.catalog`` (the tools) and ``harness.json_schema`` (the JSON Schema subset they
declare their arguments and responses in) import the standard library only, so a sandboxed
child can run ``from harness.tools.catalog import call_tool`` under ``python -I -S`` with
nothing but the project root on ``sys.path``. This package ``__init__`` therefore imports
nothing either.
``harness.tools.adapter`` (trace -> receipts) is trusted parent-side code and may use the
project's canonical encoding.
"""
