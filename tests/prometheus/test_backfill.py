"""metrics.om of simulated runs, loaded into a real Prometheus (Debian's package: `prometheus` and
`promtool`, which .ci/run installs) with `kraftlab metrics load`, and queried over HTTP
(`/api/v1/query_range`): the series show what happened in Last Replica Standing, with ELR on and
off, as Kafka's metrics cannot (the re-election that loses records counts as clean)."""

from __future__ import annotations

# The `prometheus` fixture (conftest.py): both runs as one campaign directory, loaded with
# `kraftlab metrics load`, served by a Prometheus on loopback; (query_range, the runs' summaries).


def values(result: list[dict]) -> list[float]:
    return [float(v) for series in result for _, v in series["values"]]


def test_records_lost_shows_the_loss_only_without_elr(prometheus):
    query_range, summaries = prometheus
    lost_off = values(query_range('kraftlab_records_lost{run="no-elr"}'))
    lost_on = values(query_range('kraftlab_records_lost{run="elr"}'))
    assert max(lost_off) == summaries["no-elr"]["stats"]["acked_lost"] > 0
    assert lost_on and max(lost_on) == 0


def test_kafkas_unclean_election_counter_stays_at_zero_while_records_are_lost(prometheus):
    query_range, _ = prometheus
    unclean = values(query_range('max(kafka_controller_controllerstats_uncleanleaderelections_total{run="no-elr"})'))
    assert unclean and max(unclean) == 0  # broker 1's re-election is "clean" to Kafka


def test_with_elr_the_partition_is_offline_with_an_elr_member_waiting(prometheus):
    query_range, _ = prometheus
    offline_with_elr = query_range('kraftlab_partition_elr_size{run="elr"} > 0 and on(run, topic, partition) '
                                   'kraftlab_partition_leader{run="elr"} == -1')
    assert len(values(offline_with_elr)) >= 5  # seconds: broker 2 is waited for
    offline = values(query_range('max(kafka_controller_kafkacontroller_offlinepartitionscount{run="elr"})'))
    assert max(offline) == 1


def test_acknowledged_records_and_latency_series(prometheus):
    query_range, summaries = prometheus
    acked = values(query_range('kraftlab_records_total{run="elr", outcome="ok"}'))
    assert max(acked) == summaries["elr"]["stats"]["acked"]
    count = values(query_range('kraftlab_produce_latency_seconds_count{run="elr"}'))
    assert max(count) == summaries["elr"]["stats"]["acked"]
    p99 = values(query_range('histogram_quantile(0.99, kraftlab_produce_latency_seconds_bucket{run="elr"})'))
    p99 = [v for v in p99 if v == v]  # NaN before the first acknowledgement
    assert p99 and max(p99) > 1.0  # records waited through the faults: seconds, not milliseconds
