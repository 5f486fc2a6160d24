"""The availability figures: offline and under-min-ISR time from the voters' partition_change events."""

from observability.availability import AvailabilityTracker
from observability.events import EventRecord, PartitionChange
from observability.latency import LatencyHistogram


def state(tracker, at_ms, epoch, leader, under, node="c1"):
    change = PartitionChange("t", 0, leader, epoch, epoch, (1, 2, 3), (), (), (), 10 + epoch, under, 2, "RECOVERED", "test")
    tracker(EventRecord(at_ms, node, 0, epoch, change))


def test_offline_and_under_min_isr_time_add_up_per_condition():
    t = AvailabilityTracker()
    state(t, 0, 0, 1, False)  # created
    state(t, 1_000, 1, 1, True)  # ISR shrank below min: acks=all refused
    state(t, 3_000, 2, None, True)  # leader lost
    state(t, 7_000, 3, 2, True)  # broker 2 elected, ISR still below min
    state(t, 8_000, 4, 2, False)
    assert t.report(10_000) == {"t-0": {"offline_ms": 4_000.0, "under_min_isr_ms": 7_000.0, "unavailable_ms": 7_000.0}}


def test_a_lagging_voter_repeating_an_old_epoch_changes_nothing():
    t = AvailabilityTracker()
    state(t, 0, 0, 1, False)
    state(t, 1_000, 1, None, True)
    state(t, 2_000, 2, 3, False)
    state(t, 2_500, 1, None, True, node="c3")  # c3 applies epoch 1 late
    assert t.report(4_000)["t-0"]["offline_ms"] == 1_000.0


def test_latency_histogram_percentiles_survive_a_copy():
    import pickle

    h = LatencyHistogram()
    for ms in range(1, 1001):
        h.record_ms(float(ms))
    copy = pickle.loads(pickle.dumps(h))
    assert copy.count == 1000
    assert abs(copy.percentile_ms(50) - 500) <= 5 and abs(copy.percentile_ms(99) - 990) <= 10
    assert LatencyHistogram().summary()["p99"] is None

