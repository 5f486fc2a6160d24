"""Replica placement for new topics: Kafka's round-robin assignment (AdminUtils), rack-aware when
the brokers have racks (the replication deep dive, "Kafka brokers and controller").

With 3 brokers, 3 partitions and RF 3 it gives [1,2,3], [2,3,1], [3,1,2]: the first replica of each
partition (its preferred leader) moves by one broker per partition, and followers are spread by a
shift that grows once per round of partitions. Kafka starts at a random broker; kraftlab starts at
the first (index 0) so that placements are the ones the documents show.
"""

from __future__ import annotations


class PlacementError(ValueError):
    pass


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(partitions: int, replication_factor: int, brokers: dict[int, str | None], start_index: int = 0) -> list[list[int]]:
    """`brokers`: broker id -> rack (None without racks). Returns the replica list per partition."""
    if replication_factor <= 0:
        raise PlacementError("replication factor must be positive")
    if replication_factor > len(brokers):
        raise PlacementError(f"replication factor {replication_factor} larger than the {len(brokers)} available brokers")
    if all(rack is not None for rack in brokers.values()) and brokers:
        return _rack_aware(partitions, replication_factor, brokers, start_index)
    return _rack_unaware(partitions, replication_factor, sorted(brokers), start_index)


def _rounds(partitions: int, n: int, start_index: int):
    """Per partition: the index of its first replica, and the follower shift (one more per round)."""
    shift = start_index
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        yield (p + start_index) % n, shift


def _rack_unaware(partitions: int, rf: int, ids: list[int], start_index: int) -> list[list[int]]:
    n = len(ids)
    return [
        [ids[first]] + [ids[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
        for first, shift in _rounds(partitions, n, start_index)
    ]


def rack_alternated(brokers: dict[int, str]) -> list[int]:
    """Brokers ordered rack by rack in turn (racks sorted, brokers sorted within a rack)."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers):
        by_rack.setdefault(brokers[b], []).append(b)
    racks = sorted(by_rack)
    iters = {r: iter(by_rack[r]) for r in racks}
    result: list[int] = []
    i = 0
    while len(result) < len(brokers):
        nxt = next(iters[racks[i]], None)
        if nxt is not None:
            result.append(nxt)
        i = (i + 1) % len(racks)
    return result


def _rack_aware(partitions: int, rf: int, brokers: dict[int, str], start_index: int) -> list[list[int]]:
    arranged = rack_alternated(brokers)
    n = len(arranged)
    num_racks = len(set(brokers.values()))
    result = []
    for first, shift in _rounds(partitions, n, start_index):
        leader = arranged[first]
        replicas = [leader]
        racks_used = {brokers[leader]}
        k = 0
        while len(replicas) < rf:
            broker = arranged[_replica_index(first, shift * num_racks, k, n)]
            rack = brokers[broker]
            # Skip a broker whose rack already holds a replica while some rack holds none, and a
            # broker that already holds one while some broker holds none.
            if (rack not in racks_used or len(racks_used) == num_racks) and (broker not in replicas or len(replicas) == n):
                replicas.append(broker)
                racks_used.add(rack)
            k += 1
        result.append(replicas)
    return result
