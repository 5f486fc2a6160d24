"""What a node's disk kept after a crash, told as history events (both drivers report it).

A crash's effect on the logs is a fact the history must carry (docs/reference: "what a crash's lost
page cache took"): the checks judge whether committed data is still somewhere, and whether a
replica lost data while it was a leader candidate, from it. The driver that crashed the node reads
its surviving files the way the node will recover them (the same recovery code, with nothing
written) and reports, for a broker, each replica's log as the broker will find it at its restart
(`replica_survived`: after a process crash the page cache is still there) and, for a controller
voter, its metadata log and epoch as stable storage holds them (`raft_survived`: RaftDurability
asks that committed entries be durable on some voter; one in the page cache of a voter whose
process died is one OS crash from gone).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.contract import Output
from controller_quorum.quorum_state import decode_quorum_state
from controller_quorum.raft_log import RaftLog
from observability.events import RaftSurvived, ReplicaSurvived
from storage.partition_log import PartitionLog, partition_dir_files


def survivors(node: str, files: Mapping[str, bytes], durable: Mapping[str, bytes]) -> list[Any]:
    """The events telling what `node`'s surviving files hold: `files` as they are now, `durable`
    as an OS crash now would leave them."""
    scratch = Output()  # recovery describes the cuts it would write; nothing is written here
    if node.startswith("b"):
        broker = int(node[1:])
        events = []
        for topic, partition, directory, dir_files in partition_dir_files(files):
            batches = PartitionLog.recover(directory, dir_files, scratch).batches
            events.append(ReplicaSurvived(
                broker, topic, partition, tuple(b.base_offset for b in batches), tuple(b.count for b in batches),
                tuple(b.leader_epoch for b in batches), tuple(b.crc for b in batches),
            ))
        return events
    log = RaftLog.recover(dict(durable), scratch)
    stored = decode_quorum_state(dict(durable))
    return [RaftSurvived(node, tuple(e.epoch for e in log.entries), tuple(log.crcs), 0 if stored is None else stored.epoch)]
