"""The online checks judge only what each event touched (observability/checks/). Over randomized
seeds, with protocol switches off so that there is something to find, they give exactly the
verdicts of checks that judge the whole cluster after every event: the same invariants, first seen
at the same instant, with the same detail."""

import pytest

from actors.runtime.sim.cluster import SimCluster

from .data_world import run_seed
from .seed_pool import in_seed_order


class FullCheckCluster(SimCluster):
    incremental_checks = False


def verdicts(cluster) -> dict[str, tuple[float, str]]:
    return {name: (v.at_ms, v.detail) for name, v in cluster.sim.violations.items()}


# Seeds and switches, several of which break invariants (the data sweeps' first catches).
CASES = [
    (0, {}),
    (5, {}),
    (0, {"maximal_isr": False}),
    (3, {"maximal_isr": False}),
    (0, {"leader_epoch_truncation": False}),
    (2, {"strict_min_isr": False}),
    (2, {"prevote": False}),
    (20, {"raft_fsync": False}),
]


def both_ways(case: int) -> tuple[tuple[str, dict], tuple[str, dict]]:
    """(trace hash, verdicts) of CASES[case] with incremental checks, then with full checks."""
    seed, protocol = CASES[case]
    incremental, _, _ = run_seed(seed, **protocol)
    full, _, _ = run_seed(seed, cluster_class=FullCheckCluster, **protocol)
    return (incremental.sim.trace_hash(), verdicts(incremental)), (full.sim.trace_hash(), verdicts(full))


@pytest.mark.slow
def test_incremental_checks_give_the_verdicts_of_full_checks():
    # Each case in a fresh worker process (tests/sim/seed_pool.py), as the sweeps run: in the
    # `make test` process, after the Ray tier, the first of the two runs twice came out with
    # another trace hash than the same seed gives in any fresh process (the trace depended on
    # PYTHONHASHSEED: tests/sim/test_hash_seed_independence.py).
    for (seed, protocol), ((inc_hash, inc), (full_hash, full)) in zip(CASES, in_seed_order(both_ways, range(len(CASES))), strict=True):
        assert inc_hash == full_hash, f"seed {seed} {protocol}: not the same run"
        assert inc == full, f"seed {seed} {protocol}"
        if protocol and protocol != {"prevote": False}:  # prevote's catch is a liveness check, not an invariant
            assert full, f"seed {seed} with {protocol} found nothing: the comparison would be vacuous"
