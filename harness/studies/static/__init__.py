"""The static snapshot study: every policy decides every benchmark snapshot once.

Modules: ``run`` (the run: policies over the snapshot grid, written through the run store;
resume), ``records`` (what the store holds for it: identity, one row and one record per
snapshot), ``analysis`` (load the verified store, recompute every endpoint and H1), ``report``
(render Markdown, CSV, LaTeX, JSON, HTML; write), ``figure`` (the interval figure), ``replay``
(every decision and report file again, offline). The commands (``harness static ...``) are
``harness.cli.static``.
"""
