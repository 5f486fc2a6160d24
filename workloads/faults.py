"""Random fault schedules drawn from a seed (the contract's campaign `faults:` profile).

A schedule is a list of timed actions decided up front from its own `random.Random`, so the same
seed always injects the same faults, and the profile can be printed before the run starts
(TigerBeetle style: the seed and the derived fault profile first). Each fault is undone after a
random duration: crashed nodes restart, network faults heal. After `duration_ms` comes the heal
phase: every fault is removed and every node runs, so liveness can be required within a bound.
The simulator carries out the schedule's `actions` (actors/runtime/sim/faults.py).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from actors.runtime.api import FaultAction  # the actions a driver carries out (actors/runtime/sim/faults.py)

__all__ = ["FaultAction", "FaultKind", "FaultProfile", "FaultSchedule", "PlannedFault", "Trigger"]

FaultKind = Literal["crash_os", "crash_process", "crash_disk", "isolate", "partition", "link", "slow"]
FAULT_KINDS: tuple[str, ...] = FaultKind.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class FaultProfile:
    kinds: tuple[FaultKind, ...] = ("crash_os", "crash_process", "isolate", "partition")
    mean_interval_ms: float = 5_000.0
    duration_ms: float = 60_000.0
    mean_outage_ms: float = 4_000.0  # how long a crash or network fault lasts, on average
    # A `link` fault drops a share of the messages in this range and delays the rest by this much.
    link_drop: tuple[float, float] = (0.1, 1.0)
    link_delay_ms: tuple[float, float] = (0.0, 50.0)
    # A `slow` fault delays every message of one link by this much, and drops none.
    slow_delay_ms: tuple[float, float] = (50.0, 2_000.0)


@dataclass(frozen=True)
class Trigger:
    """The protocol state a fault waits for (the `trigger` step) from the schedule's action
    before it on: the fault follows `window_ms` after the state, or comes at its time without it."""

    state: str
    partition: str | None
    window_ms: float

    def describe(self) -> str:
        on = f" of {self.partition}" if self.partition else ""
        return f"as soon as {self.state}{on} (+{self.window_ms:.0f} ms)"


# The undo actions of a generated schedule's faults: `undo: ID` (that fault) or `undo: all`.
UNDO_ONE, UNDO_ALL = "undo", "undo_all"
# An idle period of the load in a generated schedule (a swarm phase's): a `pause_load` step, undone
# by nothing (it ends by itself); planned as a fault so that a minimizer may take it out.
PAUSE_LOAD = "pause_load"


@dataclass(frozen=True)
class PlannedFault:
    """One fault of a schedule and the action that undoes it: what a minimizer removes as one
    (kraftlab/campaign/minimize.py). A fixed schedule's (workloads/faults.py) is made of plain
    steps on named nodes, undone by `restart` or `heal`; a generated one's (a swarm's,
    workloads/campaign/swarm.py) becomes a `fault` step, whose nodes may be selectors resolved when
    it fires, undone by `undo`, and may wait for a protocol state first (`trigger`)."""

    fault: FaultAction
    undo: FaultAction
    trigger: Trigger | None = None
    # A generated lossy crash of a broker: how many such crashes the run may have made before it,
    # past which it is a process crash (the `fault` step's `lossy_budget`); None: no limit.
    lossy_budget: int | None = None

    @property
    def generated(self) -> bool:
        return self.undo.action in (UNDO_ONE, UNDO_ALL)

    def describe(self) -> list[str]:
        """The fault's line (with its trigger) and its undoing's."""
        first = self.fault.describe() + (f"  {self.trigger.describe()}" if self.trigger is not None else "")
        if not self.generated:
            return [first, self.undo.describe()]
        if self.fault.action == PAUSE_LOAD:
            return [first, f"{self.undo.at_ms:>9.0f} ms  {'load resumes':<13s}"]
        what = "all" if self.undo.action == UNDO_ALL else (self.fault.nodes or self.fault.groups)
        return [first, f"{self.undo.at_ms:>9.0f} ms  {'undo':<13s} {what}"]


@dataclass
class FaultSchedule:
    seed: int
    profile: FaultProfile
    nodes: tuple[str, ...]
    actions: list[FaultAction] = field(default_factory=list)
    # Each fault with the action that undoes it, in the order drawn.
    faults: list[PlannedFault] = field(default_factory=list)

    @classmethod
    def draw(cls, seed: int, nodes: Sequence[str], profile: FaultProfile) -> FaultSchedule:
        rng = random.Random(f"faults/{seed}")
        schedule = cls(seed, profile, tuple(nodes))
        down_until: dict[str, float] = {}
        t = 0.0
        while True:
            t += rng.expovariate(1.0 / profile.mean_interval_ms)
            if t >= profile.duration_ms:
                break
            kind = rng.choice(profile.kinds)
            outage = min(rng.expovariate(1.0 / profile.mean_outage_ms), profile.duration_ms - t)
            up = [n for n in nodes if down_until.get(n, 0.0) <= t]
            if kind.startswith("crash"):
                # A disk loss hits brokers only: a KRaft voter that loses its log must be removed
                # and added again (KIP-853), which no fault schedule does.
                up = [n for n in up if kind != "crash_disk" or n.startswith("b")]
                if not up:
                    continue
                node = rng.choice(up)
                down_until[node] = t + outage
                schedule._add(FaultAction(t, kind, (node,)), FaultAction(t + outage, "restart", (node,)))
            elif kind == "isolate":
                node = rng.choice(list(nodes))
                schedule._add(FaultAction(t, "isolate", (node,)), FaultAction(t + outage, "heal", (node,)))
            elif kind == "partition":
                shuffled = list(nodes)
                rng.shuffle(shuffled)
                cut = rng.randrange(1, len(shuffled)) if len(shuffled) > 1 else 1
                groups = (tuple(sorted(shuffled[:cut])), tuple(sorted(shuffled[cut:])))
                schedule._add(FaultAction(t, "partition", groups=groups), FaultAction(t + outage, "heal", ()))
            elif kind in ("link", "slow") and len(nodes) > 1:
                src, dst = rng.sample(list(nodes), 2)
                if kind == "link":
                    drop, delay = round(rng.uniform(*profile.link_drop), 3), round(rng.uniform(*profile.link_delay_ms), 1)
                else:
                    drop, delay = 0.0, round(rng.uniform(*profile.slow_delay_ms), 1)
                schedule._add(FaultAction(t, "link", (src, dst), drop=drop, delay_ms=delay), FaultAction(t + outage, "heal", (src,)))
        schedule.actions.sort(key=lambda a: a.at_ms)
        return schedule

    def _add(self, fault: FaultAction, undo: FaultAction) -> None:
        self.actions += [fault, undo]
        self.faults.append(PlannedFault(fault, undo))

    def describe(self) -> str:
        lines = [f"fault schedule for seed {self.seed}: {len(self.actions)} actions over {self.profile.duration_ms:g} ms"]
        return "\n".join(lines + [a.describe() for a in self.actions])
