"""`kraftlab_records_lost` kept up incrementally (observability/metrics/lost.py) equals the cluster
view's full count (`acked_lost`, which reads every acknowledged batch) every 100 ms (simulated) of
runs that lose acknowledged records and get some back, and at their end."""

from __future__ import annotations

import pytest

from observability.metrics.lost import LostRecords
from workloads.drivers import sim_cluster
from workloads.scenario.loading import load_scenario
from workloads.steps import StepRunner


class CompareWithTheView:
    """An event sink: before each event past the next 100 ms, both counts must agree."""

    def __init__(self) -> None:
        self.lost = LostRecords()
        self.next_ms = 0.0
        self.compared: list[int] = []

    def __call__(self, rec) -> None:
        if self.lost.view is not None and rec.time_ms >= self.next_ms:
            full = self.lost.view.acked_lost()
            assert self.lost.count() == full, (rec.time_ms, full)
            self.compared.append(full)
            self.next_ms = rec.time_ms + 100.0
        self.lost(rec)


@pytest.mark.parametrize("name", ["last-replica-standing-load-no-elr", "unclean-leader-election-enabled",
                                  "tolerance-rf3-minisr2", "page-cache-recovery", "last-replica-standing-load"])
def test_the_incremental_count_equals_the_views_full_count(name):
    scenario, _ = load_scenario(name)
    compare = CompareWithTheView()
    cluster = sim_cluster(scenario, [compare])
    compare.lost.view = cluster.view()
    StepRunner(cluster, scenario).run(None)
    assert compare.lost.count() == cluster.view().acked_lost()
    assert len(compare.compared) >= 5
    if name != "last-replica-standing-load" and name != "page-cache-recovery":
        assert max(compare.compared) > 0  # the runs that lose acknowledged records did, while compared
