"""Evidence-Carrying Termination: verifier, benchmark, studies and their audit trail."""

__version__ = "0.1.0"
