"""The static snapshot study: every policy decides every benchmark snapshot once.

Modules: ``run`` (the run: policies over the snapshot grid), ``records`` (the run folder:
decision records, attempt journal, blobs, run.json), ``analysis`` (load the run folder,
recompute every endpoint and H1), ``report`` (render Markdown, CSV, LaTeX, JSON, HTML; write),
``figure`` (the interval figure) and ``_cli`` (``harness static ...``).
"""
