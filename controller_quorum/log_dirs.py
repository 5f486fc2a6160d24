"""Which log directory a new replica goes to (KIP-858, JBOD in KRaft).

In Kafka the broker chooses: LogManager.nextLogDirs orders the broker's online directories by how
many partition logs each holds, fewest first (a stable sort, so a tie goes to the directory listed
first in log.dirs, here the lowest number), and the broker reports its choice to the controller
with AssignReplicasToDirs, which records it in the partition's `directories`
(ReplicationControlManager.handleAssignReplicasToDirs). kraftlab's controller makes the same choice
itself when it creates a replica (a new partition, or a reassignment adding a broker), counting the
replicas its metadata places in each of the broker's online directories: one record instead of two,
no moment in which a replica's directory is UNASSIGNED, and the choice is in the committed partition
record, so in the history (`partition_change.directories`). What is not modelled: the count is the
controller's metadata, not the broker's disk (a stray log a broker still holds does not count), and
no step moves a replica to another directory (AlterReplicaLogDirs).
"""

from __future__ import annotations

from collections import Counter

from .metadata import DEFAULT_DIR, MetadataImage


def fewest_replicas(online: tuple[int, ...], counts: Counter) -> int:
    """The online directory holding the fewest replicas; ties go to the lowest number (Kafka's
    LogManager.nextLogDirs). DEFAULT_DIR when none is online."""
    return min(online, key=lambda d: (counts[d], d), default=DEFAULT_DIR)


class DirectoryPlacer:
    """Places the replicas of one admin call, counting those it placed already (a topic's
    partitions spread over a broker's directories as they are created one after another)."""

    def __init__(self, image: MetadataImage, log_dirs: int) -> None:
        self.image = image
        self.log_dirs = log_dirs
        self._counts: dict[int, Counter] | None = None  # broker -> replicas per directory

    def place(self, brokers: tuple[int, ...] | list[int]) -> dict[int, int]:
        """The directory of a new replica on each of `brokers` ({} with one directory a broker:
        every replica is in DEFAULT_DIR)."""
        if self.log_dirs == 1:
            return {}
        counts = self._replica_counts()
        placed = {}
        for b in brokers:
            d = fewest_replicas(self._online_dirs(b), counts.setdefault(b, Counter()))
            counts[b][d] += 1
            placed[b] = d
        return placed

    def _online_dirs(self, broker: int) -> tuple[int, ...]:
        reg = self.image.brokers.get(broker)
        registered = reg.log_dirs if reg is not None else tuple(range(self.log_dirs))
        return tuple(d for d in registered if 0 <= d < self.log_dirs)

    def _replica_counts(self) -> dict[int, Counter]:
        """Replicas per (broker, directory) in the metadata: one pass over the partitions, on the
        first placement of the call."""
        if self._counts is None:
            self._counts = {}
            for part in self.image.partitions.values():
                for b in part.replicas:
                    self._counts.setdefault(b, Counter())[part.dir_of(b)] += 1
        return self._counts
