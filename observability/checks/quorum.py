"""The KRaft quorum invariants of docs/explanation/protocol-facts.md, judged from the history.

The checker keeps a mirror of each voter's metadata log (entry epochs and CRCs: `raft_recovered`,
`raft_appended`, `raft_truncate`), its high watermark (`raft_hwm`, reset by `raft_leader_elected`)
and state (`raft_state`), and, for a stopped voter, what its disk holds (`raft_survived` after a
crash; the log as it was after a clean stop). The *canonical committed log* is the entries below
some voter's high watermark, as first seen; every later view must agree with it. A voter's log is
compared only where it changed since the last look.

| name                        | what is checked here                                                    |
|-----------------------------|-------------------------------------------------------------------------|
| ElectionSafety              | no two voters lead the same epoch                                       |
| ConsistentCommittedData     | a voter's entries below its HWM equal the canonical committed entries   |
| RaftLogMatching             | a running voter agrees with the committed log below its HWM             |
| RaftLeaderCompleteness      | a voter that becomes leader holds every canonical committed entry       |
| RaftDurability              | every committed entry is on some voter (running, or on a stopped one's disk) |
| MonotonicHighWatermark      | the HWM the newest leader reports never goes below one reported before  |
| MonotonicEpoch              | a voter's durable (quorum-state) epoch, as each crash finds it on stable storage, never decreases |
| OnlyProspectiveToCandidate  | with Pre-Vote, Candidate is entered only from Prospective               |

`QuorumDisruption` (below) adds the two liveness checks the sweeps use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from observability.events import EventRecord

STALE_LEADER_MS = 8_000.0


@dataclass
class VoterMirror:
    """One voter as the history tells it. Invariant: `entries[i]` is the (epoch, CRC) of offset i
    of its log (running) or of what its disk holds (stopped)."""

    entries: list[tuple[int, int]] = field(default_factory=list)
    hwm: int = 0
    state: str | None = None
    epoch: int = 0
    running: bool = False
    durable_epoch: int = 0  # the largest durable epoch a crash found (raft_survived)
    match_len: int = 0  # length of the prefix known to equal the canonical log
    recovered_match: int = 0  # the same, for a stopped voter's disk
    changed: bool = True


class QuorumChecks:
    """An event sink and a check set."""

    def __init__(self, voters: Iterable[str], *, prevote: bool) -> None:
        self.voters = {v: VoterMirror() for v in voters}
        self.prevote = prevote
        self.canonical: list[tuple[int, int]] = []
        self.leaders_by_epoch: dict[int, str] = {}
        self.max_leader_hwm = 0
        self.newest_leader_epoch = 0
        self._leader_hwm: dict[str, int] = {}  # a running leader's reported HWM
        self._found: dict[str, str] = {}
        self._handlers: dict[str, Callable[[VoterMirror, EventRecord], None]] = {
            "process_start": self._on_start,
            "process_stop": self._on_stop,
            "raft_recovered": self._on_recovered,
            "raft_appended": self._on_appended,
            "raft_truncate": self._on_truncate,
            "raft_hwm": self._on_hwm,
            "raft_state": self._on_state,
            "raft_leader_elected": self._on_leader_elected,
        }

    # --- events -------------------------------------------------------------------------------------

    def __call__(self, rec: EventRecord) -> None:
        ev = rec.event
        v = self.voters.get(rec.node)
        if v is not None:
            handler = self._handlers.get(ev.kind)
            if handler is not None:
                handler(v, rec)
        elif ev.kind == "fault" and ev.fault.startswith("crash_") and ev.target in self.voters:
            v = self.voters[ev.target]
            v.running, v.state, v.changed = False, None, True
            v.entries, v.recovered_match = [], 0  # what survived comes as raft_survived
            if ev.fault == "crash_disk":
                # A lost disk takes the quorum state with it: the voter starts over from epoch 0,
                # outside what MonotonicEpoch promises (it is about what stable storage keeps).
                # Before, the epoch an earlier process crash had found was held against it.
                v.durable_epoch = 0
            self._leader_hwm.pop(ev.target, None)
        elif ev.kind == "raft_survived" and ev.target in self.voters:
            v = self.voters[ev.target]
            v.entries = list(zip(ev.entry_epochs, ev.entry_crcs, strict=True))
            v.recovered_match, v.changed = 0, True
            self._saw_durable_epoch(ev.target, v, ev.epoch)

    def _on_start(self, v: VoterMirror, rec: EventRecord) -> None:
        v.running, v.entries, v.hwm, v.state, v.match_len, v.changed = True, [], 0, None, 0, True

    def _on_stop(self, v: VoterMirror, rec: EventRecord) -> None:
        v.running, v.state, v.recovered_match, v.changed = False, None, 0, True  # a clean stop flushed the log
        self._leader_hwm.pop(rec.node, None)

    def _on_recovered(self, v: VoterMirror, rec: EventRecord) -> None:
        ev = rec.event
        v.entries = list(zip(ev.entry_epochs, ev.entry_crcs, strict=True))
        # Not a durable epoch: after a process crash the start reads the page cache too, which an
        # OS crash may still take (an unflushed `unattached` epoch); raft_survived tells durability.
        v.changed = True

    def _on_appended(self, v: VoterMirror, rec: EventRecord) -> None:
        ev = rec.event
        del v.entries[ev.offset :]
        v.entries.extend(zip(ev.entry_epochs, ev.entry_crcs, strict=True))
        v.changed = True

    def _on_truncate(self, v: VoterMirror, rec: EventRecord) -> None:
        ev = rec.event
        del v.entries[ev.offset :]
        v.match_len = min(v.match_len, ev.offset)
        if ev.hwm is not None:
            v.hwm = ev.offset
        v.changed = True

    def _on_hwm(self, v: VoterMirror, rec: EventRecord) -> None:
        v.hwm = rec.event.hwm
        v.changed = True
        if v.state == "leader":
            self._leader_hwm[rec.node] = rec.event.hwm

    def _on_state(self, v: VoterMirror, rec: EventRecord) -> None:
        ev = rec.event
        # A voter restarting from the stored vote it gave itself resumes its candidacy in the same
        # epoch (Kafka's QuorumState.initialize): no new epoch, so no election without pre-votes.
        if self.prevote and ev.state == "candidate" and ev.from_state not in ("prospective", "start"):
            self._found.setdefault("OnlyProspectiveToCandidate", f"{rec.node} became Candidate from {ev.from_state} in epoch {ev.epoch}")
        v.state, v.epoch = ev.state, ev.epoch
        if ev.state != "leader":
            self._leader_hwm.pop(rec.node, None)

    def _on_leader_elected(self, v: VoterMirror, rec: EventRecord) -> None:
        node, epoch = rec.node, rec.event.epoch
        v.hwm = 0  # a new leader knows no HWM until an entry of its epoch commits
        self._leader_hwm.pop(node, None)
        other = self.leaders_by_epoch.setdefault(epoch, node)
        if other != node:
            self._found.setdefault("ElectionSafety", f"{other} and {node} both lead epoch {epoch}")
        missing = self._first_mismatch(v.entries, len(self.canonical))
        if missing is not None:
            self._found.setdefault(
                "RaftLeaderCompleteness", f"{node} became leader of epoch {epoch} without committed offset {missing} (log end {len(v.entries)})"
            )

    def _saw_durable_epoch(self, node: str, v: VoterMirror, epoch: int) -> None:
        if epoch < v.durable_epoch:
            self._found.setdefault("MonotonicEpoch", f"{node}'s durable epoch went from {v.durable_epoch} to {epoch}")
        v.durable_epoch = max(v.durable_epoch, epoch)

    # --- checking -----------------------------------------------------------------------------------

    def check(self) -> dict[str, str]:
        """Violations found since the last call (invariant -> detail)."""
        found, self._found = self._found, {}
        changed = False
        for name, v in self.voters.items():
            if v.changed and v.running:
                self._observe(name, v, found)
            changed = changed or v.changed
            v.changed = False
        # The newest leader's HWM. A deposed leader that has not noticed yet (Check Quorum off, or
        # its timer not expired) may lag behind: only a leader of the newest epoch seen counts.
        leaders = [(v.epoch, name) for name, v in self.voters.items() if v.running and v.state == "leader"]
        if leaders:
            epoch, name = max(leaders)
            self.newest_leader_epoch = max(self.newest_leader_epoch, epoch)
            hwm = self._leader_hwm.get(name)
            if hwm is not None and epoch == self.newest_leader_epoch:
                if hwm < self.max_leader_hwm:
                    found.setdefault("MonotonicHighWatermark", f"leader {name} reports HWM {hwm} < {self.max_leader_hwm}")
                self.max_leader_hwm = max(self.max_leader_hwm, hwm)
        if changed:
            self._check_durability(found)
        return found

    check_all = check  # every voter's change is kept until the next look: nothing to catch up

    def _observe(self, name: str, v: VoterMirror, found: dict[str, str]) -> None:
        log = v.entries
        end = len(log)
        hwm = v.hwm
        v.match_len = min(v.match_len, end)
        # Extend the canonical committed log from this voter's committed entries.
        for i in range(len(self.canonical), min(hwm, end)):
            self.canonical.append(log[i])
        # Compare the rest of its committed prefix with the canonical one.
        limit = min(end, len(self.canonical))
        i = v.match_len
        while i < limit and log[i] == self.canonical[i]:
            i += 1
        v.match_len = i
        if i < min(hwm, end, len(self.canonical)):
            found.setdefault(
                "ConsistentCommittedData",
                f"{name} holds a different entry at committed offset {i} (epoch {log[i][0]} vs {self.canonical[i][0]})",
            )
            found.setdefault("RaftLogMatching", f"{name} diverges from the committed log at offset {i}, below its HWM {hwm}")

    def _first_mismatch(self, entries: list[tuple[int, int]], upto: int) -> int | None:
        for i in range(upto):
            if i >= len(entries) or entries[i] != self.canonical[i]:
                return i
        return None

    def _check_durability(self, found: dict[str, str]) -> None:
        committed = len(self.canonical)
        if committed == 0:
            return
        best = 0
        for v in self.voters.values():
            # A voter's known match is extended here, not only when the voter itself changed: the
            # canonical log grows with another voter's HWM (the leader's), and a follower that
            # appended those entries before is not looked at again until it changes. Reading its
            # old match alone, a leader that commits and crashes at one instant left its committed
            # entries "on no voter" while the followers held them.
            i, log = (v.match_len if v.running else v.recovered_match), v.entries
            while i < min(len(log), committed) and log[i] == self.canonical[i]:
                i += 1
            if v.running:
                v.match_len = i
            else:
                v.recovered_match = i
            best = max(best, i)
            if best >= committed:
                return
        found.setdefault("RaftDurability", f"committed offset {best} is on no voter (committed end {committed})")

    # --- for the liveness checks --------------------------------------------------------------------

    def running_states(self) -> dict[str, tuple[str, int]]:
        """(state, epoch) of each running voter whose state is known."""
        return {n: (v.state, v.epoch) for n, v in self.voters.items() if v.running and v.state is not None}


class QuorumDisruption:
    """Liveness checks of the KRaft quorum for randomized sweeps: the disruption that Pre-Vote and
    Check Quorum exist to prevent. They are not safety invariants (no data is at stake), so they are
    not in protocol-facts.md's list; sweeps register them to show what turning `prevote` or
    `check_quorum` off does.

    | name           | reported when                                                                  |
    |----------------|--------------------------------------------------------------------------------|
    | EpochInflation | a running voter's epoch is more than 2 above the newest leader's (KIP-996: without Pre-Vote a cut-off voter bumps its epoch at every election timeout and disrupts the leader when it returns) |
    | StaleLeader    | a voter has believed it leads for `STALE_LEADER_MS` while a newer epoch has a leader (Check Quorum makes an isolated leader resign after 1.5 x the fetch timeout) |
    """

    def __init__(self, quorum: QuorumChecks, now_ms: Callable[[], float]) -> None:
        self.quorum = quorum
        self._now_ms = now_ms
        self._stale_since: dict[tuple[str, int], float] = {}

    def check(self) -> dict[str, str]:
        found: dict[str, str] = {}
        states = self.quorum.running_states()
        leaders = [(epoch, v) for v, (state, epoch) in states.items() if state == "leader"]
        if not leaders:
            self._stale_since.clear()
            return found
        newest_epoch, newest = max(leaders)
        for v, (_, epoch) in states.items():
            if epoch > newest_epoch + 2:
                found.setdefault("EpochInflation", f"{v} is at epoch {epoch} while {newest} leads epoch {newest_epoch}")
        now = self._now_ms()
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
