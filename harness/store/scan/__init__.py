"""Verification of a run store: the longest valid prefix and one precise reason.

``verify`` reads the files and runs one module per concern over one ``state.Pass``: the lock
and schedule copies (``inputs``), the blobs (``blobs``), the attempt journal (``journal``), the
record log (``records``) and HEAD (``head``), and the manifest (``manifest``). ``views`` holds
the types records and journal entries are decoded into before they are checked. Every module
here only reads; repairs are the writer's, under the writer lock.
"""

from harness.store.scan.verify import Fault, Scan, expected_manifest, require_store, scan

__all__ = ["Fault", "Scan", "expected_manifest", "require_store", "scan"]
