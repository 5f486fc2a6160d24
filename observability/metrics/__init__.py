"""Prometheus metrics from the event history (docs/reference/metrics.md): `model` (the series,
folded from events) and `openmetrics` (metrics.om, one sample of every series per second)."""
