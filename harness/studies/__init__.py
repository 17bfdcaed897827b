"""The studies: the static snapshot study (``harness.studies.static``) and the V2 closed loop
(``harness.studies.v2``), two packages of the same shape (run, records, analysis, report, cli).

Studies depend on policies, tools, store and providers; nothing in the package depends on a
study except the command line.
"""
