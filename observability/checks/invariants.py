"""The invariant names of docs/explanation/protocol-facts.md (the names violations are reported under).

The checks of this package report violations under these names; scenario files may list any of them
in `expect_violations` (workloads/scenario/schema.py validates them).
"""

from __future__ import annotations

PARTITION_INVARIANTS: dict[str, str] = {
    "LeaderCompleteness": "a current leader's log holds every offset below the true HWM and every record acknowledged with acks=all",
    "LogMatching": "for any two replicas, records below min(HWM_a, HWM_b) are identical",
    "LeaderCandidateCompleteness": "every running member of the controller's ISR and ELR has LEO >= true HWM",
    "ReplicationQuorumSuperset": "when the leader's ISR size >= MinISR, the leader's Maximal ISR is a superset of the controller's ISR plus ELR",
    "NoCommittedRecordLostGlobally": "every acknowledged (acks=all) record exists on some replica",
    "UncleanExclusion": "a replica restarted after an unclean shutdown is not leader, not in the ISR, not in the ELR until it has caught up",
    "IsrElrShape": "ISR and ELR are subsets of Replicas, disjoint, and ELR is empty whenever ISR size >= MinISR",
    "NoFencedInIsr": "with ELR on, a fenced broker is never in the controller's ISR",
    "StrictMinIsrHWM": "the leader never advances the HWM while its committed ISR size < effective MinISR",
    "TrueHWMMonotonic": "the true HWM never decreases",
    "AppliedHWM": "ListOffsets is unavailable while HWM < LESO; ISR expansion needs LEO >= max(HWM, LESO) and a fetch in the current epoch",
    "MonotonicEpochs": "leader epoch, partition epoch and broker epoch only grow",
    "ConsistentRead": "once a consumer has read offset o (below the HWM), the record at o never changes or disappears",
}

QUORUM_INVARIANTS: dict[str, str] = {
    "ElectionSafety": "at most one leader per epoch",
    "RaftLogMatching": "entries below min(hwm_a, hwm_b) are identical on any two voters",
    "RaftLeaderCompleteness": "the newest leader holds every committed entry",
    "RaftDurability": "every committed entry exists on at least one live voter",
    "MonotonicHighWatermark": "the leader-reported HWM never decreases; a new leader only advances it past its epoch start offset",
    "MonotonicEpoch": "a voter's persisted epoch never decreases",
    "ConsistentCommittedData": "the entry at a committed offset is the same on every voter, forever",
    "OnlyProspectiveToCandidate": "with Pre-Vote, a voter becomes Candidate only from Prospective after a pre-vote majority",
}

INVARIANT_NAMES: frozenset[str] = frozenset(PARTITION_INVARIANTS) | frozenset(QUORUM_INVARIANTS)

# The quorum's liveness checks (observability/checks/quorum.py, QuorumDisruption): not safety
# invariants, so not protocol-facts.md's; a scenario turns them on with `disruption_checks: true`
# (what Pre-Vote and Check Quorum exist to prevent), and then reports them as violations.
DISRUPTION_CHECKS: dict[str, str] = {
    "EpochInflation": "a running voter's epoch is more than 2 above the newest leader's (KIP-996: without Pre-Vote a cut-off "
                      "voter bumps its epoch at every election timeout and disrupts the leader when it returns)",
    "StaleLeader": "a voter has believed it leads for a while (STALE_LEADER_MS) while a newer epoch has a leader (Check Quorum "
                   "makes an isolated leader resign after 1.5 x the fetch timeout)",
}
DISRUPTION_NAMES: frozenset[str] = frozenset(DISRUPTION_CHECKS)

# What protocol-facts.md allows on a partition that suffered MinISR lossy unclean shutdowns of
# leader candidates (beyond the protocol's tolerance f = MinISR - 1, the protocol description
# §6.2 and §6.8; the `beyond_tolerance` event): NoCommittedRecordLostGlobally "may only fail after
# >= MinISR lossy unclean shutdowns", and the unclean recovery that follows breaks what rests on it.
BEYOND_TOLERANCE_ALLOWED: frozenset[str] = frozenset(
    {"LeaderCompleteness", "TrueHWMMonotonic", "ConsistentRead", "LogMatching", "NoCommittedRecordLostGlobally"})


def excused_beyond_tolerance(invariant: str, detail: str, beyond: set[str]) -> bool:
    """A violation the protocol allows: one of BEYOND_TOLERANCE_ALLOWED on a partition ("t-0", as
    the detail starts) that went beyond tolerance."""
    return invariant in BEYOND_TOLERANCE_ALLOWED and detail.split(":")[0] in beyond
