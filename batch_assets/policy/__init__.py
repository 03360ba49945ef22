"""Sensitive-data gate (Dagster-free): detect, redact, block before anything goes to a provider.

- `detectors`: the detectors (regex candidates in DuckDB, Python confirmation).
- `scan.find_sensitive`: set-based scan of a whole relation into a findings table.
- `redact`: placeholders, redacted-text relation, local mapping, `restore`.
- `model`: `PolicySpec` (a task's `policy:` section) and `evaluate`.
"""

from batch_assets.policy.detectors import DEFAULT_DETECTORS, DETECTOR_NAMES, Detector, default_detectors
from batch_assets.policy.model import DetectorActions, PolicyOutcome, PolicySpec, evaluate
from batch_assets.policy.redact import Redaction, load_mapping, redact, restore
from batch_assets.policy.scan import find_sensitive

__all__ = [
    "DEFAULT_DETECTORS",
    "DETECTOR_NAMES",
    "Detector",
    "DetectorActions",
    "PolicyOutcome",
    "PolicySpec",
    "Redaction",
    "default_detectors",
    "evaluate",
    "find_sensitive",
    "load_mapping",
    "redact",
    "restore",
]
