"""Incremental fetch sessions (KIP-227, actors/replication/fetch_session.py): after a follower's
first, full fetch, its requests carry the partitions whose position moved and the leader's answers
the partitions with something new, so idle partitions cost nothing per fetch; yet the leader keeps
their followers caught up (no ISR shrink), and a restarted leader's followers start new sessions."""

from collections import Counter

from actors.replication.messages import FetchRequest, FetchResponse
from workloads.drivers import sim_cluster
from workloads.scenario.loading import validate

PARTITIONS = 20
LAG_MS = 2_000  # replica.lag.time.max.ms: the ISR shrink check runs every second


def idle_cluster(kinds: Counter | None = None):
    def count_kinds(rec) -> None:
        if kinds is not None:
            kinds[rec.kind] += 1

    cluster = sim_cluster(validate({
        "name": "fetch-sessions",
        "cluster": {"brokers": 3, "controllers": 1, "storage": "page_cache",
                    "config": {"min.insync.replicas": 2, "replica.lag.time.max.ms": LAG_MS}},
        "topics": [{"name": "t", "partitions": PARTITIONS, "replication_factor": 3}],
    }, "test_fetch_sessions.py"), event_sinks=[count_kinds])
    seen: list = []
    transmit = cluster.sim.transmit

    def recording(env):
        if isinstance(env.payload, FetchRequest | FetchResponse) and env.src.startswith("b") and env.dst.startswith("b"):
            seen.append((cluster.sim.now_ms, env.payload))
        transmit(env)

    cluster.sim.transmit = recording
    return cluster, seen


def full_isrs(view) -> bool:
    return all(len(view.partition(name).isr) == 3 for name in view.partitions())


def test_idle_partitions_are_left_out_of_fetches_and_their_followers_stay_in_sync():
    events: Counter = Counter()
    cluster, seen = idle_cluster(events)
    view = cluster.view()
    assert full_isrs(view)
    start = cluster.sim.now_ms
    cluster.run_for(5 * LAG_MS)  # five ISR shrink checks with every partition idle
    # (In the first second the followers learn the partitions and open their sessions.)
    later = [payload for at, payload in seen if at > start + 2_000]
    kinds = Counter(type(p).__name__ for p in later)
    assert kinds["FetchRequest"] > 20 and kinds["FetchResponse"] > 20  # followers keep fetching (long polls)
    # Idle: requests carry no partition and answers none (without sessions: every partition, every time).
    assert sum(len(p.partitions) for p in later) == 0, later[:4]
    assert all(p.session_epoch > 0 for p in later if isinstance(p, FetchRequest))
    # Yet every follower counts as caught up at every fetch: no ISR shrink, as without sessions
    # (a leader that forgot the skipped fetches shrinks every idle ISR, then expands it again).
    assert events["isr_shrink_proposed"] == 0, events
    assert full_isrs(view)


def test_a_restarted_leader_makes_its_followers_open_new_sessions_and_replication_goes_on():
    cluster, seen = idle_cluster()
    view = cluster.view()
    cluster.crash("b1", "process")
    restarted = cluster.sim.now_ms
    cluster.restart("b1")
    cluster.run_for(5_000)
    cluster.run_until(lambda: full_isrs(view), 30_000)
    assert full_isrs(view)
    opened = [p for at, p in seen if at >= restarted and isinstance(p, FetchRequest) and p.session_epoch == 0]
    # b1's own fetchers, and b2's and b3's fetchers to b1 (its old sessions died with it).
    assert {p.replica_id for p in opened} >= {1, 2, 3}, opened
