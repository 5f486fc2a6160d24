"""KIP-966 unclean recovery: what the controller does when a partition has no leader and no clean
candidate (the KIP-966 article, "Unclean Recovery"; the protocol description §6.8).

`unclean.recovery.strategy` (both spellings of the KIP and the blog are accepted):

| strategy               | triggers when                                  | candidates         | elects                                  |
|------------------------|------------------------------------------------|--------------------|-----------------------------------------|
| balanced               | ISR and ELR are both empty                     | the LastKnownELR (all replicas when it is empty) | once *every* candidate answered: the log with the highest (last epoch, end offset) |
| aggressive / proactive | ISR empty and every ELR member fenced (or none) | every replica      | after `INSPECTION_WINDOW_MS`, the best log among those that answered |
| none / manual          | never: an operator runs `elect: {type: unclean}` |                    |                                         |
| last_known_leader      | ISR and ELR are both empty                     | the LastKnownELR (shipped Kafka 4.x: the last known leader) | the first of them that is unfenced, without inspecting logs |

The controller asks each candidate's broker for its replica's log end (GetReplicaLogInfo), again
every `QUERY_RETRY_MS` until it answers; only answers from the broker's current session (its
registered broker epoch) and from unfenced brokers count. The elected replica leads alone, the
partition is RECOVERING (KIP-704) and the election counts as unclean. A recovery is abandoned when
the partition changes meanwhile (a clean candidate came back and was elected).

The policy is pure (`plan_recovery`, `choose_leader`); `UncleanRecovery` keeps the inquiries in
flight for the controller.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .metadata import RECOVERING, BrokerRegistration, PartitionRecord

QUERY_RETRY_MS = 500
INSPECTION_WINDOW_MS = 1_000  # aggressive: how long to wait for answers before choosing

BALANCED = "balanced"
AGGRESSIVE = "aggressive"
NONE = "none"
LAST_KNOWN_LEADER = "last_known_leader"
_SPELLINGS = {"balanced": BALANCED, "aggressive": AGGRESSIVE, "proactive": AGGRESSIVE, "none": NONE, "manual": NONE, "last_known_leader": LAST_KNOWN_LEADER}


def normalize_strategy(name: str) -> str:
    return _SPELLINGS[name]


def _active(brokers: dict[int, BrokerRegistration], b: int) -> bool:
    reg = brokers.get(b)
    return reg is not None and reg.active


def _can_lead(brokers: dict[int, BrokerRegistration], b: int, part: PartitionRecord | None) -> bool:
    """Active, and (given the partition) its replica's log directory online (KIP-858's
    LeaderAcceptor): a replica on a failed directory cannot answer for its log, nor lead."""
    reg = brokers.get(b)
    return reg is not None and (reg.can_lead(part) if part is not None else reg.active)


def plan_recovery(part: PartitionRecord, brokers: dict[int, BrokerRegistration], strategy: str) -> tuple[int, ...] | None:
    """The replicas whose logs to inspect, or None when this strategy does not recover `part` now."""
    if part.leader is not None or any(_can_lead(brokers, b, part) for b in part.isr):
        return None
    strategy = normalize_strategy(strategy)
    if strategy == NONE:
        return None
    if strategy in (BALANCED, LAST_KNOWN_LEADER):
        if part.isr or part.elr:
            return None  # a clean candidate may still come back
        return part.last_known_elr or part.replicas
    # aggressive: unclean as soon as no clean candidate is available now
    if any(_can_lead(brokers, b, part) for b in part.elr):
        return None
    return part.replicas


@dataclass(frozen=True)
class LogInfo:
    broker: int
    broker_epoch: int
    last_epoch: int
    log_end_offset: int


def choose_leader(
    candidates: tuple[int, ...],
    answers: dict[int, LogInfo],
    brokers: dict[int, BrokerRegistration],
    strategy: str,
    *,
    window_over: bool,
    part: PartitionRecord | None = None,
) -> int | None:
    """The replica to elect, or None to keep waiting (`part`: the partition, whose replicas on an
    offline log directory cannot be elected)."""
    strategy = normalize_strategy(strategy)
    if strategy == LAST_KNOWN_LEADER:
        return next((b for b in candidates if _can_lead(brokers, b, part)), None)
    valid = {b: a for b, a in answers.items() if b in candidates and _can_lead(brokers, b, part) and brokers[b].epoch == a.broker_epoch}
    if strategy == BALANCED and set(valid) != set(candidates):
        return None  # §6.8: safety first, wait for every candidate's log
    if strategy == AGGRESSIVE and not window_over and set(valid) != set(candidates):
        return None
    if not valid:
        return None
    # The most complete log: highest last epoch, then highest end offset; replica order breaks ties.
    return max(valid, key=lambda b: (valid[b].last_epoch, valid[b].log_end_offset, -candidates.index(b)))

def recovered_partition(part: PartitionRecord, leader: int, strategy: str) -> PartitionRecord:
    """The recovered leader leads alone, RECOVERING. The LastKnownELR keeps its other members under
    the KIP's design (balanced, aggressive): "the LastKnownELR is cleaned when ISR reaches the Min
    ISR as all completeness guarantees are lost" (the KIP-966 document, Balanced mode), so that a
    later recovery, should the new leader lose its log in turn, still inspects the logs of the
    replicas that may hold what it lacks (cleared here, a leader that lost its log in a crash was
    elected again while a member with every record was up: found by the swarm campaigns). Shipped
    Kafka's last_known_leader strategy clears it once the partition has a leader."""
    strategy = normalize_strategy(strategy)
    kept = () if strategy == LAST_KNOWN_LEADER else tuple(b for b in part.last_known_elr if b != leader)
    return replace(
        part,
        leader=leader,
        isr=(leader,),
        elr=(),
        last_known_elr=kept,
        leader_epoch=part.leader_epoch + 1,
        partition_epoch=part.partition_epoch + 1,
        leader_recovery_state=RECOVERING,
        reason=f"unclean_recovery_{strategy}",
        # An unclean election either way; the last_known_leader strategy's has a kind of its own
        # (the documented election kinds): it elects without inspecting logs.
        election="last_known_leader" if strategy == LAST_KNOWN_LEADER else "unclean",
    )


@dataclass
class Inquiry:
    """An unclean recovery in progress for one partition."""

    partition_epoch: int  # abandoned if the partition changes
    candidates: tuple[int, ...]
    started_ms: float
    answers: dict[int, LogInfo] = field(default_factory=dict)
    asked_ms: dict[int, float] = field(default_factory=dict)
    request_ids: dict[int, int] = field(default_factory=dict)


class UncleanRecovery:
    def __init__(self, strategy: str) -> None:
        self.strategy = strategy
        self.inquiries: dict[tuple[str, int], Inquiry] = {}
        self.next_request_id = 0
        self.now_ms = 0.0  # when the controller last looked (for next_deadline)
        self.scanned_offset = -1  # the working image offset last scanned for leaderless partitions

    def reset(self) -> None:
        self.inquiries.clear()
        self.scanned_offset = -1

    def to_ask(self, now_ms: float, brokers: dict[int, BrokerRegistration]) -> list[tuple[tuple[str, int], int, int]]:
        """(partition, broker, request id) for every candidate that should be asked (again) now."""
        asks = []
        for key, inq in self.inquiries.items():
            if normalize_strategy(self.strategy) == LAST_KNOWN_LEADER:
                continue
            for b in inq.candidates:
                if not _active(brokers, b):
                    continue
                answer = inq.answers.get(b)
                if answer is not None:
                    if answer.broker_epoch == brokers[b].epoch:
                        continue
                    # An answer from another session of the broker (it restarted, or answered
                    # before it registered again): it does not count (`choose_leader`), so ask the
                    # session registered now, at once.
                    del inq.answers[b]
                    inq.asked_ms.pop(b, None)
                if now_ms >= inq.asked_ms.get(b, -1e18) + QUERY_RETRY_MS:
                    self.next_request_id += 1
                    inq.asked_ms[b] = now_ms
                    inq.request_ids[b] = self.next_request_id
                    asks.append((key, b, self.next_request_id))
        return asks

    def next_deadline(self, now_ms: float) -> float | None:
        """The next time an inquiry needs attention; only future times (a candidate that cannot be
        asked now is asked again when it registers, which is an event of its own)."""
        deadlines = []
        for inq in self.inquiries.values():
            deadlines.append(inq.started_ms + INSPECTION_WINDOW_MS)
            for b in inq.candidates:
                if b not in inq.answers and b in inq.asked_ms:
                    deadlines.append(inq.asked_ms[b] + QUERY_RETRY_MS)
        future = [d for d in deadlines if d > now_ms]
        return min(future) if future else None
