"""Liveness checks of the KRaft quorum for randomized sweeps: the disruption that Pre-Vote and Check
Quorum exist to prevent. They are not safety invariants (no data is at stake), so they are not in
protocol-facts.md's list; sweeps register them to show what turning `prevote` or `check_quorum`
off does.

| name           | reported when                                                                  |
|----------------|--------------------------------------------------------------------------------|
| EpochInflation | a running voter's epoch is more than 2 above the newest leader's (KIP-996: without Pre-Vote a cut-off voter bumps its epoch at every election timeout and disrupts the leader when it returns) |
| StaleLeader    | a voter has believed it leads for `STALE_LEADER_MS` while a newer epoch has a leader (Check Quorum makes an isolated leader resign after 1.5 x the fetch timeout) |
"""

from __future__ import annotations

from collections.abc import Sequence

from .simulator import Simulator

STALE_LEADER_MS = 8_000.0


class QuorumDisruption:
    def __init__(self, sim: Simulator, voters: Sequence[str]) -> None:
        self.sim = sim
        self.voters = tuple(voters)
        self._stale_since: dict[tuple[str, int], float] = {}

    def check(self) -> dict[str, str]:
        found: dict[str, str] = {}
        rafts = [(v, n.role.raft) for v in self.voters if (n := self.sim.nodes[v]).role is not None and n.role.raft is not None]
        leaders = [(r.epoch, v) for v, r in rafts if r.is_leader()]
        if not leaders:
            self._stale_since.clear()
            return found
        newest_epoch, newest = max(leaders)
        for v, r in rafts:
            if r.epoch > newest_epoch + 2:
                found.setdefault("EpochInflation", f"{v} is at epoch {r.epoch} while {newest} leads epoch {newest_epoch}")
        now = self.sim.now_ms
        current = set()
        for epoch, v in leaders:
            if epoch < newest_epoch:
                key = (v, epoch)
                current.add(key)
                since = self._stale_since.setdefault(key, now)
                if now - since >= STALE_LEADER_MS:
                    found.setdefault("StaleLeader", f"{v} still leads epoch {epoch} {now - since:.0f} ms after {newest} took epoch {newest_epoch}")
        self._stale_since = {k: t for k, t in self._stale_since.items() if k in current}
        return found
