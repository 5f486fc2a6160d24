"""A fault mix drawn anew for each seed, and the schedule it makes (a campaign's `faults.swarm`).

A fixed mix (workloads/faults.py) gives every seed the same kinds, nodes chosen uniformly and
outages of one mean. Historical replication bugs need two or three faults on particular roles in a
particular order, which such a mix makes about once in a hundred seeds. The anchors:

- swarm testing (Groce et al., ISSTA 2012): each test leaves some features out, because features
  suppress bugs and compete for the test's time: each seed turns each fault kind, role and trigger
  on or off;
- TigerBeetle's VOPR and FoundationDB's clogging: each seed draws its own rates, and durations with
  heavy tails: intervals and outages log-uniform over wide ranges, from sub-second blips to outages
  longer than every timeout; one to a few phases, each a fresh draw (its targets, pace, outages and
  healing);
- FoundationDB's workloads and Jepsen's nemesis targets: faults aimed at roles, resolved when the
  fault fires (the controller's leader, a partition's leader or last ISR member...: the steps'
  selectors, workloads/steps.py);
- FoundationDB's BUGGIFY: per seed, some protocol states are on as triggers (the ISR under MinISR,
  the ISR down to its leader, a leader or controller change, a fenced broker), and a fault may wait
  for one and follow it within a short window;
- FoundationDB's simulator kills machines only while the cluster can survive it: past the
  protocol's tolerance (MinISR lossy unclean shutdowns of a partition's replicas) a lost record is
  the protocol's limit and is excused, so a run there cannot show a durability bug. Most seeds
  (`within_tolerance`) keep their lossy crashes of brokers (OS crashes, losing the page cache; disk
  losses) outstanding at once fewer than min.insync.replicas, the others may go past it. The
  budget is spent when a crash fires (the `fault` step's `lossy_budget`) and given back when the
  crashed broker is back in the ISR of every partition it held, as the checks count a lossy
  replica: a crash aimed at a role that names nobody spends none of it, and one past it is a
  process crash, which loses nothing.

The generator names states of the protocol and roles, never a protocol switch or a known bug. Every
draw comes from the seed's own stream (`swarm/<seed>`), so a seed's schedule is the same on every
machine, and the run's scenario (its steps and, in its description, the mix) replays it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Any

from workloads.faults import PAUSE_LOAD, UNDO_ALL, UNDO_ONE, FaultAction, PlannedFault, Trigger
from workloads.scenario.names import PARTITION_SELECTORS
from workloads.scenario.step_spec import LOSSY_CRASHES, PARTITION_TRIGGERS

from .spec import SwarmSpec

# The share of a phase's faults whose outage is drawn over the whole `outage_ms` range.
TAIL_SHARE = 0.5

LEADER_ROLES = ("controller-leader", "partition-leader")

# Roles that name a broker (a disk loss hits brokers only: a voter that lost its log must be
# removed and added again, KIP-853, which no schedule does).
BROKER_ROLES = ("fenced-broker", *PARTITION_SELECTORS)


@dataclass(frozen=True)
class Phase:
    """A part of the safety phase with a draw of its own: the fault kinds, roles and triggers on,
    how often a fault aims at a role or waits for a trigger, the nodes, the pace, the outages and
    what an outage's end undoes."""

    start_ms: float
    end_ms: float
    kinds: tuple[str, ...]
    roles: tuple[str, ...]
    role_share: float  # the probability that a fault aims at one of `roles`
    triggers: tuple[str, ...]
    trigger_share: float  # the probability that a fault waits for one of `triggers`
    targets: str  # all | brokers | controllers: the nodes a fault not aimed at a role picks among
    mean_interval_ms: float
    outage_ms: tuple[float, float]  # each fault's outage, log-uniform in this range
    heal: str  # one: an outage's end undoes that fault; all: every fault
    patterns: tuple[str, ...] = ()
    pattern_share: float = 0.0  # the probability that a fault is one of `patterns` (when one fits its kind)
    hold: bool = False  # the phase holds one fault, a leader cut off, for its span, and makes no other
    idle: bool = False  # the load idles for the phase's span
    # The phase opens with one clog_then_kill and no other fault, the load idle, until the slow
    # link heals; then goes on as drawn (never with hold).
    calm: bool = False

    def describe(self) -> list[str]:
        idle = ", the load idle" if self.idle else ""
        if self.hold:
            return [f"{self.start_ms:.0f}-{self.end_ms:.0f} ms: hold: a leader cut off for the whole phase, no other fault{idle}"]
        calm = "calm first (one clog_then_kill of a partition's follower alone, the load idle, until its link heals); then " if self.calm else ""
        low, high = self.outage_ms
        return [f"{self.start_ms:.0f}-{self.end_ms:.0f} ms: {calm}kinds {', '.join(self.kinds)} on {self.targets}, a fault every "
                f"{self.mean_interval_ms:.0f} ms on average, outages {low:.0f}-{high:.0f} ms, heal {self.heal}{idle}",
                f"    roles {', '.join(self.roles) or 'none'} (a fault aims at one with probability {self.role_share:.2f}); "
                f"triggers {', '.join(self.triggers) or 'none'} (probability {self.trigger_share:.2f}); "
                f"patterns {', '.join(self.patterns) or 'none'} (probability {self.pattern_share:.2f})"]


@dataclass(frozen=True)
class SwarmMix:
    """What one seed draws: its lossy-crash budget and its phases."""

    seed: int
    lossy_budget: int | None  # lossy crashes of brokers the seed may have outstanding at once (None: no limit)
    phases: tuple[Phase, ...]

    def describe(self) -> list[str]:
        budget = ("no limit" if self.lossy_budget is None else
                  f"at most {self.lossy_budget} at once (each until its broker is back in the ISR), then process crashes")
        lines = [f"swarm mix for seed {self.seed}: lossy crashes of brokers: {budget}"]
        for i, phase in enumerate(self.phases):
            first, *rest = phase.describe()
            lines += [f"  phase {i + 1}: {first}", *rest]
        return lines


def log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def some_of(rng: random.Random, pool: list[str]) -> tuple[str, ...]:
    """Each item on with probability 1/2 (swarm testing's coin per feature)."""
    return tuple(x for x in pool if rng.random() < 0.5)


def draw_mix(spec: SwarmSpec, seed: int, duration_ms: float, min_isr: int = 1) -> tuple[SwarmMix, random.Random]:
    """The seed's mix, and its stream positioned for the schedule's draws. `min_isr`: the
    scenario's min.insync.replicas, the protocol's tolerance of lossy crashes."""
    rng = random.Random(f"swarm/{seed}")
    calm_rng = random.Random(f"swarm/{seed}/calm")
    lossy_budget = max(0, min_isr - 1) if rng.random() < spec.within_tolerance else None
    count = rng.randint(*spec.phases)
    bounds = [0.0, *sorted(rng.uniform(0.0, duration_ms) for _ in range(count - 1)), duration_ms]
    phases = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        kinds = some_of(rng, list(spec.kinds)) or (rng.choice(spec.kinds),)
        roles = some_of(rng, list(spec.roles))
        triggers = some_of(rng, list(spec.triggers))
        outages = sorted(log_uniform(rng, *spec.outage_ms) for _ in range(2))
        role_share = round(rng.random(), 3) if roles else 0.0
        trigger_share = round(rng.random(), 3) if triggers else 0.0
        targets, interval = rng.choice(spec.targets), round(log_uniform(rng, *spec.interval_ms), 1)
        heal = "all" if rng.random() < spec.heal_all else "one"
        patterns = some_of(rng, list(spec.patterns))
        pattern_share = round(rng.random(), 3) if patterns else 0.0
        hold = rng.random() < spec.hold
        idle = rng.random() < spec.idle
        # Drawn from a stream of its own, so that turning calm phases on or off leaves every other
        # draw of the seed as it was.
        calm = not hold and calm_rng.random() < spec.calm and _calm_crash(spec) is not None
        phases.append(Phase(round(start, 1), round(end, 1), kinds, roles, role_share, triggers, trigger_share, targets, interval,
                            (round(outages[0], 1), round(outages[1], 1)), heal, patterns, pattern_share, hold, idle, calm))
    return SwarmMix(seed, lossy_budget, tuple(phases)), rng


def draw_swarm(spec: SwarmSpec, seed: int, duration_ms: float, brokers: list[str], controllers: list[str],
               partitions: list[str], min_isr: int = 1, session_timeout_ms: float = 9_000.0) -> tuple[SwarmMix, list[PlannedFault]]:
    """The seed's mix and the faults it makes over `duration_ms` of safety phase, in time order.
    `session_timeout_ms`: the scenario's broker.session.timeout.ms, which a calm opening's slow
    link outlasts."""
    mix, rng = draw_mix(spec, seed, duration_ms, min_isr)
    # A calm opening draws from a stream of its own and is carved out of its phase (the phase's
    # faults that would have started in it are drawn, then left out), so that every other fault
    # of the seed is the one it would be without it.
    calm_rng = random.Random(f"swarm/{seed}/calm-opening")
    nodes = {"all": brokers + controllers, "brokers": brokers, "controllers": controllers}
    faults: list[PlannedFault] = []
    for phase in mix.phases:
        if phase.idle and phase.end_ms > phase.start_ms:
            faults.append(PlannedFault(FaultAction(phase.start_ms, PAUSE_LOAD), FaultAction(phase.end_ms, UNDO_ONE), None, None))
        if phase.hold:
            faults.append(_hold(rng, phase, brokers + controllers, partitions))
            continue
        start = phase.start_ms
        if phase.calm and partitions:
            (*clogs, kill), start = _calm(calm_rng, spec, phase, partitions, duration_ms, session_timeout_ms)
            faults += [*clogs, _within_budget(kill, mix.lossy_budget, keeps_its_kind=True)]
            if not phase.idle and start > phase.start_ms:
                faults.append(PlannedFault(FaultAction(phase.start_ms, PAUSE_LOAD), FaultAction(start, UNDO_ONE), None, None))
        if partitions:
            # Every phase watches every partition's sole in-sync holder: armed for the whole phase
            # (from the end of a calm opening), a lossy crash strikes once its partition's ISR has
            # shrunk to one replica, the one moment a lossy crash can take what no other replica
            # has (a crash of a follower, or of a leader with in-sync followers, loses nothing
            # another replica lacks). The watch is the tolerance's probe,
            # not one of the phase's drawn faults: a phase without a lossy kind on watches too,
            # with an OS crash, since which phase and which partition see an ISR shrink to one is
            # the run's to decide (the faults of any phase may cause it). Within tolerance, the
            # budget is spent when one strikes (while it is, the others are process crashes);
            # never struck, a watch spends nothing. A seed without a limit watches too: whether
            # its partition is past the tolerance when one strikes is the checks' to say.
            lossy = [k for k in phase.kinds if k in LOSSY_CRASHES] or ["crash_os"]
            for partition in partitions:
                watch = FaultAction(start, rng.choice(lossy), (f"{SOLE_HOLDER}:{partition}",))
                if start < phase.end_ms:
                    faults.append(PlannedFault(watch, FaultAction(phase.end_ms, UNDO_ONE), None, mix.lossy_budget))
        t = phase.start_ms
        while True:
            t += rng.expovariate(1.0 / phase.mean_interval_ms)
            if t >= phase.end_ms:
                break
            made = _phase_fault(rng, spec, phase, t, nodes, brokers, controllers, partitions, mix.lossy_budget, duration_ms)
            if t >= start:
                faults += made
    faults.sort(key=lambda f: f.fault.at_ms)
    return mix, faults


def _phase_fault(rng: random.Random, spec: SwarmSpec, phase: Phase, t: float, nodes: dict[str, list[str]], brokers: list[str],
                 controllers: list[str], partitions: list[str], lossy_budget: int | None, duration_ms: float) -> list[PlannedFault]:
    """The fault (or the compound fault's parts) a phase makes at `t`; none when it names nobody."""
    kind = rng.choice(phase.kinds)
    trigger = None
    if phase.triggers and rng.random() < phase.trigger_share:
        state = rng.choice(phase.triggers)
        trigger = Trigger(state, rng.choice(partitions) if state in PARTITION_TRIGGERS and partitions else None,
                          round(rng.uniform(*spec.trigger_window_ms)))
    pool = nodes[phase.targets] if kind != "crash_disk" else brokers
    # Half within the phase's range, half over the whole range, so that every
    # phase has its tail of outages longer than every timeout, and of blips.
    outage = min(log_uniform(rng, *(spec.outage_ms if rng.random() < TAIL_SHARE else phase.outage_ms)), duration_ms - t)
    undo = FaultAction(round(t + outage, 1), UNDO_ONE if phase.heal == "one" else UNDO_ALL)
    pattern = _pattern(rng, phase, kind)
    if pattern == "majority":
        group = controllers if phase.targets == "controllers" and kind != "crash_disk" else brokers
        if phase.targets == "all" and kind != "crash_disk" and rng.random() < 0.5:
            group = controllers
        return [_within_budget(PlannedFault(FaultAction(round(t, 1), kind, (node,)), undo, trigger, None), lossy_budget)
                for node in sorted(rng.sample(group, len(group) // 2 + 1))]
    if pattern == "clog_then_kill":
        clogs, kill = _clog_then_kill(rng, spec, kind, t, phase.targets, partitions, trigger, duration_ms, CLOG_MS)
        return [*clogs, _within_budget(kill, lossy_budget, keeps_its_kind=True)]
    role = _role(rng, phase, kind, trigger, partitions)
    fault = _fault(rng, spec, kind, round(t, 1), pool or brokers, role)
    if fault is None:
        return []
    return [_within_budget(PlannedFault(fault, undo, trigger, None), lossy_budget)]


def _within_budget(planned: PlannedFault, lossy_budget: int | None, keeps_its_kind: bool = False) -> PlannedFault:
    """Within tolerance, the phase's lossy crashes of brokers lose nothing: they still shake the
    ISRs, which is how a sole holder comes about; one aimed at the sole holder keeps its kind and
    spends the budget as the watch does, and so does a clog_then_kill's crash (its loss is what
    the dead incarnation's messages contradict)."""
    fault = planned.fault
    if fault.action not in LOSSY_CRASHES or not _names_a_broker(fault.nodes[0]) or lossy_budget is None:
        return planned
    if keeps_its_kind or fault.nodes[0].split(":")[0] == SOLE_HOLDER:
        return replace(planned, lossy_budget=lossy_budget)
    return replace(planned, fault=replace(fault, action="crash_process"))


def _pattern(rng: random.Random, phase: Phase, kind: str) -> str | None:
    """The compound fault this fault is, if any: `majority` for a crash or an isolation,
    `clog_then_kill` for a crash."""
    if not phase.patterns or rng.random() >= phase.pattern_share:
        return None
    fitting = [p for p in phase.patterns
               if (p == "majority" and (kind.startswith("crash_") or kind == "isolate"))
               or (p == "clog_then_kill" and kind.startswith("crash_"))]
    return rng.choice(fitting) if fitting else None


def _clog_then_kill(rng: random.Random, spec: SwarmSpec, kind: str, t: float, targets: str, partitions: list[str],
                    trigger: Trigger | None, duration_ms: float, clog_ms: tuple[float, float]) -> tuple[list[PlannedFault], PlannedFault]:
    """FoundationDB's Rollback workload: a follower's link to its leader (a partition's, or the
    controllers') turns slow, then the follower crashes and soon returns while what it sent
    before the crash is still on its way: messages of a dead incarnation reach a leader that has
    met the new one. The link heals after the slowest of them has arrived."""
    if kind == "crash_disk" or (targets == "controllers" or (targets == "all" and rng.random() < 0.5)) or not partitions:
        follower, leader = "controller-follower", "controller-leader"
        if kind == "crash_disk":
            follower, leader = f"partition-follower:{rng.choice(partitions)}", None
    else:
        partition = trigger.partition if trigger is not None and trigger.partition else rng.choice(partitions)
        follower, leader = f"partition-follower:{partition}", f"partition-leader:{partition}"
    # The clog spans the protocol's timeouts (log-uniform over `clog_ms`; the pattern's CLOG_MS): a
    # crashed node's old session must expire before its new incarnation may register (Kafka
    # refuses a second registration of a live broker id), so only a clog longer than the session
    # timeout lets the dead incarnation's messages meet the new one's registration.
    delay = round(log_uniform(rng, *clog_ms), 1)
    kill_at = min(t + rng.uniform(0.0, 1_000.0), max(t, duration_ms - 1.0))
    down = log_uniform(rng, 100.0, 2_000.0)
    heal_at = min(kill_at + down + delay + 500.0, duration_ms)
    clogs = []
    if leader is not None:
        clog = FaultAction(round(t, 1), "link", (follower, leader), drop=0.0, delay_ms=delay)
        clogs.append(PlannedFault(clog, FaultAction(round(heal_at, 1), UNDO_ONE), trigger, None))
    kill = FaultAction(round(kill_at, 1), kind, (follower,))
    return clogs, PlannedFault(kill, FaultAction(round(min(kill_at + down, duration_ms), 1), UNDO_ONE))


def _calm(rng: random.Random, spec: SwarmSpec, phase: Phase, partitions: list[str], duration_ms: float,
          session_timeout_ms: float) -> tuple[list[PlannedFault], float]:
    """A calm phase's opening: shortly after the phase starts, a partition's follower's link to
    its leader turns slow, then the follower crashes (an OS crash, losing its page cache, if the
    campaign's kinds have it) and returns. With no other fault and no new record until the link
    heals, what the dead incarnation sent meets the leader in the state the new incarnation left
    it in: whether the leader can tell the two apart is what the opening probes. Returns its
    faults and when the phase goes on as drawn (the link healed, within the phase). Its slow link
    outlasts the broker session (log-uniform from `session_timeout_ms` to the longest clog), the
    one span in which both incarnations exist for the leader: a shorter clog delivers the dead
    incarnation's messages before the new one registers, which the pattern's clogs already try."""
    kind = _calm_crash(spec)
    at = round(phase.start_ms + rng.uniform(0.0, min(500.0, (phase.end_ms - phase.start_ms) / 2)), 1)
    outlasting = (session_timeout_ms, max(CLOG_MS[1], 2 * session_timeout_ms))
    clogs, kill = _clog_then_kill(rng, spec, kind, at, "brokers", partitions, None, duration_ms, outlasting)
    healed = max([c.undo.at_ms for c in clogs] + [kill.undo.at_ms])
    # The crash spends the seed's lossy budget as any lossy crash of a broker does (the caller's
    # `_within_budget`): the checks count the follower's crash until it is back in the ISR, caught
    # up, so two of them at once would take the partition past the protocol's tolerance, where
    # every loss is excused.
    return [*clogs, kill], min(phase.end_ms, healed)


def _calm_crash(spec: SwarmSpec) -> str | None:
    """The crash a calm phase makes: of the campaign's kinds, an OS crash first (its lost page
    cache is what the dead incarnation's messages can contradict), else a process crash."""
    return next((k for k in ("crash_os", "crash_process") if k in spec.kinds), None)


def _hold(rng: random.Random, phase: Phase, nodes: list[str], partitions: list[str]) -> PlannedFault:
    """A leader cut off for the phase's span (Jepsen's partition of the primaries): the
    controllers' leader or a partition's, isolated from everyone or partitioned from the cluster's
    other nodes (its clients still reach it), from shortly after the phase starts to its end."""
    leader = "controller-leader" if not partitions or rng.random() < 0.5 else f"partition-leader:{rng.choice(partitions)}"
    at = round(phase.start_ms + rng.uniform(0.0, min(500.0, (phase.end_ms - phase.start_ms) / 2)), 1)
    if rng.random() < 2 / 3:
        cut = FaultAction(at, "isolate", (leader,))
    else:
        cut = FaultAction(at, "partition", groups=((leader,), tuple(nodes)))
    return PlannedFault(cut, FaultAction(max(at, phase.end_ms), UNDO_ONE), None, None)


# How long a clog_then_kill's clog delays each message: from a second to past every timeout.
CLOG_MS = (1_000.0, 30_000.0)

# The role that holds what no other replica may have: a partition's ISR's one member, once its
# ISR has shrunk to it.
SOLE_HOLDER = "partition-last-isr"


def _names_a_broker(node: str) -> bool:
    return node.startswith("b") or node.split(":")[0] in BROKER_ROLES


def _role(rng: random.Random, phase: Phase, kind: str, trigger: Trigger | None, partitions: list[str]) -> str | None:
    """The role the fault aims at, if it aims at one: a partition's role takes the trigger's
    partition (the fault follows what happened there), else one drawn."""
    if not phase.roles or kind == "partition" or rng.random() >= phase.role_share:
        return None
    fitting = [r for r in phase.roles if kind != "crash_disk" or r in BROKER_ROLES]
    if not fitting:
        return None
    # The leaders twice as often as the other roles: Jepsen's nemeses aim at primaries, and a
    # protocol's leaders hold its state (the controller leader, a partition's leader).
    role = rng.choices(fitting, weights=[2 if r in LEADER_ROLES else 1 for r in fitting])[0]
    if role in PARTITION_SELECTORS:
        if not partitions:
            return None
        partition = trigger.partition if trigger is not None and trigger.partition else rng.choice(partitions)
        role = f"{role}:{partition}"
    return role


def _fault(rng: random.Random, spec: SwarmSpec, kind: str, at_ms: float, pool: list[str], role: str | None) -> FaultAction | None:
    if kind.startswith("crash_") or kind == "isolate":
        return FaultAction(at_ms, kind, (role or rng.choice(pool),))
    if kind == "partition":
        if len(pool) < 2:
            return None
        shuffled = list(pool)
        rng.shuffle(shuffled)
        cut = rng.randrange(1, len(shuffled))
        return FaultAction(at_ms, "partition", groups=(tuple(sorted(shuffled[:cut])), tuple(sorted(shuffled[cut:]))))
    # link (drops and delays) or slow (delays only): a role at one end, or two nodes of the pool
    if role is not None:
        other = rng.choice(pool)
        src, dst = (role, other) if rng.random() < 0.5 else (other, role)
    elif len(pool) >= 2:
        src, dst = rng.sample(pool, 2)
    else:
        return None
    if kind == "link":
        drop, delay = round(rng.uniform(*spec.link_drop), 3), round(rng.uniform(*spec.link_delay_ms), 1)
    else:
        drop, delay = 0.0, round(rng.uniform(*spec.slow_delay_ms), 1)
    return FaultAction(at_ms, "link", (src, dst), drop=drop, delay_ms=delay)


def topic_partitions(raw: dict[str, Any]) -> list[str]:
    """Every partition of the scenario's topics, `t-0`, in order."""
    return [f"{t['name']}-{p}" for t in raw.get("topics") or [] for p in range(int(t.get("partitions", 1)))]
