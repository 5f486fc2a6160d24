"""Carrying out a scenario's steps, in order, against a ClusterRuntime.

The first step that fails ends the run (later steps would only report its consequences); its index
(0-based, as in the key path `steps[N]`), kind and detail go into the summary's `failures`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workloads.scenario.schema import (
    CrashStep,
    ExpectStep,
    HealStep,
    IsolateStep,
    LinkStep,
    PartitionStep,
    RestartStep,
    Scenario,
    ShutdownStep,
    StepBase,
    WaitForStep,
    WaitStep,
)

from observability import events
from observability.states import UNKNOWN

from .conditions import actual_values, describe_subject, holds, mismatches, reported_from_now
from actors.runtime.api import ClusterRuntime, StepFailed

SHUTDOWN_TIMEOUT_MS = 60_000.0
PROTOCOL_STEPS = ("produce", "consume", "load", "list_offsets", "elect", "reassign", "alter_config")


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

    def run(self, on_step=None) -> list[Failure]:
        for index, step in enumerate(self.scenario.steps):
            self.current = index
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
                rt.run_for(ms)
            case WaitForStep(wait_for=cond):
                view = rt.view()
                # Also a committed state that came and went between two looks (committed_history.py).
                reported = reported_from_now(rt.committed_states, cond)
                if not rt.run_until(lambda: holds(cond, view) or reported(), cond.timeout_ms):
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
            case ShutdownStep(shutdown=node):
                rt.shutdown(self.resolve(node), SHUTDOWN_TIMEOUT_MS)
            case IsolateStep(isolate=node):
                rt.isolate(self.resolve(node))
            case PartitionStep(partition=groups):
                rt.partition([[self.resolve(n) for n in group] for group in groups])
            case LinkStep(link=args):
                rt.link(self.resolve(args.from_node), self.resolve(args.to_node), args.drop, args.delay_ms)
            case HealStep(heal=target):
                rt.heal(None if target == "all" else self.resolve(target))
            case _ if step.kind() in PROTOCOL_STEPS:
                rt.protocol_step(step.kind(), step.args())
            case _:
                raise AssertionError(f"no handler for step {step.kind()!r}")

    def resolve(self, ref: str) -> str:
        """A node name, or a selector resolved against the cluster as it is now (contract.md)."""
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
        if ref.startswith("partition-leader:") or ref.startswith("partition-follower:"):
            selector, partition = ref.split(":", 1)
            state = view.partitions().get(partition)
            if state is None:
                raise StepFailed(f"{ref}: the state of partition {partition} is not known")
            if selector == "partition-leader":
                if state.leader is None:
                    raise StepFailed(f"{ref}: partition {partition} has no leader now")
                return f"b{state.leader}"
            followers = sorted(b for b in state.isr if b != state.leader)
            if not followers:
                raise StepFailed(f"{ref}: partition {partition} has no in-sync follower now")
            return f"b{followers[0]}"
        return ref


def _has_unknown(cond, view) -> bool:
    return any(v is UNKNOWN for v in actual_values(cond, view).values())
