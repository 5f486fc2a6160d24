"""The series served live (`kraftlab run --metrics-port PORT`): the same model that writes
metrics.om, read by `prometheus_client`'s HTTP server from the driver at each scrape.

The driver feeds the model as it collects events while the server's thread reads it: a lock
keeps a scrape from reading a half-applied event (`LockedSink`)."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from .model import FAMILIES, MetricsModel


class ModelCollector:
    """A prometheus_client collector reading the model's current samples."""

    def __init__(self, model: MetricsModel, lock: threading.Lock) -> None:
        self.model = model
        self.lock = lock

    def collect(self) -> Iterator[Any]:
        with self.lock:
            samples = list(self.model.samples())
        by_family: dict[str, list] = defaultdict(list)
        for family, sample in samples:
            by_family[family].append(sample)
        for family, rows in by_family.items():
            spec = FAMILIES[family]
            if spec.type == "histogram":
                yield _histogram(family, spec.help, rows)
                continue
            names = [k for k, _ in rows[0][1]]
            metric = (CounterMetricFamily if spec.type == "counter" else GaugeMetricFamily)(family, spec.help, labels=names)
            for _, labels, value in rows:
                metric.add_metric([v for _, v in labels], value)
            yield metric


def _histogram(family: str, help_text: str, rows) -> HistogramMetricFamily:
    buckets = [(dict(labels)["le"], value) for name, labels, value in rows if name.endswith("_bucket")]
    total = next(value for name, _, value in rows if name.endswith("_sum"))
    metric = HistogramMetricFamily(family, help_text, labels=[])
    metric.add_metric([], buckets=buckets, sum_value=total)
    return metric


class LockedSink:
    """An event sink applying events to `sink` under `lock`."""

    def __init__(self, sink: Callable[[Any], None], lock: threading.Lock) -> None:
        self.sink = sink
        self.lock = lock

    def __call__(self, rec: Any) -> None:
        with self.lock:
            self.sink(rec)


def serve(model: MetricsModel, lock: threading.Lock, host: str, port: int):
    """Start serving the model's series on http://host:port/metrics; returns the server (call
    `shutdown()` to stop it)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ModelCollector(model, lock))
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server
