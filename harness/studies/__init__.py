"""The studies: the static snapshot study and the V2 closed loop (``harness.studies.v2``).

Studies depend on policies, tools, store and providers; nothing in the package depends on a
study except the command line.
"""
