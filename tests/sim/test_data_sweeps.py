"""Randomized sweeps of whole clusters with the data plane under acks=all load (tests/sim/
data_world.py): random OS and process crashes, isolations and partitions of brokers and voters.

With every protocol switch on, no invariant of protocol-facts.md is violated and the quorum shows
no disruption, except where protocol-facts.md allows it: a partition that suffered MinISR lossy
unclean shutdowns of leader candidates (beyond the protocol's tolerance, f = MinISR - 1, §6.2 and
§6.8) may lose acknowledged records, and its unclean recovery then breaks LeaderCompleteness and
what follows from it. Each switch turned off is caught by some seed; the tests print how many
seeds it took.
"""

import pytest

from .data_world import PROFILE, SLOW_LINKS, SWITCHES, run_seed

SEEDS = 300
# What an unclean recovery beyond the tolerance implies (and only on that partition).
BEYOND_TOLERANCE_ALLOWED = {"LeaderCompleteness", "TrueHWMMonotonic", "ConsistentRead", "LogMatching", "NoCommittedRecordLostGlobally"}


def unexcused(cluster) -> dict[str, str]:
    beyond = {f"{t}-{p}" for t, p in cluster.partition_invariants.beyond_tolerance}
    return {
        name: v.detail
        for name, v in cluster.sim.violations.items()
        if not (name in BEYOND_TOLERANCE_ALLOWED and v.detail.split(":")[0] in beyond)
    }


@pytest.mark.slow
def test_300_seeds_with_every_switch_on_keep_every_invariant_and_recover():
    worst, beyond_seeds, acked = 0.0, 0, 0
    for seed in range(SEEDS):
        cluster, ok, took = run_seed(seed)
        assert unexcused(cluster) == {}, f"seed {seed}: {unexcused(cluster)}"
        assert ok, f"seed {seed}: partitions not led or producer stalled {took:.0f} ms after healing"
        worst = max(worst, took)
        beyond_seeds += bool(cluster.partition_invariants.beyond_tolerance)
        acked += cluster.clients.counters(with_lost=False)["acked"]
    print(
        f"\n{SEEDS} seeds, every switch on: no unexcused violation; {acked} records acknowledged; "
        f"{beyond_seeds} seeds went beyond MinISR lossy shutdowns on some partition; "
        f"recovered at most {worst:.0f} ms after healing"
    )


# Seeds to try per switch (the measured first catches are printed; the budgets leave room). The
# §6.5.1 case 3 race behind broker_epoch_in_alter_partition needs a fetch to outlive its sender's
# broker epoch, so its search uses the slow-links profile on the brokers with a trickle of load
# (found at seed 161). elr needs the Last Replica Standing to happen by chance (seed 173).
SEARCH = {
    "elr": (250, PROFILE, 50, False),
    "maximal_isr": (60, PROFILE, 50, False),
    "strict_min_isr": (60, PROFILE, 50, False),
    "broker_epoch_in_alter_partition": (250, SLOW_LINKS, 1, True),
    "leader_epoch_truncation": (60, PROFILE, 50, False),
    "prevote": (60, PROFILE, 50, False),
    "check_quorum": (60, PROFILE, 50, False),
    "raft_fsync": (200, PROFILE, 50, False),
}


@pytest.mark.slow
@pytest.mark.parametrize("switch", SWITCHES)
def test_each_switch_turned_off_is_caught_by_some_seed(switch):
    budget, profile, rate, brokers_only = SEARCH[switch]
    world = {"profile": profile, "rate_per_s": rate, "brokers_only": brokers_only}
    for seed in range(budget):
        cluster, _, _ = run_seed(seed, **world, **{switch: False})
        found = unexcused(cluster)
        if found:
            # The catch is the switch's doing: the same seed with every switch on is clean.
            control, _, _ = run_seed(seed, **world)
            assert unexcused(control) == {}, f"seed {seed} fails with every switch on too: {unexcused(control)}"
            print(f"\n{switch}: false caught at seed {seed} (after {seed + 1} seeds): {sorted(found)}")
            return
    pytest.fail(f"{switch}: false was not caught in {budget} seeds")
