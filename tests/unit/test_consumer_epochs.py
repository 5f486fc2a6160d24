"""A leader's answers to a consumer that names leader epochs (KIP-320), as real Kafka clients do
through a Kafka listener (actors/runtime/kafka/): a fetch with a stale or future current leader
epoch is refused, and OffsetForLeaderEpoch says where the log ends for an epoch (the protocol
description §6.6). kraftlab's own consumer names no current epoch (-1) and is never refused."""

from actors.contract import Output
from actors.replication.messages import (
    CONSUMER,
    FENCED_LEADER_EPOCH,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_LEADER_EPOCH,
    EpochEndOffsetRequest,
    EpochEndOffsetResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ProduceRequest,
)
from actors.replication.replica_manager import ReplicaManager
from controller_quorum.metadata import PartitionRecord
from storage.codec import pack
from storage.partition_log import RecordBatch

from tests.unit.test_replica_rules import Env


def broker(leader: int = 1, epoch: int = 5) -> ReplicaManager:
    manager = ReplicaManager(Env())
    manager.apply_partition(PartitionRecord("t", 0, (1, 2, 3), (1, 2, 3), (), (), leader, epoch, 7), 0.0, Output())
    return manager


def ask(manager: ReplicaManager, request) -> object:
    out = Output()
    if isinstance(request, FetchRequest):
        manager.on_fetch_request("consumer", request, 0.0, out)
    else:
        manager.on_epoch_end_offset("consumer", request, out)
    [reply] = [e.payload for e in out.sends]
    return reply


def consumer_fetch(manager: ReplicaManager, current_leader_epoch: int) -> FetchResponse:
    return ask(manager, FetchRequest(0, CONSUMER, -1, 0, (FetchPartition("t", 0, current_leader_epoch, 0),)))


def test_a_consumer_fetch_naming_another_leader_epoch_is_refused():
    manager = broker(epoch=5)
    assert consumer_fetch(manager, 4).partitions[0].error == FENCED_LEADER_EPOCH
    assert consumer_fetch(manager, 6).partitions[0].error == UNKNOWN_LEADER_EPOCH
    assert consumer_fetch(manager, 5).partitions[0].error is None
    assert consumer_fetch(manager, -1).partitions[0].error is None  # kraftlab's own consumer


def test_offset_for_leader_epoch_tells_where_the_leader_s_log_ends_for_an_epoch():
    manager = broker(epoch=5)
    batch = RecordBatch.of(pack(["a", "b", "c"]), 3)
    manager.on_produce("p", ProduceRequest(0, "t", 0, 1, 1_000, batch), 0.0, Output())
    reply = ask(manager, EpochEndOffsetRequest(1, "t", 0, 5, 5))
    assert isinstance(reply, EpochEndOffsetResponse) and (reply.error, reply.leader_epoch, reply.end_offset) == (None, 5, 3)
    # An epoch older than any of the log's: none is <= it (Kafka answers -1, -1).
    assert (ask(manager, EpochEndOffsetRequest(2, "t", 0, 5, 3)).leader_epoch, ask(manager, EpochEndOffsetRequest(2, "t", 0, 5, 3)).end_offset) == (-1, -1)
    assert ask(manager, EpochEndOffsetRequest(3, "t", 0, 4, 5)).error == FENCED_LEADER_EPOCH
    assert ask(broker(leader=2), EpochEndOffsetRequest(4, "t", 0, -1, 5)).error == NOT_LEADER_OR_FOLLOWER
