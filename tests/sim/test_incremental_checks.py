"""The online checks judge only what each event touched (observability/checks/). Over randomized
seeds, with protocol switches off so that there is something to find, they give exactly the
verdicts of checks that judge the whole cluster after every event: the same invariants, first seen
at the same instant, with the same detail."""

import pytest

from actors.runtime.sim.cluster import SimCluster

from .data_world import run_seed


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


@pytest.mark.slow
@pytest.mark.parametrize("seed,protocol", CASES, ids=[f"{s}-{'-'.join(p) or 'all-on'}" for s, p in CASES])
def test_incremental_checks_give_the_verdicts_of_full_checks(seed, protocol):
    incremental, _, _ = run_seed(seed, **protocol)
    full, _, _ = run_seed(seed, cluster_class=FullCheckCluster, **protocol)
    assert incremental.sim.trace_hash() == full.sim.trace_hash()  # the same run
    assert verdicts(incremental) == verdicts(full)
    if protocol and protocol != {"prevote": False}:  # prevote's catch is a liveness check, not an invariant
        assert verdicts(full), f"seed {seed} with {protocol} found nothing: the comparison would be vacuous"
