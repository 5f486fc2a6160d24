"""Prometheus metrics from the event history (contract.md, "`metrics.om`"): `model` (the series,
folded from events) and `openmetrics` (metrics.om, one sample of every series per second)."""
