"""Evaluating `wait_for` / `expect` conditions (docs/reference/steps-and-conditions.md, "Conditions") against a ClusterView."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from observability.committed_history import CommittedHistory
from observability.projection import ClusterProjection as ClusterView
from observability.states import UNKNOWN

from .scenario.condition_spec import BROKER_ATTRS, HISTORY_COUNTERS, PARTITION_ATTRS, Comparison, Condition

SET_VALUED = frozenset({"replicas", "isr", "elr", "last_known_elr", "adding_replicas", "removing_replicas", "offline_log_dirs"})
# The subjects' attributes (docs/reference/steps-and-conditions.md, "Conditions") less those no metadata record holds: `hwm`
# is the leader's and `alive` the process's, not the controller's, and `exists` is whether there is
# a record at all; they are read from the cluster as it is now.
PARTITION_RECORD_KEYS = frozenset(PARTITION_ATTRS) - {"hwm", "exists"}
BROKER_RECORD_KEYS = frozenset(BROKER_ATTRS) - {"alive"}


def actual_values(cond: Condition, view: ClusterView) -> dict[str, Any]:
    """The current value of every key the condition checks (UNKNOWN where the cluster cannot tell)."""
    checks = cond.checks()
    out: dict[str, Any] = {}
    for key in checks:
        if key in HISTORY_COUNTERS:
            out[key] = view.counter(key)
        elif cond.partition is not None:
            state = view.partition(cond.partition)
            if key == "exists":
                out[key] = state is not None  # a partition has a state once the metadata created it
            else:
                out[key] = UNKNOWN if state is None else getattr(state, key)
        elif cond.replica is not None:
            state = view.replica(cond.replica.partition, cond.replica.broker)
            out[key] = UNKNOWN if state is None else getattr(state, key)
        elif cond.broker is not None:
            state = view.brokers().get(cond.broker)
            out[key] = UNKNOWN if state is None else getattr(state, key)
        elif cond.quorum is not None:
            out[key] = getattr(view.quorum(), key)
        else:  # the schema makes every non-counter key need a subject
            raise AssertionError(f"condition key {key!r} without a subject")
    return out


def matches(expected: Any, actual: Any, key: str) -> bool:
    if actual is UNKNOWN:
        return False
    if isinstance(expected, Comparison):
        return expected.holds(actual)
    if key in SET_VALUED:
        return actual is not None and set(expected) == set(actual)
    if key == "states":
        # Only the voters named must be in the named state.
        return all(actual.get(voter) == state for voter, state in expected.items())
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return expected == actual


def _show(value: Any) -> str:
    if value is UNKNOWN:
        return "unknown (the running roles cannot tell this yet)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in sorted(value)) + "]"
    if isinstance(value, Comparison):
        return str(value)
    return str(value)


def mismatches(cond: Condition, view: ClusterView) -> list[str]:
    """One line per key that does not hold, e.g. "isr: expected [1,2], got [1]"; empty when all hold."""
    actual = actual_values(cond, view)
    out = []
    if cond.replica is not None and view.replica(cond.replica.partition, cond.replica.broker) is None:
        state = view.partition(cond.replica.partition)
        if state is not None and cond.replica.broker not in state.replicas:
            return [f"broker {cond.replica.broker} is not a replica of {cond.replica.partition} (replicas {_show(list(state.replicas))})"]
    for key, expected in cond.checks().items():
        if not matches(expected, actual[key], key):
            out.append(f"{key}: expected {_show(expected)}, got {_show(actual[key])}")
    return out


def holds(cond: Condition, view: ClusterView) -> bool:
    actual = actual_values(cond, view)
    return all(matches(expected, actual[key], key) for key, expected in cond.checks().items())


def describe_subject(cond: Condition) -> str:
    if cond.partition is not None:
        return f"partition {cond.partition}"
    if cond.replica is not None:
        return f"replica {cond.replica.partition} on broker {cond.replica.broker}"
    if cond.broker is not None:
        return f"broker {cond.broker}"
    if cond.quorum is not None:
        return "quorum"
    return "history"


def reported_from_now(history: CommittedHistory, cond: Condition) -> Callable[[], bool]:
    """A check that turns (and stays) true once a committed state reported after this call
    satisfies every key of `cond` (observability/committed_history.py: states committed together
    pass between two judgments of the view); always false for a condition these states cannot judge."""
    checks = cond.checks()
    if cond.partition is not None and checks.keys() <= PARTITION_RECORD_KEYS:
        subject: tuple[str, Any] = ("partition", cond.partition)
    elif cond.broker is not None and checks.keys() <= BROKER_RECORD_KEYS:
        subject = ("broker", cond.broker)
    else:
        return lambda: False
    return history.reported_from_now(subject, lambda attributes: all(matches(want, attributes[key], key) for key, want in checks.items()))
