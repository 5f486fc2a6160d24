"""A follower's fetcher with nothing to send (no broker epoch yet, or no replica of the partitions
it follows) backs off, as Kafka's fetcher thread does (AbstractFetcherThread.maybeFetch: "There
are no active partitions. Back off for fetchBackOffMs"). Before, a back-off that had ended stayed
the broker's next deadline: the simulator woke the broker at the same instant again and again
and virtual time stopped (a swarm seed of raft_fsync off hung for minutes)."""

from actors.contract import Output
from actors.replication.replica_fetcher import REPLICA_FETCH_BACKOFF_MS, Fetcher
from actors.replication.replica_manager import ReplicaManager

from .test_replica_rules import Env


def a_fetcher_whose_back_off_has_ended(env: Env) -> tuple[ReplicaManager, Fetcher]:
    manager = ReplicaManager(env)
    f = manager.fetchers[2] = Fetcher(2)
    f.partitions[("t", 0)] = None
    f.next_fetch_ms = 5.0
    return manager, f


def test_without_a_broker_epoch_the_fetcher_backs_off_instead_of_waking_the_broker_at_once():
    env = Env()
    env.broker_epoch = None  # registering again after a restart
    manager, f = a_fetcher_whose_back_off_has_ended(env)
    manager.tick(10.0, Output())
    assert f.sent_ms is None and f.next_fetch_ms == 10.0 + REPLICA_FETCH_BACKOFF_MS
    assert manager.next_deadline() > 10.0


def test_with_no_replica_of_its_partitions_the_fetcher_backs_off_too():
    manager, f = a_fetcher_whose_back_off_has_ended(Env())
    manager.tick(10.0, Output())  # ("t", 0) has no replica here: a full request would hold nothing
    assert f.sent_ms is None and manager.next_deadline() > 10.0
