"""Inference shared by the static and V2 studies: exact McNemar, cluster bootstrap, macro-F1.

Pure functions of arrays and seeds; no I/O. Tables and figures live with each study's report.
"""

from harness.analysis.stats import (
    BootstrapInterval,
    cluster_bootstrap_difference,
    macro_f1,
    mcnemar_exact,
)

__all__ = ["BootstrapInterval", "cluster_bootstrap_difference", "macro_f1", "mcnemar_exact"]
