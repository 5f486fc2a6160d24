"""windows.parquet (one row per second of run time) and the stats drawn from it: a hand-built
history whose every window is known, and a simulated library run."""

from __future__ import annotations

import math

import pyarrow.parquet as pq
import pytest

from kraftlab.runner import run_scenario
from observability.analysis.analyze import analyze_run
from observability.events import Fault, PartitionChange, ProduceAck
from workloads.scenario.loading import load_scenario

from .histories import PRODUCER, History

SCENARIO = """\
cluster:
  config:
    min.insync.replicas: 2
topics:
- name: t
  config:
    min.insync.replicas: null
- name: u
  config:
    min.insync.replicas: 3
"""


def ack(h: History, at: float, latencies, outcome: str = "ok", first_seq: int = 0) -> None:
    seqs = tuple(range(first_seq, first_seq + len(latencies)))
    h.add(PRODUCER, ProduceAck(PRODUCER, "t", 0, "all", outcome, seqs, tuple(latencies),
                               0 if outcome == "ok" else None, 7 if outcome == "ok" else None), at=at)


def change(h: History, at: float, node: str, topic: str, offset: int, leader, isr) -> None:
    h.add(node, PartitionChange(topic, 0, leader, offset, offset, (1, 2, 3), tuple(isr), (), (), offset,
                                False, 2, "", "test"), at=at)


def known_history() -> History:
    h = History()
    # t-0, as both voters c1 and c2 report it (c2 later): MinISR 2 (the cluster's).
    for node, lag in (("c1", 0.0), ("c2", 20.0)):
        change(h, 100 + lag, node, "t", 1, 1, (1, 2, 3))
        change(h, 1200 + lag, node, "t", 2, 1, (1,))      # under MinISR from second 1
        change(h, 3100 + lag, node, "t", 4, None, (1,))   # offline from second 3
        change(h, 5400 + lag, node, "t", 5, 2, (2, 3))    # back, with 2 in the ISR, in second 5
    # u-0: MinISR 3 (the topic's own), under it in second 0 only.
    change(h, 200, "c1", "u", 3, 1, (1, 2))
    change(h, 1900, "c1", "u", 6, 1, (1, 2, 3))
    ack(h, 400, (10.0, 20.0, 30.0))
    ack(h, 1500, (99.0,), outcome="info", first_seq=3)   # neither counted nor timed
    ack(h, 1600, (77.0,), outcome="fail", first_seq=4)
    ack(h, 2500, (100.0,), first_seq=5)
    h.add("driver", Fault("crash_os", "b1"), at=1500)
    h.add("driver", Fault("isolate", "b3"), at=2200)
    h.add("driver", Fault("restart", "b1"), at=3500)       # crash: seconds 1..3
    h.add("driver", Fault("heal", "b3"), at=4000)          # isolate: seconds 2..3 (ends at 4.000 s)
    h.add("driver", Fault("partition", "b1,c1|b2,b3"), at=4500)
    h.add("driver", Fault("link", "b1->b2", 1.0, None), at=5200)
    h.add("driver", Fault("heal", "all"), at=5800)          # ends both: seconds 4..5 and 5
    h.add("driver", Fault("isolate", "b2"), at=6100)        # never healed: to the end
    ack(h, 6500, (5.0,), first_seq=6)                       # the last row: second 6
    return h


def test_windows_of_a_known_history(spark, tmp_path):
    run = known_history().write(tmp_path / "run")
    (run / "scenario.yaml").write_text(SCENARIO)
    checks, _ = analyze_run(run, engine="local", spark=spark)
    table = pq.read_table(run / "analysis" / "windows.parquet")
    assert str(table.schema.field("second").type) == "int64"
    rows = table.to_pylist()
    assert [r["second"] for r in rows] == [0, 1, 2, 3, 4, 5, 6]
    assert [r["acked"] for r in rows] == [3, 0, 1, 0, 0, 0, 1]
    assert [r["acked_per_s"] for r in rows] == [3.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    assert [r["latency_p50_ms"] for r in rows] == [20.0, None, 100.0, None, None, None, 5.0]
    assert [r["latency_max_ms"] for r in rows] == [30.0, None, 100.0, None, None, None, 5.0]
    assert rows[0]["latency_p99_ms"] == pytest.approx(29.8)  # exact: linear interpolation
    assert [r["partitions_offline"] for r in rows] == [0, 0, 0, 1, 1, 0, 0]
    assert [r["partitions_under_min_isr"] for r in rows] == [1, 1, 1, 1, 1, 0, 0]
    assert [r["faults_active"] for r in rows] == [0, 1, 2, 2, 1, 2, 1]
    stats = checks["stats"]
    assert stats["acked"] == 5 == sum(r["acked"] for r in rows)
    assert stats["throughput_rec_s"] == pytest.approx(5 / 6.5)
    assert stats["offline_s"] == 2
    assert stats["unavailable_s"] == 5
    assert not any(p.name.endswith(".partial") for p in (run / "analysis").iterdir())


def test_windows_of_a_simulated_run(spark, tmp_path):
    # With ELR, the partition has no leader from ~27.06 s until broker 1 comes back (~28.06 s).
    name = "last-replica-standing-elr"
    scenario, _ = load_scenario(name)
    result = run_scenario(scenario, source=name, out_dir=tmp_path / "run")
    checks, _ = analyze_run(result.run_dir, engine="local", spark=spark)
    rows = pq.read_table(result.run_dir / "analysis" / "windows.parquet").to_pylist()
    assert [r["second"] for r in rows] == list(range(len(rows)))
    assert any(r["partitions_offline"] > 0 and r["faults_active"] > 0 for r in rows)
    assert sum(r["acked"] for r in rows) == checks["stats"]["acked"] == result.summary["stats"]["acked"] > 0
    assert checks["stats"]["offline_s"] == sum(1 for r in rows if r["partitions_offline"] > 0) > 0
    assert checks["stats"]["unavailable_s"] >= checks["stats"]["offline_s"]
    duration_s = (len(rows) - 1, len(rows))
    assert checks["stats"]["acked"] / duration_s[1] <= checks["stats"]["throughput_rec_s"] <= checks["stats"]["acked"] / duration_s[0]
    assert all(math.isfinite(r["latency_max_ms"]) for r in rows if r["acked"])


def test_partition_figures_of_a_known_history(spark, tmp_path):
    # The history above, per partition: t-0 carries every ack; offline in seconds 3 and 4, under
    # MinISR (2) in seconds 1..4 (seconds 0..4 at their end: ISR [1] from 1.2 s to 5.4 s);
    # u-0 (MinISR 3) is under it in second 0 only.
    run = known_history().write(tmp_path / "run")
    (run / "scenario.yaml").write_text(SCENARIO)
    analyze_run(run, engine="local", spark=spark)
    rows = {(r["topic"], r["partition"]): r for r in pq.read_table(run / "analysis" / "partitions.parquet").to_pylist()}
    assert set(rows) == {("t", 0), ("u", 0)}
    t, u = rows[("t", 0)], rows[("u", 0)]
    assert (t["acked"], t["failed"], t["indeterminate"]) == (5, 2, 1)  # failed: fail or info
    assert t["throughput_rec_s"] == pytest.approx(5 / 6.5)
    assert t["latency_max_ms"] == 100.0 and t["latency_p50_ms"] == 20.0  # of 10, 20, 30, 100, 5
    assert (t["offline_s"], t["under_min_isr_s"]) == (2, 4)
    assert (u["acked"], u["offline_s"], u["under_min_isr_s"]) == (0, 0, 1)
    assert u["latency_p50_ms"] is None and u["elections"] == 0
