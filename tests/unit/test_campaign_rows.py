"""A campaign's results row (kraftlab/campaign/outcome.py): the summary's stats as columns, as many
whatever the cluster's size, so that a campaign of 1,000-partition runs keeps a small results log."""

from kraftlab.campaign.outcome import flat_stats
from kraftlab.campaign.results_log import write_parquet


def availability(partitions: int, offline: dict[int, float]) -> dict:
    return {f"t-{p}": {"offline_ms": offline.get(p, 0.0), "under_min_isr_ms": 2 * offline.get(p, 0.0),
                       "unavailable_ms": 2 * offline.get(p, 0.0)} for p in range(partitions)}


def test_availability_is_the_worst_partition_and_how_many_had_any_whatever_the_partitions():
    small = flat_stats({"acked": 5, "availability": availability(3, {1: 400.0})})
    large = flat_stats({"acked": 5, "availability": availability(1000, {1: 400.0, 999: 100.0})})
    assert small == {
        "stats.acked": 5,
        "stats.availability.max_offline_ms": 400.0, "stats.availability.partitions_offline": 1,
        "stats.availability.max_under_min_isr_ms": 800.0, "stats.availability.partitions_under_min_isr": 1,
        "stats.availability.max_unavailable_ms": 800.0, "stats.availability.partitions_unavailable": 1,
    }
    assert large.keys() == small.keys()
    assert large["stats.availability.partitions_offline"] == 2 and large["stats.availability.max_offline_ms"] == 400.0


def test_other_nested_stats_keep_their_dotted_paths():
    row = flat_stats({"load": {"offered": 10, "acked": 9}, "produce_latency_ms": {"p50": 3.0}, "placement": [1, 2]})
    assert row == {"stats.load.offered": 10, "stats.load.acked": 9, "stats.produce_latency_ms.p50": 3.0}


def test_results_parquet_keeps_first_columns_first_then_every_other_in_the_order_first_seen(tmp_path):
    import pyarrow.parquet as pq

    rows = [{"run": "a", "seed": 0, "x": 1}, {"seed": 1, "run": "b", "y": "z", "x": 2}]
    assert write_parquet(rows, tmp_path / "r.parquet", ["run", "seed"]) == 2
    assert pq.read_table(tmp_path / "r.parquet").column_names == ["run", "seed", "x", "y"]
