"""One run of a campaign as a complete scenario: the base scenario with its cell's overrides and its
seed, then the load and the fault schedule drawn from the seed, then the convergence epilogue.

The run is a plain scenario (its steps are the documented), so `kraftlab run` replays it from the
`scenario.yaml` its run directory keeps, on either runtime, and a minimizer can cut it down
(kraftlab/campaign/minimize.py). Its steps, in order:

1. the base scenario's steps, where the `load` drawn from the seed (the campaign's `load:` profile,
   a list being a choice among its values) replaces the base's first `load` step (or follows the
   base steps when it has none; the base's other `load` steps are left out);
2. the safety phase, once the base steps end: the fault schedule drawn from the seed
   (workloads/faults.py), as timed steps;
3. the epilogue: heal every network fault, then, each within `faults.converge_ms`, the quorum led,
   every partition led, and one acks=all record acknowledged by every partition. A failure from
   step `epilogue_start` on is a liveness failure.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from workloads.faults import PAUSE_LOAD, UNDO_ALL, FaultAction, FaultProfile, FaultSchedule, PlannedFault
from workloads.scenario.cluster_spec import KafkaConfig
from workloads.scenario.loading import Problem, ScenarioError, validate
from workloads.scenario.schema import Scenario

from .spec import ALLOWANCES, Campaign, CampaignError, Cell, FaultsSpec, LoadProfile
from .swarm import draw_swarm, topic_partitions


@dataclass(frozen=True)
class RunPlan:
    """What one run is: enough to rebuild its scenario anywhere (it crosses to a Ray worker as is)."""

    run: str  # "c<cell>-s<seed>"
    cell: int
    seed: int
    raw: dict[str, Any]  # the complete scenario mapping
    epilogue_start: int  # index of the first epilogue step (-1: no epilogue)
    faults: int  # the number of faults in the safety phase
    load_step: int = -1  # index of the drawn `load` step (-1: the campaign has no `load`)
    safety_step: int = -1  # index of the safety phase's first step (-1: no fault profile)
    schedule: str = ""  # the derived load and faults, for people (TigerBeetle-style)
    columns: dict[str, Any] = field(default_factory=dict)  # the cell's results columns
    allow: tuple[str, ...] = ()  # the campaign's `allow`: the anomaly names it excuses when allowed

    def scenario(self) -> Scenario:
        return validate(self.raw, f"{self.run}/scenario.yaml")


def run_id(cell: Cell, seed: int) -> str:
    return f"c{cell.index}-s{seed}"


def fault_profile(spec: FaultsSpec) -> FaultProfile:
    return FaultProfile(
        kinds=tuple(spec.kinds or ()),
        mean_interval_ms=spec.mean_interval_ms,
        duration_ms=spec.duration_ms,
        mean_outage_ms=spec.mean_outage_ms,
        link_drop=tuple(spec.link_drop),  # type: ignore[arg-type]
        link_delay_ms=tuple(spec.link_delay_ms),  # type: ignore[arg-type]
        slow_delay_ms=tuple(spec.slow_delay_ms),  # type: ignore[arg-type]
    )


def fault_targets(raw: dict[str, Any], targets: str) -> list[str]:
    cluster = raw.get("cluster") or {}
    brokers = [f"b{i}" for i in range(1, int(cluster.get("brokers", 3)) + 1)]
    controllers = [f"c{i}" for i in range(1, int(cluster.get("controllers", 3)) + 1)]
    return {"all": brokers + controllers, "brokers": brokers, "controllers": controllers}[targets]


def draw_load(profile: LoadProfile, seed: int) -> dict[str, Any]:
    """The load step's arguments: each key a list is drawn from, with its own stream of the seed.
    `idempotent` applies with acks all only (Kafka refuses it with acks 0 or 1)."""
    rng = random.Random(f"load/{seed}")
    args: dict[str, Any] = {}
    for key in ("producers", "consumers", "rate_per_s", "acks", "message_bytes"):
        value = getattr(profile, key)
        args[key] = rng.choice(value) if isinstance(value, list) else value
    if profile.idempotent is not None:
        idempotent = rng.choice(profile.idempotent) if isinstance(profile.idempotent, list) else profile.idempotent
        if args["acks"] in ("all", -1):
            args["idempotent"] = idempotent
    if profile.topics is not None:
        args["topics"] = list(profile.topics)
    return args


def fault_steps(faults: list[PlannedFault], duration_ms: float) -> list[dict[str, Any]]:
    """The schedule as steps: a `wait` up to each fault's start and end (whole milliseconds), the
    fault or its undoing, and a last `wait` to the end of the safety phase. A generated fault's id
    is its index in `faults`; it may wait for a protocol state (its trigger) from the action before
    it on, coming as soon as the state does (after the trigger's window) or else at its time; and
    it is armed for its outage's span: aimed at a role nobody holds yet, it strikes when somebody
    does, or not at all (workloads/fault_steps.py)."""
    timeline = []
    for i, f in enumerate(faults):
        timeline += [(f.fault.at_ms, f, True, i), (f.undo.at_ms, f, False, i)]
    timeline.sort(key=lambda e: e[0])  # stable: a fault before its undoing at the same time
    steps: list[dict[str, Any]] = []
    now = 0
    for at_ms, f, starts, index in timeline:
        at = int(round(at_ms))
        trigger = f.trigger if starts and f.generated else None
        if at > now and trigger is not None:
            steps.append({"trigger": {"state": trigger.state, **({"partition": trigger.partition} if trigger.partition else {}),
                                      "timeout_ms": at - now}})
            if int(trigger.window_ms) > 0:
                steps.append({"wait": int(trigger.window_ms)})
        elif at > now:
            steps.append({"wait": at - now})
        now = max(now, at)
        if not f.generated:
            steps.append(action_step(f.fault if starts else f.undo))
        elif f.fault.action == PAUSE_LOAD:  # an idle period of the load: it ends by itself
            if starts:
                steps.append({"pause_load": max(1, int(round(f.undo.at_ms)) - at)})
        elif starts:
            fault = generated_fault(f.fault, index)
            span = int(round(f.undo.at_ms)) - at
            if span > 0:
                fault["armed_ms"] = span
            if f.lossy_budget is not None:
                fault["lossy_budget"] = f.lossy_budget
            steps.append({"fault": fault})
        else:
            steps.append({"undo": "all" if f.undo.action == UNDO_ALL else index})
    end = int(round(duration_ms))
    if end > now:
        steps.append({"wait": end - now})
    return steps


def generated_fault(a: FaultAction, index: int) -> dict[str, Any]:
    """A generated fault as a `fault` step's arguments (docs/reference, steps)."""
    if a.action == "partition":
        return {"id": index, "kind": "partition", "groups": [list(g) for g in a.groups]}
    if a.action == "link":
        return {"id": index, "kind": "link", "node": a.nodes[0], "to": a.nodes[1], "drop": a.drop, "delay_ms": a.delay_ms}
    return {"id": index, "kind": a.action, "node": a.nodes[0]}


def action_step(a: FaultAction) -> dict[str, Any]:
    match a.action:
        case "crash_os" | "crash_process" | "crash_disk":
            return {"crash": {"node": a.nodes[0], "mode": a.action.removeprefix("crash_")}}
        case "restart":
            return {"restart": a.nodes[0]}
        case "isolate":
            return {"isolate": a.nodes[0]}
        case "partition":
            return {"partition": [list(g) for g in a.groups]}
        case "link":
            return {"link": {"from": a.nodes[0], "to": a.nodes[1], "drop": a.drop, "delay_ms": a.delay_ms}}
        case "heal":
            return {"heal": a.nodes[0] if a.nodes else "all"}
    raise ValueError(f"unknown fault action {a.action!r}")


def epilogue_steps(raw: dict[str, Any], converge_ms: int, restart: list[str], generated: bool = False) -> list[dict[str, Any]]:
    """Heal everything, then require the cluster to serve again, each condition within `converge_ms`.
    `restart`: the nodes a fixed schedule leaves down; `generated`: a generated schedule's faults
    are undone by `undo: all`, which also restarts what they crashed (their nodes are known only
    once they fire)."""
    steps: list[dict[str, Any]] = [{"undo": "all"} if generated else {"heal": "all"}] + [{"restart": node} for node in restart]
    steps.append({"wait_for": {"quorum": True, "leader": "!= null", "timeout_ms": converge_ms}})
    partitions = [(t["name"], p) for t in raw.get("topics") or [] for p in range(int(t.get("partitions", 1)))]
    for topic, p in partitions:
        steps.append({"wait_for": {"partition": f"{topic}-{p}", "leader": "!= null", "timeout_ms": converge_ms}})
    # Idempotent, as Kafka's producers are by default since 3.0: right after the heal the ISR may
    # still be below MinISR, and a record appended, refused NOT_ENOUGH_REPLICAS_AFTER_APPEND
    # (KIP-966: pending requests are negatively acknowledged) and sent again would otherwise be
    # written twice: a `duplicate` of kraftlab's own probe, not of the protocol under test.
    for topic, p in partitions:
        steps.append({"produce": {"topic": topic, "partition": p, "count": 1, "acks": "all", "idempotent": True,
                                  "expect": "acked", "timeout_ms": converge_ms}})
    return steps


def plan_run(campaign: Campaign, cell: Cell, seed: int, *, faults: list[PlannedFault] | None = None,
             load: dict[str, Any] | None = None, duration_ms: float | None = None) -> RunPlan:
    """The run of `cell` with `seed`. `faults`, `load` and `duration_ms` replace what the seed
    draws (a minimizer's smaller candidates); absent, they are drawn from the seed."""
    spec = campaign.spec
    raw = campaign.base_with(cell.overrides())
    load_step = -1
    rid = run_id(cell, seed)
    raw["name"] = f"{spec.name}-{rid}"
    raw["seed"] = seed
    steps = list(raw.get("steps") or [])
    notes = [f"campaign {spec.name}, cell {cell.index} ({cell.label()}), seed {seed}"]
    if spec.load is not None or load is not None:
        load = load if load is not None else draw_load(spec.load, seed)  # type: ignore[arg-type]
        base_loads = [i for i, s in enumerate(steps) if isinstance(s, dict) and "load" in s]
        # The drawn load takes the place of the base's first load step (its warm-up keeps its
        # load); the base's other load steps go; without one, the load starts after the base steps.
        load_step = base_loads[0] if base_loads else len(steps)
        steps = [s for i, s in enumerate(steps) if i not in base_loads[1:]]
        steps[load_step:load_step + bool(base_loads)] = [{"load": load}]
        notes.append("load: " + ", ".join(f"{k}={v}" for k, v in load.items()))
    epilogue_start, n_faults, safety_step = -1, 0, -1
    if spec.faults is not None:
        duration = duration_ms if duration_ms is not None else spec.faults.duration_ms
        drawn = draw_schedule(spec.faults, raw, seed)
        notes += drawn.notes  # the seed's mix, also above a minimizer's smaller schedule drawn from it
        if faults is None:
            faults = drawn.faults
        generated = any(f.generated for f in faults)
        crashed = _down_at_end([f for f in faults if not f.generated])
        n_faults = len(faults)
        safety_step = len(steps)
        steps += fault_steps(faults, duration)
        epilogue_start = len(steps)
        steps += epilogue_steps(raw, spec.faults.converge_ms, crashed, generated)
        notes.append(f"fault schedule for seed {seed}: {n_faults} faults in {duration:g} ms")
        notes += describe_faults(faults)
    raw["steps"] = steps
    schedule = "\n".join(notes)
    raw["description"] = (str(raw.get("description") or "").strip() + "\n\n" + schedule).strip()
    return RunPlan(rid, cell.index, seed, raw, epilogue_start, n_faults, load_step=load_step, safety_step=safety_step,
                   schedule=schedule, columns=cell.columns(), allow=tuple(ALLOWANCES[a] for a in spec.allow))


def check_every_cell(campaign: Campaign) -> None:
    """Each cell's first run, planned and validated as it will run: matrix values valid one at a
    time may clash together (`protocol.elr: false` with `eligible.leader.replicas.enable: true`),
    and the drawn load may name a topic the base lacks. Raises CampaignError naming the cell, so
    that an invalid campaign stops before any run (exit code 2)."""
    first_seed = campaign.spec.seed_list()[0]
    cells = campaign.spec.cells()
    failing: dict[tuple[str, str], list[str]] = {}  # (campaign key, what is wrong) -> the cells
    for cell in cells:
        try:
            plan_run(campaign, cell, first_seed).scenario()
        except ScenarioError as exc:
            detail = "; ".join(f"{p.path or '(file)'}: {p.message}" for p in exc.problems)
            where = "load" if any(".load." in p.path for p in exc.problems) else "matrix"
            failing.setdefault((where, detail), []).append(cell.label())
    if failing:
        raise CampaignError(str(campaign.path), [
            Problem(where, f"{_which_cells(labels, len(cells))} an invalid scenario: {detail}")
            for (where, detail), labels in failing.items()])


def _which_cells(labels: list[str], cells: int) -> str:
    if len(labels) == cells:
        return "every cell gives"
    return f"the cell {labels[0]} gives" if len(labels) == 1 else f"the cells {' | '.join(labels)} give"


@dataclass(frozen=True)
class DrawnSchedule:
    """The faults a seed draws, and what to tell people of the draw (a swarm's mix)."""

    faults: list[PlannedFault]
    notes: list[str]


def draw_schedule(faults: FaultsSpec, raw: dict[str, Any], seed: int) -> DrawnSchedule:
    """The fault schedule `seed` draws for a run of the scenario `raw` (its nodes, after the cell's
    overrides): from the fixed mix, or from the seed's own swarm mix."""
    if faults.swarm is not None:
        mix, planned = draw_swarm(faults.swarm, seed, faults.duration_ms, fault_targets(raw, "brokers"),
                                  fault_targets(raw, "controllers"), topic_partitions(raw), min_insync_replicas(raw),
                                  broker_session_timeout_ms(raw))
        return DrawnSchedule(planned, mix.describe())
    return DrawnSchedule(FaultSchedule.draw(seed, fault_targets(raw, faults.targets), fault_profile(faults)).faults, [])


def min_insync_replicas(raw: dict[str, Any]) -> int:
    """The scenario's min.insync.replicas at its strictest: the cluster's, or a topic's lower one
    (the tolerance of lossy crashes is the partition's with the fewest)."""
    cluster = int(((raw.get("cluster") or {}).get("config") or {}).get("min.insync.replicas", 1))
    topics = [int((t.get("config") or {}).get("min.insync.replicas", cluster)) for t in raw.get("topics") or []]
    return min([cluster, *topics])


def broker_session_timeout_ms(raw: dict[str, Any]) -> float:
    """The scenario's broker.session.timeout.ms (the cluster config's default when it sets none)."""
    default = KafkaConfig.model_fields["broker_session_timeout_ms"].default
    return float(((raw.get("cluster") or {}).get("config") or {}).get("broker.session.timeout.ms", default))


def describe_faults(faults: list[PlannedFault]) -> list[str]:
    """One line per action, in time order (a fault's trigger on its line)."""
    lines = [(a.at_ms, line) for f in faults for a, line in zip((f.fault, f.undo), f.describe(), strict=True)]
    return [line for _, line in sorted(lines, key=lambda e: e[0])]


def _down_at_end(faults: list[PlannedFault]) -> list[str]:
    """Nodes a (cut) fixed schedule leaves crashed: the epilogue restarts them."""
    down: dict[str, bool] = {}
    for a in sorted((a for f in faults for a in (f.fault, f.undo)), key=lambda a: a.at_ms):
        if a.action.startswith("crash_"):
            down[a.nodes[0]] = True
        elif a.action == "restart":
            down[a.nodes[0]] = False
    return sorted(n for n, d in down.items() if d)


def plan_campaign(campaign: Campaign):
    """Every run, cell by cell and seed by seed, lazily (a campaign of 100,000 runs is never a list)."""
    seeds = campaign.spec.seed_list()
    for cell in campaign.spec.cells():
        for seed in seeds:
            yield cell, seed


def count_runs(campaign: Campaign) -> int:
    return len(campaign.spec.cells()) * len(campaign.spec.seed_list())
