"""ECT for any MCP agent: a proxy that records receipts for upstream tools and gates submit.

- ``naming``: ``--upstream`` specs, collision-free tool names, episode ids (pure);
- ``results``: the result document extractors read, forwarded and submit results (pure);
- ``episode``: one agent run's gate session and run directory (no ``mcp``);
- ``server``: the proxy (``mcp`` SDK); ``serve``: stdio or HTTP (the command is
  ``harness.cli.mcp_proxy``);
- ``benchmark``: the benchmark's tools as an MCP server, and a contract file per task.

Importing this package imports nothing of ``mcp``; ``server``, ``serve`` and ``benchmark`` do
(the ``[mcp]`` extra). See docs/mcp.md.
"""
