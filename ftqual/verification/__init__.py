"""The verification chain: evidence -> checks -> metrics -> causes -> verdict -> schema.

The verification chain, in the order data flows: evidence/ (one snapshot of a run directory) ->
checks/ (pure functions of it) -> metrics (timeline and figures) -> causes (one-line causes) -> verdict
(composed once, with the expectation) -> schema (the verify report, `ftqual.verify/v1`); verify.py is
`ftqual verify`, campaign/ the seeded campaign's section of the report."""
