"""Replica placement (the replication deep dive, "Kafka brokers and controller")."""

import pytest

from controller_quorum.placement import PlacementError, assign_replicas, rack_alternated


def test_three_brokers_three_partitions_rf3_as_the_deep_dive_shows():
    assert assign_replicas(3, 3, {1: None, 2: None, 3: None}) == [[1, 2, 3], [2, 3, 1], [3, 1, 2]]


def test_leaders_rotate_and_followers_shift_after_each_round():
    placed = assign_replicas(8, 2, {b: None for b in (1, 2, 3, 4)})
    assert [r[0] for r in placed] == [1, 2, 3, 4, 1, 2, 3, 4]
    assert placed[:4] == [[1, 2], [2, 3], [3, 4], [4, 1]]
    assert placed[4:] == [[1, 3], [2, 4], [3, 1], [4, 2]]  # the second round shifts the follower


def test_rack_aware_placement_spreads_each_partition_over_racks():
    brokers = {b: f"rack{(b - 1) % 3}" for b in range(1, 7)}
    assert rack_alternated(brokers) == [1, 2, 3, 4, 5, 6]
    for replicas in assign_replicas(6, 3, brokers):
        assert len({brokers[b] for b in replicas}) == 3
        assert len(set(replicas)) == 3


def test_rack_aware_with_fewer_racks_than_replicas_still_uses_distinct_brokers():
    brokers = {1: "a", 2: "a", 3: "b", 4: "b"}
    for replicas in assign_replicas(4, 3, brokers):
        assert len(set(replicas)) == 3 and {brokers[b] for b in replicas} == {"a", "b"}


def test_replication_factor_above_the_broker_count_is_refused():
    with pytest.raises(PlacementError):
        assign_replicas(1, 4, {1: None, 2: None, 3: None})
