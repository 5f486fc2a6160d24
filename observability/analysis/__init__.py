"""`kraftlab analyze`: a run's event history checked by Spark DataFrame jobs (docs/reference,
"`analysis/`: written by `kraftlab analyze`").

One concern per module: `errors` (bad input, told apart from bugs), `session` (the Spark session,
local or on RayDP, with Spark's logs kept off the console), `loading` (the history as a DataFrame),
`anomalies` (the contract's Jepsen-style anomalies), `completeness` (when the history cannot give a
verdict), `invariants` (violations from the run's summary), `checks` (checks.json put together) and
`output` (files written atomically).
"""
