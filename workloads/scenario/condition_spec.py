"""Conditions of `wait_for` and `expect` (docs/reference/steps-and-conditions.md, "Conditions"): a subject (partition,
replica, broker, quorum or the history) and the attributes it must have; numbers may be
comparisons written as strings (">= 1")."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    WithJsonSchema,
    model_serializer,
    model_validator,
)

from .names import BrokerId, PartitionRef, Strict

# --- conditions ------------------------------------------------------------------------------

_COMPARISON = re.compile(r"^\s*(==|!=|>=|<=|>|<)\s*(-?\d+|null)\s*$")


class Comparison(BaseModel):
    """A number condition written as a string: ">= 1", "< 3", "!= 0", "!= null"."""

    model_config = ConfigDict(frozen=True)
    op: Literal["==", "!=", ">=", "<=", ">", "<"]
    value: int | None

    def holds(self, actual: Any) -> bool:
        if self.value is None:
            if self.op == "==":
                return actual is None
            if self.op == "!=":
                return actual is not None
            return False
        if actual is None or isinstance(actual, bool) or not isinstance(actual, int | float):
            return False
        return {
            "==": actual == self.value,
            "!=": actual != self.value,
            ">=": actual >= self.value,
            "<=": actual <= self.value,
            ">": actual > self.value,
            "<": actual < self.value,
        }[self.op]

    def __str__(self) -> str:
        return f"{self.op} {'null' if self.value is None else self.value}"

    @model_serializer
    def _as_written(self) -> str:
        return str(self)


def _number_or_comparison(nullable: bool):
    def parse(v: Any) -> Any:
        if v is None and nullable:
            return None
        if isinstance(v, bool) or (v is None):
            raise ValueError(f"expected a whole number{' or null' if nullable else ''} or a comparison like \">= 1\"")
        if isinstance(v, int):
            return v
        if isinstance(v, str):
            m = _COMPARISON.match(v)
            if m is None:
                raise ValueError(f"expected a comparison like \">= 1\" or \"!= null\", got {v!r}")
            op, raw = m.groups()
            if raw == "null" and op not in ("==", "!="):
                raise ValueError(f"null can only be compared with == or != (got {v!r})")
            return Comparison(op=op, value=None if raw == "null" else int(raw))
        raise ValueError(f"expected a whole number or a comparison like \">= 1\", got {type(v).__name__}")

    schema: dict[str, Any] = {
        "anyOf": [{"type": "integer"}, {"type": "string", "pattern": _COMPARISON.pattern}]
        + ([{"type": "null"}] if nullable else [])
    }
    return Annotated[Any, BeforeValidator(parse), WithJsonSchema(schema)]


NumberCond = _number_or_comparison(nullable=False)
NullableNumberCond = _number_or_comparison(nullable=True)

# The end of a number-valued key's description: what it takes (the rules: `Comparison`, `_number_or_comparison`).
_NUMBER = '; a whole number or a comparison such as ">= 3"'
_MAYBE_NULL = '; a whole number or a comparison such as ">= 3" or "!= null" (a comparison with a number never matches null)'
_OR_NULL = '; a whole number, null, or a comparison such as "!= null" or "!= 1" (a comparison with a number never matches null)'

BrokerSet = list[BrokerId]
QuorumStateName = Literal["unattached", "prospective", "candidate", "leader", "follower", "resigned"]


class ReplicaSubject(Strict):
    partition: PartitionRef
    broker: BrokerId


# Which attribute keys each subject allows (docs/reference/steps-and-conditions.md, "Conditions").
PARTITION_ATTRS = (
    "leader", "leader_epoch", "partition_epoch", "replicas", "isr", "elr", "last_known_elr", "hwm", "offline", "under_min_isr",
    "recovery_state", "adding_replicas", "removing_replicas", "preferred_leader", "exists",
)
REPLICA_ATTRS = ("leo", "hwm", "in_sync", "dir")
BROKER_ATTRS = ("fenced", "epoch", "alive", "in_controlled_shutdown", "offline_log_dirs")
QUORUM_ATTRS = ("leader", "epoch", "states")
HISTORY_COUNTERS = (
    "acked", "failed", "acked_lost", "consumed", "elections_clean", "elections_unclean", "elections_elr",
    "quorum_elections",
)
SUBJECTS = {"partition": PARTITION_ATTRS, "replica": REPLICA_ATTRS, "broker": BROKER_ATTRS, "quorum": QUORUM_ATTRS}


class Condition(Strict):
    """Keys that must all hold. At most one subject (partition, replica, broker, quorum); its
    attributes; and any history counters."""

    partition: PartitionRef | None = None
    replica: ReplicaSubject | None = Field(
        None, description="the subject: one partition's replica on one broker, checked with leo, hwm, in_sync, dir"
    )
    broker: BrokerId | None = None
    quorum: Literal[True] | None = Field(
        None, description="the subject: the KRaft quorum as its latest epoch sees it, checked with leader, epoch, states"
    )

    leader: NullableNumberCond = Field(
        None, description="partition: its leader's broker id, null while it has none; quorum: the voter leading the latest epoch, "
        "null while none does" + _OR_NULL
    )
    leader_epoch: NumberCond = Field(None, description="partition: its committed leader epoch" + _NUMBER)
    partition_epoch: NumberCond = Field(None, description="partition: its committed partition epoch" + _NUMBER)
    replicas: BrokerSet | None = Field(None, description="partition: its replica set, compared as a set")
    isr: BrokerSet | None = Field(None, description="partition: its committed ISR, compared as a set")
    elr: BrokerSet | None = Field(
        None, description="partition: its Eligible Leader Replicas (KIP-966), compared as a set"
    )
    last_known_elr: BrokerSet | None = Field(
        None, description="partition: its LastKnownELR (KIP-966), compared as a set"
    )
    hwm: NumberCond = Field(
        None, description="partition: its leader's high watermark, null while it has no leader; replica: the replica's own "
        "high watermark" + _MAYBE_NULL
    )
    offline: bool | None = Field(None, description="partition: true while it has no leader")
    under_min_isr: bool | None = Field(
        None, description="partition: true while its committed ISR is smaller than min(min.insync.replicas, replication factor)"
    )
    recovery_state: Literal["RECOVERED", "RECOVERING"] | None = Field(
        None, description="partition: the controller's committed leader recovery state (KIP-704); RECOVERING after an unclean election"
    )
    adding_replicas: BrokerSet | None = Field(
        None, description="partition: the replicas a reassignment in progress adds, compared as a set"
    )
    removing_replicas: BrokerSet | None = Field(
        None, description="partition: the replicas a reassignment in progress removes, compared as a set"
    )
    preferred_leader: NullableNumberCond = Field(
        None, description="partition: the first replica in its assignment's order" + _OR_NULL
    )
    exists: bool | None = Field(None, description="partition: false when it was deleted or never created")
    leo: NumberCond = Field(None, description="replica: its log end offset" + _NUMBER)
    in_sync: bool | None = Field(None, description="replica: whether the broker is in the partition's committed ISR")
    dir: NumberCond = Field(
        None, description="replica: the number of the log directory its committed partition record places it in" + _NUMBER
    )
    fenced: bool | None = Field(None, description="broker: fenced in its committed registration")
    epoch: NumberCond = Field(
        None, description="broker: the broker epoch of its committed registration; quorum: the highest epoch a running voter "
        "has reached, null while no running voter has told its state" + _MAYBE_NULL
    )
    alive: bool | None = Field(None, description="broker: its process is running")
    in_controlled_shutdown: bool | None = Field(
        None, description="broker: the registration's committed flag, true from the controlled-shutdown request until the broker registers again"
    )
    offline_log_dirs: list[NonNegativeInt] | None = Field(
        None, description="broker: the log directories its committed registration reports offline (KIP-858), compared as a set"
    )
    states: dict[PositiveInt, QuorumStateName] | None = Field(
        None, description="quorum: voter id -> its KRaft state; only the voters named are checked"
    )

    acked: NumberCond = Field(
        None, description="history counter: records acknowledged so far, by every producer (the steps' and the loads')" + _NUMBER
    )
    failed: NumberCond = Field(
        None, description="history counter: records not acknowledged so far, failed or of unknown outcome, by every producer" + _NUMBER
    )
    acked_lost: NumberCond = Field(
        None, description="history counter: acknowledged acks=all records missing from their partition's committed log now "
        "(those of deleted topics excepted)" + _NUMBER
    )
    consumed: NumberCond = Field(
        None, description="history counter: records read by consumers so far (the consume steps' and the loads')" + _NUMBER
    )
    elections_clean: NumberCond = Field(
        None, description="history counter: clean partition leader elections committed so far (from the ISR or the ELR, "
        "preferred ones included)" + _NUMBER
    )
    elections_unclean: NumberCond = Field(
        None, description="history counter: unclean partition leader elections committed so far (unclean recovery's included)" + _NUMBER
    )
    elections_elr: NumberCond = Field(
        None, description="history counter: of the clean elections, those that chose a member of the ELR" + _NUMBER
    )
    quorum_elections: NumberCond = Field(
        None, description="history counter: KRaft leaders elected since the start, the first one included" + _NUMBER
    )

    @model_validator(mode="after")
    def _attributes_match_subject(self) -> Condition:
        given = self.model_fields_set - {"timeout_ms"}
        subjects = [s for s in SUBJECTS if s in given]
        if len(subjects) > 1:
            raise ValueError(f"a condition has at most one subject, got {', '.join(subjects)}")
        subject = subjects[0] if subjects else None
        allowed = set(SUBJECTS[subject]) if subject else set()
        for key in sorted(given - set(SUBJECTS) - set(HISTORY_COUNTERS)):
            if key not in allowed:
                owners = [s for s, attrs in SUBJECTS.items() if key in attrs]
                where = " or ".join(f"`{o}`" for o in owners)
                raise ValueError(f"`{key}` needs a {where} subject in the same condition")
        if not given:
            raise ValueError("a condition needs at least one key")
        if subject and not (given - {subject}):
            raise ValueError(f"the `{subject}` subject needs at least one attribute to check ({', '.join(SUBJECTS[subject])})")
        # `leader: null` is meaningful (no leader), so an explicit None must be kept apart from "absent".
        return self

    @model_serializer(mode="wrap")
    def _only_given_keys(self, handler: Any) -> dict[str, Any]:
        # `leader: null` means "no leader": a key the file did not give must not be written back.
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set or k == "timeout_ms"}

    def checks(self) -> dict[str, Any]:
        """The attribute and counter checks, by key (subject keys excluded)."""
        return {k: getattr(self, k) for k in self.model_fields_set if k not in SUBJECTS}


class WaitForCondition(Condition):
    timeout_ms: PositiveInt = Field(30_000, description="how long to wait for the condition; the step fails if it has not held by then")

    def checks(self) -> dict[str, Any]:
        return {k: v for k, v in super().checks().items() if k != "timeout_ms"}
