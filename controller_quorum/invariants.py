"""The KRaft quorum invariants of reference/protocol-facts.md, checked over all voters at once.

The checker keeps the *canonical committed log*: the entries below some voter's high watermark, as
first seen. Every later view must agree with it. Checks are incremental (each voter's log is compared
only where it changed), so they can run after every simulator event.

| name                        | what is checked here                                                    |
|-----------------------------|-------------------------------------------------------------------------|
| ElectionSafety              | no two voters lead the same epoch                                       |
| ConsistentCommittedData     | a voter's entries below its HWM equal the canonical committed entries   |
| RaftLogMatching             | two running voters agree below the smaller of their HWMs                |
| RaftLeaderCompleteness      | a voter that becomes leader holds every canonical committed entry       |
| RaftDurability              | every committed entry is on some voter (running, or on a stopped one's disk) |
| MonotonicHighWatermark      | the HWM a leader reports never goes below one reported before           |
| MonotonicEpoch              | a voter's durable (quorum-state) epoch never decreases                  |
| OnlyProspectiveToCandidate  | with Pre-Vote, Candidate is entered only from Prospective               |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .messages import LogEntry
from .quorum_state import RaftState
from .raft import RaftNode


@dataclass
class _VoterWatch:
    match_len: int = 0  # length of the log prefix known to equal the canonical log
    seen_end: int = -1
    seen_hwm: int = -1
    durable_epoch: int = 0
    recovered: list[LogEntry] | None = None  # while stopped: the entries its disk holds
    recovered_match: int = 0  # how much of the canonical log they cover


class QuorumInvariants:
    """`voters()` maps each voter name to its running RaftNode, or None while stopped;
    `durable_log(name)` gives a stopped voter's entries as its disk holds them; `durable_epoch(name)`
    its durable quorum-state epoch."""

    def __init__(
        self,
        voters: Callable[[], dict[str, RaftNode | None]],
        durable_log: Callable[[str], list[LogEntry]],
        durable_epoch: Callable[[str], int],
        *,
        prevote: bool,
    ) -> None:
        self._voters = voters
        self._durable_log = durable_log
        self._durable_epoch = durable_epoch
        self.prevote = prevote
        self.canonical: list[tuple[int, Any]] = []  # (epoch, record) per committed offset
        self.leaders_by_epoch: dict[int, str] = {}
        self.max_leader_hwm = 0
        self.newest_leader_epoch = 0
        self.watch: dict[str, _VoterWatch] = {}
        self.pending: dict[str, str] = {}  # invariant -> detail found by the event sink

    # --- fed by the event stream --------------------------------------------------------------

    def on_event(self, record: tuple[float, str, str, dict[str, Any]]) -> None:
        _, node, kind, fields = record
        if kind == "raft_state":
            if self.prevote and fields["to"] == "candidate" and fields["frm"] != "prospective":
                self.pending.setdefault(
                    "OnlyProspectiveToCandidate", f"{node} became Candidate from {fields['frm']} in epoch {fields['epoch']}"
                )
            self._check_durable_epoch(node)
        elif kind == "raft_leader_elected":
            self._check_new_leader(node)
        elif kind == "crash" and node in self.watch:
            self._check_durable_epoch(node)

    def _check_durable_epoch(self, node: str) -> None:
        w = self.watch.setdefault(node, _VoterWatch())
        epoch = self._durable_epoch(node)
        if epoch < w.durable_epoch:
            self.pending.setdefault("MonotonicEpoch", f"{node}'s durable epoch went from {w.durable_epoch} to {epoch}")
        w.durable_epoch = max(w.durable_epoch, epoch)

    def _check_new_leader(self, node: str) -> None:
        raft = self._voters().get(node)
        if raft is None:
            return
        epoch = raft.epoch
        other = self.leaders_by_epoch.setdefault(epoch, node)
        if other != node:
            self.pending.setdefault("ElectionSafety", f"{other} and {node} both lead epoch {epoch}")
        missing = self._first_mismatch(raft.log.entries, len(self.canonical))
        if missing is not None:
            self.pending.setdefault(
                "RaftLeaderCompleteness",
                f"{node} became leader of epoch {epoch} without committed offset {missing} (log end {raft.log.end_offset})",
            )

    # --- run after every event -------------------------------------------------------------------

    def check(self) -> dict[str, str]:
        """Violations found since the last call (invariant -> detail)."""
        found, self.pending = self.pending, {}
        voters = self._voters()
        running = {name: r for name, r in voters.items() if r is not None}
        for name, raft in running.items():
            self._observe(name, raft, found)
        # The newest leader's HWM. A deposed leader that has not noticed yet (Check Quorum off, or
        # its timer not expired) may lag behind: only a leader of the newest epoch seen counts.
        leaders = [(r.epoch, name) for name, r in running.items() if r.state is RaftState.LEADER]
        if leaders:
            epoch, name = max(leaders)
            self.newest_leader_epoch = max(self.newest_leader_epoch, epoch)
            hwm = running[name].high_watermark
            if hwm is not None and epoch == self.newest_leader_epoch:
                if hwm < self.max_leader_hwm:
                    found.setdefault("MonotonicHighWatermark", f"leader {name} reports HWM {hwm} < {self.max_leader_hwm}")
                self.max_leader_hwm = max(self.max_leader_hwm, hwm)
        self._check_durability(voters, found)
        return found

    def _observe(self, name: str, raft: RaftNode, found: dict[str, str]) -> None:
        w = self.watch.setdefault(name, _VoterWatch())
        w.recovered = None
        log = raft.log.entries
        end = len(log)
        hwm = raft.high_watermark or 0
        if end == w.seen_end and hwm == w.seen_hwm:
            return
        if end < w.seen_end:  # truncated (or restarted): re-verify from there
            w.match_len = min(w.match_len, end)
        w.seen_end, w.seen_hwm = end, hwm
        # Extend the canonical committed log from this voter's committed entries.
        for i in range(len(self.canonical), min(hwm, end)):
            self.canonical.append((log[i].epoch, log[i].record))
        # Compare the rest of its committed prefix with the canonical one.
        limit = min(end, len(self.canonical))
        i = w.match_len
        while i < limit and (log[i].epoch, log[i].record) == self.canonical[i]:
            i += 1
        w.match_len = i
        if i < min(hwm, end, len(self.canonical)):
            found.setdefault(
                "ConsistentCommittedData",
                f"{name} holds a different entry at committed offset {i} (epoch {log[i].epoch} vs {self.canonical[i][0]})",
            )
            found.setdefault("RaftLogMatching", f"{name} diverges from the committed log at offset {i}, below its HWM {hwm}")

    def _first_mismatch(self, entries: list[LogEntry], upto: int) -> int | None:
        for i in range(upto):
            if i >= len(entries) or (entries[i].epoch, entries[i].record) != self.canonical[i]:
                return i
        return None

    def _check_durability(self, voters: dict[str, RaftNode | None], found: dict[str, str]) -> None:
        committed = len(self.canonical)
        if committed == 0:
            return
        best = 0
        for name, raft in voters.items():
            w = self.watch.setdefault(name, _VoterWatch())
            if raft is not None:
                best = max(best, w.match_len)
            else:
                if w.recovered is None:
                    w.recovered, w.recovered_match = self._durable_log(name), 0
                i, log = w.recovered_match, w.recovered
                while i < min(len(log), committed) and (log[i].epoch, log[i].record) == self.canonical[i]:
                    i += 1
                w.recovered_match = i
                best = max(best, i)
            if best >= committed:
                return
        found.setdefault("RaftDurability", f"committed offset {best} is on no voter (committed end {committed})")
