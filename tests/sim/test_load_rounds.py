"""The load generator's rounds (actors/clients/producer.py, `LOAD_TICK_MS`): what is due is queued
every 10 ms on a fixed grid from the load's start, however busy the producer is meanwhile.

Before: the producer asked to be woken 10 ms after whatever it last handled, so every
acknowledgement pushed the next round back; under steady load the rounds came every 13-17 ms
(median 15.3 ms at 20,000 records/s) in bigger bursts, which then queued behind one another
(one batch in flight per partition)."""

from statistics import median

from actors.clients.load_generator import LOAD_TICK_MS
from observability.events import LoadStarted, ProduceSend
from workloads.scenario.step_spec import LoadArgs

from .load_world import one_partition_load

RATE = 20_000  # records/s: a batch acknowledged every few ms, between the rounds


def test_load_rounds_fall_every_10_ms_on_the_grid_while_acknowledgements_arrive():
    started: list[float] = []
    rounds: list[float] = []

    def watch(rec) -> None:
        if isinstance(rec.event, LoadStarted):
            started.append(rec.time_ms)
        elif isinstance(rec.event, ProduceSend) and (not rounds or rounds[-1] != rec.time_ms):
            rounds.append(rec.time_ms)

    load = LoadArgs(producers=1, rate_per_s=RATE, message_bytes=100, acks="all", duration_ms=2_000)
    c = one_partition_load("load-rounds", load, watch)
    c.run_for(2_500)
    c.clients.finish()

    assert c.view().load_stats()["acked"] > 0.9 * 2 * RATE  # acknowledgements kept coming
    start = started[0]
    gaps = [b - a for a, b in zip(rounds, rounds[1:])]
    assert median(gaps) == LOAD_TICK_MS
    # every round after the first falls on the grid start + k x 10 ms
    assert all(abs((t - start) / LOAD_TICK_MS - round((t - start) / LOAD_TICK_MS)) < 1e-6 for t in rounds[1:])
    assert len(rounds) >= 2_000 / LOAD_TICK_MS - 1
    assert c.view().acked_lost() == 0 and c.violations() == []
