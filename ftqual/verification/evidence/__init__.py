"""Evidence readers: one streaming parser per source of a run directory, assembled into a RunSnapshot."""

from ftqual.verification.evidence.run_meta import RunMetaError
from ftqual.verification.evidence.snapshot import RunSnapshot, build_snapshot

__all__ = ["RunMetaError", "RunSnapshot", "build_snapshot"]
