"""The report's summary schema as one validator, checked against its metaschema once: `jsonschema.validate`
checks the schema itself on every call, which was most of the time of the report tests that validate
hundreds of summaries."""

from __future__ import annotations

from functools import cache

import jsonschema

from ftqual.report.schema import SUMMARY_SCHEMA


@cache
def summary_validator() -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(SUMMARY_SCHEMA)
    cls.check_schema(SUMMARY_SCHEMA)
    return cls(SUMMARY_SCHEMA)


def validate_summary(summary: dict) -> None:
    """Raises jsonschema.ValidationError (the best match) where `summary` breaks the schema."""
    error = jsonschema.exceptions.best_match(summary_validator().iter_errors(summary))
    if error is not None:
        raise error
