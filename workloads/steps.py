"""Carrying out a scenario's steps, in order, against a ClusterRuntime.

The first step that fails ends the run (later steps would only report its consequences); its index
(0-based, as in the key path `steps[N]`), kind and detail go into the summary's `failures`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actors.runtime import api, interrupts
from actors.runtime.api import ClusterRuntime, StepFailed
from observability import events
from observability.states import UNKNOWN

from .conditions import actual_values, describe_subject, holds, matches, mismatches, reported_from_now
from .drivers import topic_settings
from .fault_steps import FaultSteps
from .scenario.load_spec import LoadSpec, kafka_settings
from .scenario.names import PARTITION_SELECTORS, split_partition_ref
from .scenario.schema import Scenario
from .scenario.step_spec import (
    CrashStep,
    ExpectStep,
    FailLogDirStep,
    FaultStep,
    HealStep,
    IsolateStep,
    LinkStep,
    PartitionStep,
    RestartStep,
    ShutdownStep,
    StepBase,
    TriggerStep,
    UndoStep,
    WaitForStep,
    WaitStep,
)

SHUTDOWN_TIMEOUT_MS = 60_000.0
PROTOCOL_STEPS = ("produce", "consume", "load", "pause_load", "list_offsets", *api.ADMIN_STEPS)


@dataclass(frozen=True)
class Failure:
    step: int
    kind: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step, "kind": self.kind, "detail": self.detail}


class StepRunner:
    def __init__(self, runtime: ClusterRuntime, scenario: Scenario) -> None:
        self.runtime = runtime
        self.scenario = scenario
        self.current = -1  # index of the step being run (-1: before the first)
        # A generated schedule's faults; every wait goes through it, so that armed faults fire.
        self.faults = FaultSteps(runtime, self.resolve)

    def run(self, on_step=None) -> list[Failure]:
        for index, step in enumerate(self.scenario.steps):
            self.current = index
            # A run in a thread of its own (`kraftlab demo`'s two) that the command abandoned on
            # Ctrl-C: the Ray cluster also checks at every poll, the simulator between steps.
            interrupts.raise_if_abandoned()
            if on_step is not None:
                on_step(index, step)
            self.runtime.record(events.Step(index, step.kind()))
            try:
                self.run_step(step)
            except StepFailed as exc:
                self.runtime.record(events.StepFailed(index, step.kind(), str(exc)))
                return [Failure(index, step.kind(), str(exc))]
        return []

    def run_step(self, step: StepBase) -> None:
        rt = self.runtime
        match step:
            case WaitStep(wait=ms):
                self.faults.run_for(ms)
            case WaitForStep(wait_for=cond):
                view = rt.view()
                # Also a committed state that came and went between two looks (committed_history.py).
                reported = reported_from_now(rt.committed_states, cond)
                if not self.faults.run_until(lambda: holds(cond, view) or reported(), cond.timeout_ms):
                    raise StepFailed(
                        f"timed out after {cond.timeout_ms} ms waiting for {describe_subject(cond)}: "
                        + "; ".join(mismatches(cond, view))
                    )
            case ExpectStep(expect=cond):
                view = rt.view()
                problems = mismatches(cond, view)
                if problems and rt.unknown_grace_ms and _has_unknown(cond, view):
                    # On Ray the view is made of copies polled from each actor: a value the copies
                    # cannot tell yet (a replica not created in the copy taken a moment before the
                    # controller's) gets a short while to become known; a known wrong value fails.
                    rt.run_until(lambda: not _has_unknown(cond, view), rt.unknown_grace_ms)
                    problems = mismatches(cond, view)
                if problems:
                    raise StepFailed(f"{describe_subject(cond)}: " + "; ".join(problems))
            case CrashStep(crash=args):
                rt.crash(self.resolve(args.node), args.mode)
            case RestartStep(restart=node):
                rt.restart(self.resolve(node))
            case FailLogDirStep(fail_log_dir=args):
                rt.fail_log_dir(args.broker, args.dir)
            case ShutdownStep():
                args = step.target()
                rt.shutdown(self.resolve(args.node), SHUTDOWN_TIMEOUT_MS, wait=args.wait)
            case IsolateStep(isolate=node):
                rt.isolate(self.resolve(node))
            case PartitionStep(partition=groups):
                rt.partition([[self.resolve(n) for n in group] for group in groups])
            case LinkStep(link=args):
                rt.link(self.resolve(args.from_node), self.resolve(args.to_node), args.drop, args.delay_ms)
            case HealStep(heal=target):
                rt.heal(None if target == "all" else self.resolve(target))
            case FaultStep(fault=args):
                self.faults.fault(args)
            case UndoStep(undo=which):
                self.faults.undo(which)
            case TriggerStep(trigger=args):
                self.faults.trigger(args)
            case _ if step.kind() in PROTOCOL_STEPS:
                rt.protocol_step(step.kind(), protocol_command(step.kind(), step.args(), self.scenario.load))
            case _:
                raise AssertionError(f"no handler for step {step.kind()!r}")

    def resolve(self, ref: str) -> str:
        """A node name, or a selector resolved against the cluster as it is now (docs/reference).
        A selector that names nobody now raises StepFailed (a `fault` step skips instead)."""
        view = self.runtime.view()
        if ref == "controller-leader":
            leader = view.quorum().leader
            if leader is None or leader is UNKNOWN:
                raise StepFailed(f"{ref}: no controller leader is known now")
            return f"c{leader}"
        if ref == "controller-follower":
            states = view.quorum().states
            followers = sorted(v for v, s in states.items() if s == "follower")
            if not followers:
                raise StepFailed(f"{ref}: no controller voter is a follower now")
            return f"c{followers[0]}"
        if ref == "fenced-broker":
            fenced = sorted(b for b, state in view.brokers().items() if state.fenced is True)
            if not fenced:
                raise StepFailed(f"{ref}: no broker is fenced now")
            return f"b{fenced[0]}"
        selector, _, partition = ref.partition(":")
        if selector in PARTITION_SELECTORS:
            return f"b{self._partition_role(ref, selector, partition, view)}"
        return ref

    @staticmethod
    def _partition_role(ref: str, selector: str, partition: str, view: Any) -> int:
        state = view.partition(partition)
        if state is None:
            raise StepFailed(f"{ref}: the state of partition {partition} is not known")
        if selector == "partition-leader":
            if state.leader is None:
                raise StepFailed(f"{ref}: partition {partition} has no leader now")
            return state.leader
        if selector == "partition-follower":
            followers = sorted(b for b in state.isr if b != state.leader)
            if not followers:
                raise StepFailed(f"{ref}: partition {partition} has no in-sync follower now")
            return followers[0]
        if selector == "partition-last-isr":
            if len(state.isr) != 1:
                raise StepFailed(f"{ref}: the ISR of partition {partition} is {sorted(state.isr)}, not one replica")
            return state.isr[0]
        if not state.elr:  # partition-elr
            raise StepFailed(f"{ref}: partition {partition} has no eligible leader replica now")
        return min(state.elr)


def protocol_command(kind: str, args: Any, load: LoadSpec | None = None) -> api.ProtocolCommand:
    """A protocol step's arguments (the scenario model's) as the plain command the drivers carry out;
    `load`: the scenario's `load` section (who runs a `load` step's clients)."""
    match kind:
        case "produce":
            values = None if args.values is None else list(args.values)
            return api.Produce(args.topic, args.partition, args.count, values, args.acks, args.idempotence(), args.expect, args.timeout_ms)
        case "consume":
            expect_values = None if args.expect_values is None else list(args.expect_values)
            return api.Consume(args.topic, args.partition, args.from_offset, args.expect_count, expect_values, args.timeout_ms)
        case "load":
            topics = None if args.topics is None else list(args.topics)
            return api.Load(args.producers, args.consumers, args.rate_per_s, args.message_bytes, args.acks, topics, args.duration_ms, args.idempotence(),
                            args.config.buffer_memory, args.config.max_block_ms, args.config.delivery_timeout_ms,
                            args.config.linger_ms, args.config.batch_size,
                            kafka_settings(load, args) if load is not None and load.client == "librdkafka" else None)
        case "pause_load":
            return api.PauseLoad(float(args))
        case "list_offsets":
            topic, p = split_partition_ref(args.partition)
            expected = args.expect
            accepts = None if expected == "any" else _offset_answer_test(expected)
            return api.ListOffsets(topic, p, args.timeout_ms, accepts, str(expected))
        case "elect":
            topic, p = split_partition_ref(args.partition)
            return api.Elect(topic, p, args.type, args.expect_error)
        case "reassign":
            topic, p = split_partition_ref(args.partition)
            return api.Reassign(topic, p, list(args.replicas), args.expect_error)
        case "cancel_reassignment":
            topic, p = split_partition_ref(args.partition)
            return api.CancelReassignment(topic, p, args.expect_error)
        case "alter_config":
            return api.AlterConfig(args.topic, dict(args.config), args.expect_error)
        case "create_topic":
            return api.CreateTopic(topic_settings(args), args.expect_error)
        case "delete_topic":
            if isinstance(args, str):  # `delete_topic: NAME`
                return api.DeleteTopic(args)
            return api.DeleteTopic(args.name, args.expect_error)
        case "create_partitions":
            assignment = None if args.assignment is None else {p: list(r) for p, r in args.assignment.items()}
            return api.CreatePartitions(args.topic, args.count, assignment, args.expect_error)
    raise AssertionError(f"{kind!r} is not a protocol step")


def _offset_answer_test(expected: Any):
    """`list_offsets.expect` (`not_available`, a number or a comparison) as a test of the answer: an
    offset, `not_available`, or another error's name."""

    def accepts(got: int | str) -> bool:
        if isinstance(expected, str) or isinstance(got, str):
            return got == expected
        return matches(expected, got, "offset")

    return accepts


def _has_unknown(cond, view) -> bool:
    return any(v is UNKNOWN for v in actual_values(cond, view).values())
