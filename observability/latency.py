"""Produce latency as an HdrHistogram (microseconds, 2 significant digits).

A histogram rather than a list of samples: a load producer acknowledges tens of thousands of
records a second, and on Ray the driver copies every client's role each poll, so the state must
stay a few hundred bytes however long the run. HdrHistogram itself does not pickle (its counts are
a ctypes array), so the state travels in HdrHistogram's own compressed encoding.
"""

from __future__ import annotations

from typing import Any

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour: anything longer is clamped
SIGNIFICANT_DIGITS = 2


class LatencyHistogram:
    """Latencies in ms recorded at microsecond resolution; percentiles within 1%."""

    def __init__(self) -> None:
        self._h = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)

    def record_ms(self, latency_ms: float, count: int = 1) -> None:
        us = min(max(int(latency_ms * 1000.0), LOWEST_US), HIGHEST_US)
        self._h.record_value(us, count)

    def add(self, other: LatencyHistogram) -> None:
        self._h.add(other._h)

    @property
    def count(self) -> int:
        return self._h.get_total_count()

    def percentile_ms(self, percentile: float) -> float | None:
        if self.count == 0:
            return None
        return self._h.get_value_at_percentile(percentile) / 1000.0

    def summary(self) -> dict[str, float | int | None]:
        """The figures reported in a run summary (None when nothing was recorded)."""
        return {
            "count": self.count,
            "p50": self.percentile_ms(50),
            "p99": self.percentile_ms(99),
            "p999": self.percentile_ms(99.9),
            "max": None if self.count == 0 else self._h.get_max_value() / 1000.0,
        }

    def __getstate__(self) -> dict[str, Any]:
        return {"encoded": self._h.encode() if self.count else None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._h = HdrHistogram.decode(state["encoded"]) if state["encoded"] else HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
