"""The swarm generator (workloads/campaign/swarm.py): each seed its own mix, drawn from its own
stream; faults aimed at roles as the steps' selectors; triggers and outages within their ranges;
and the schedule as the steps `kraftlab run` replays."""

from __future__ import annotations

from dataclasses import replace

import re

from workloads.campaign.generate import fault_steps
from workloads.campaign.spec import ROLES, SwarmSpec
from workloads.campaign.swarm import BROKER_ROLES, SOLE_HOLDER, draw_mix, draw_swarm
from workloads.faults import UNDO_ALL
from workloads.scenario.names import NODE_REF_PATTERN
from workloads.scenario.step_spec import PARTITION_TRIGGERS

BROKERS, CONTROLLERS = ["b1", "b2", "b3"], ["c1", "c2", "c3"]
PARTITIONS = ["t-0", "t-1", "t-2"]
SPEC = SwarmSpec()
SEEDS = range(200)


def schedule(seed: int, spec: SwarmSpec = SPEC):
    return draw_swarm(spec, seed, 30_000, BROKERS, CONTROLLERS, PARTITIONS)


def opening_end(phase, faults) -> float:
    """Where a phase's own faults begin: after a calm opening (its slow link healed), else its start."""
    if not phase.calm:
        return phase.start_ms
    [clog] = [f for f in faults if phase.start_ms <= f.fault.at_ms <= phase.start_ms + 500 and f.fault.action == "link"]
    return min(phase.end_ms, clog.undo.at_ms)


def test_a_seed_draws_the_same_mix_and_schedule_every_time_and_seeds_differ():
    assert schedule(7) == schedule(7)
    assert len({repr(schedule(seed)[1]) for seed in range(20)}) == 20


def test_each_phase_turns_each_kind_role_and_trigger_on_or_off_never_every_kind_off():
    phases = [phase for seed in SEEDS for phase in draw_mix(SPEC, seed, 30_000)[0].phases]
    assert all(phase.kinds for phase in phases)
    for pool, name in ((SPEC.kinds, "kinds"), (ROLES, "roles"), (SPEC.triggers, "triggers")):
        for item in pool:
            on = sum(item in getattr(phase, name) for phase in phases)
            assert 0.3 * len(phases) < on < 0.7 * len(phases), (name, item, on)
    assert {len(draw_mix(SPEC, seed, 30_000)[0].phases) for seed in SEEDS} == set(range(SPEC.phases[0], SPEC.phases[1] + 1))


def test_phases_cover_the_safety_phase_and_draw_within_the_ranges():
    for seed in SEEDS:
        mix, faults = schedule(seed)
        assert mix.phases[0].start_ms == 0 and mix.phases[-1].end_ms == 30_000
        assert all(a.end_ms == b.start_ms for a, b in zip(mix.phases, mix.phases[1:], strict=False))
        for phase in mix.phases:
            assert SPEC.interval_ms[0] <= phase.mean_interval_ms <= SPEC.interval_ms[1]
            assert SPEC.outage_ms[0] <= phase.outage_ms[0] <= phase.outage_ms[1] <= SPEC.outage_ms[1]
        for f in faults:
            assert 0 <= f.fault.at_ms < 30_000 and f.fault.at_ms <= f.undo.at_ms <= 30_000
            assert f.fault.action.removeprefix("crash_") in ("os", "process", "isolate", "partition", "link", "pause_load")


def test_faults_aim_at_roles_as_selectors_and_follow_their_trigger_s_partition():
    """Single faults (no compound ones, no holds, no calm phases: below) aim at the phase's roles."""
    roles, triggered = set(), 0
    spec = SwarmSpec(patterns=[], hold=0, calm=0)
    for seed in SEEDS:
        mix, faults = schedule(seed, spec)
        for f in faults:
            [phase] = [p for p in mix.phases if p.start_ms <= f.fault.at_ms < p.end_ms]
            for node in f.fault.nodes:
                assert re.match(NODE_REF_PATTERN, node), node
                role = node.split(":")[0]
                if role in ROLES:
                    roles.add(role)
                    # The phase's watches aim at each partition's sole holder, whatever roles are on;
                    # so does a lossy crash of a broker within tolerance.
                    watch = f.fault.at_ms == phase.start_ms and f.undo.at_ms == phase.end_ms
                    assert role in phase.roles or (role == SOLE_HOLDER and (watch or f.lossy_budget is not None))
                    if ":" in node and f.trigger is not None and f.trigger.partition is not None:
                        assert node.endswith(":" + f.trigger.partition)  # the fault follows what happened there
            if f.trigger is not None:
                triggered += 1
                assert f.trigger.state in phase.triggers
                assert (f.trigger.partition is not None) == (f.trigger.state in PARTITION_TRIGGERS)
                assert SPEC.trigger_window_ms[0] <= f.trigger.window_ms <= SPEC.trigger_window_ms[1]
    assert roles == set(ROLES) and triggered > 100


def test_a_disk_loss_hits_brokers_only():
    spec = SwarmSpec(kinds=["crash_disk"])
    disks = [f.fault.nodes[0] for seed in SEEDS for f in schedule(seed, spec)[1] if f.fault.action == "crash_disk"]
    assert disks and all(n in BROKERS or n.split(":")[0] in BROKER_ROLES for n in disks)


def test_the_schedule_becomes_fault_undo_and_trigger_steps():
    _, faults = next(schedule(seed) for seed in SEEDS if any(f.trigger for f in schedule(seed)[1]))
    steps = fault_steps(faults, 30_000)
    kinds = [next(iter(s)) for s in steps]
    assert kinds.count("fault") == len(faults)
    assert kinds.count("undo") == len(faults)
    assert 0 < kinds.count("trigger") <= sum(f.trigger is not None for f in faults)  # none when the fault is due at once
    ids = [s["fault"]["id"] for s in steps if "fault" in s]
    assert sorted(ids) == list(range(len(faults)))
    undone = [s["undo"] for s in steps if "undo" in s]
    assert all(u == "all" or u in ids for u in undone)
    assert undone.count("all") == sum(f.undo.action == UNDO_ALL for f in faults)
    # The waits, and the triggers' waits in their place, reach the phase's end (the windows come on top).
    waited = sum(s.get("wait", 0) for s in steps) + sum(s["trigger"]["timeout_ms"] for s in steps if "trigger" in s)
    windows = sum(int(f.trigger.window_ms) for f in faults if f.trigger is not None)
    assert 30_000 <= waited <= 30_000 + windows
    # Each fault is armed for its outage's span at most.
    spans = {i: int(round(f.undo.at_ms)) - int(round(f.fault.at_ms)) for i, f in enumerate(faults)}
    assert all(s["fault"].get("armed_ms", 0) == spans[s["fault"]["id"]] for s in steps if "fault" in s)


def test_most_seeds_keep_their_lossy_broker_crashes_within_the_protocol_s_tolerance():
    """MinISR 2: within tolerance, each OS crash of a broker carries the budget of one (spent when
    a crash strikes, given back when its broker is back in the ISR: workloads/fault_steps.py) and
    is aimed at a sole in-sync holder or is a clog_then_kill's (a calm opening's included); the
    seeds drawn past it (a quarter, by default) carry none."""
    spec = SwarmSpec(kinds=["crash_os", "crash_process"])
    within = past = 0
    for seed in SEEDS:
        mix, faults = draw_swarm(spec, seed, 30_000, BROKERS, CONTROLLERS, PARTITIONS, min_isr=2)
        for f in faults:
            on_a_broker = bool(f.fault.nodes) and (f.fault.nodes[0] in BROKERS or f.fault.nodes[0].split(":")[0] in BROKER_ROLES)
            expected = mix.lossy_budget if f.fault.action == "crash_os" and on_a_broker else None
            assert f.lossy_budget == expected, (seed, f)
            if expected is not None:  # aimed at the sole in-sync holder, or a clog_then_kill's follower
                assert f.fault.nodes[0].startswith((SOLE_HOLDER + ":", "partition-follower:")), f
        # Each phase but a hold watches every partition's sole holder for the whole phase (a calm one
        # from the end of its opening), with its lossy kind (here crash_os) or, when it has none on,
        # an OS crash; within tolerance or not.
        spans = [(opening_end(p, faults), p.end_ms) for p in mix.phases if not p.hold]
        watches = [f for f in faults if f.fault.nodes and f.fault.nodes[0].startswith(SOLE_HOLDER + ":")
                   and (f.fault.at_ms, f.undo.at_ms) in spans]
        assert len(watches) == sum(a < b for a, b in spans) * len(PARTITIONS), (seed, watches)
        assert all(w.fault.action == "crash_os" and w.lossy_budget == mix.lossy_budget for w in watches)
        within += mix.lossy_budget == 1
        past += mix.lossy_budget is None
    assert within > 2 * past > 0 and within + past == len(SEEDS)


def test_a_hold_phase_cuts_a_leader_off_for_its_whole_span_and_makes_no_other_fault():
    held = 0
    for seed in SEEDS:
        mix, faults = schedule(seed)
        for phase in (p for p in mix.phases if p.hold):
            held += 1
            # One fault starts in the phase (a crash of the phase before's clog_then_kill may spill
            # into its first second), from shortly after its start to its end.
            [cut] = [f for f in faults if phase.start_ms <= f.fault.at_ms < phase.end_ms and f.fault.action in ("isolate", "partition")]
            assert not [f for f in faults if phase.start_ms + 1_000 < f.fault.at_ms < phase.end_ms]
            assert cut.fault.at_ms <= phase.start_ms + 500 and cut.undo.at_ms == max(cut.fault.at_ms, phase.end_ms)
            if cut.fault.action == "isolate":
                leader = cut.fault.nodes[0]
            else:
                assert cut.fault.action == "partition" and len(cut.fault.groups[0]) == 1
                leader = cut.fault.groups[0][0]
            assert leader == "controller-leader" or leader.startswith("partition-leader:")
    assert 0.2 * sum(len(draw_mix(SPEC, seed, 30_000)[0].phases) for seed in SEEDS) < held


def test_a_calm_phase_opens_with_one_clog_then_kill_of_a_partition_follower_alone_with_the_load_idle():
    calm = 0
    for seed in SEEDS:
        mix, faults = schedule(seed)
        for phase in (p for p in mix.phases if p.calm):
            calm += 1
            assert not phase.hold
            # The clog within the phase's first half-second, the crash within a second of it.
            [clog] = [f for f in faults if phase.start_ms <= f.fault.at_ms <= phase.start_ms + 500 and f.fault.action == "link"]
            kill = next(f for f in faults if f.fault.at_ms >= clog.fault.at_ms and f.fault.nodes == clog.fault.nodes[:1])
            partition = kill.fault.nodes[0].removeprefix("partition-follower:")
            assert clog.fault.action == "link" and clog.fault.nodes == (f"partition-follower:{partition}", f"partition-leader:{partition}")
            # The slow link outlasts the broker session (9 s by default): the new incarnation
            # registers while the dead one's messages are still on their way.
            assert clog.fault.drop == 0 and 9_000 <= clog.fault.delay_ms <= 30_000
            assert kill.fault.action == "crash_os" and kill.fault.at_ms - clog.fault.at_ms <= 1_000
            assert kill.lossy_budget == mix.lossy_budget  # it spends the seed's budget as any lossy crash of a broker
            # Nothing else starts in the phase until the slow link heals, and the load idles until then.
            healed = opening_end(phase, faults)
            assert not [f for f in faults if phase.start_ms + 1_500 < f.fault.at_ms < healed]
            assert phase.idle or any(f.fault.action == "pause_load" and f.fault.at_ms == phase.start_ms and f.undo.at_ms == healed
                                     for f in faults)
    assert 0.05 * sum(len(draw_mix(SPEC, seed, 30_000)[0].phases) for seed in SEEDS) < calm
    # Turned off, every seed draws what it drew before, calm phases made as the others are; on,
    # the opening is carved out of its phase: every other fault is the one drawn without it.
    for seed in SEEDS[:50]:
        (on, with_calm), (off, without) = schedule(seed), schedule(seed, SwarmSpec(calm=0))
        assert tuple(replace(p, calm=False) for p in on.phases) == off.phases
        openings = [(p.start_ms, opening_end(p, with_calm)) for p in on.phases if p.calm]
        # (A compound fault begun in the opening is left out whole: its crash may come a second later.)
        kept = [f for f in without if not any(a <= f.fault.at_ms < b + 1_000 for a, b in openings)]
        assert all(f in with_calm for f in kept if not f.fault.nodes or not f.fault.nodes[0].startswith(SOLE_HOLDER))


def test_a_majority_fault_strikes_most_of_the_controllers_or_of_the_brokers_at_once():
    spec = SwarmSpec(kinds=["crash_os", "isolate"], patterns=["majority"], hold=0)
    groups = 0
    for seed in SEEDS:
        _, faults = schedule(seed, spec)
        by_time: dict[float, list[str]] = {}
        for f in faults:
            if f.fault.nodes and f.fault.nodes[0] in BROKERS + CONTROLLERS:
                by_time.setdefault(f.fault.at_ms, []).append(f.fault.nodes[0])
        for nodes in by_time.values():
            if len(nodes) == 2:
                groups += 1
                assert set(nodes) <= set(BROKERS) or set(nodes) <= set(CONTROLLERS), nodes
    assert groups > 100


def test_clog_then_kill_slows_a_follower_s_link_then_crashes_it_while_the_link_is_slow():
    spec = SwarmSpec(kinds=["crash_process"], patterns=["clog_then_kill"], hold=0)
    pairs = 0
    for seed in SEEDS:
        _, faults = schedule(seed, spec)
        clogs = [f for f in faults if f.fault.action == "link"]
        for clog in clogs:
            follower, leader = clog.fault.nodes
            assert follower.split(":")[0] in ("partition-follower", "controller-follower")
            assert leader == follower.replace("follower", "leader") and clog.fault.drop == 0
            # Its crash, within a second: it ends, and what the follower sent before it arrives,
            # before the link heals (or at the safety phase's end).
            assert any(f.fault.action == "crash_process" and f.fault.nodes == (follower,)
                       and clog.fault.at_ms <= f.fault.at_ms <= clog.fault.at_ms + 1_000
                       and f.undo.at_ms <= clog.undo.at_ms and f.undo.at_ms - f.fault.at_ms <= 2_000 for f in faults)
            pairs += 1
    assert pairs > 100


def test_an_idle_phase_pauses_the_load_for_its_whole_span():
    idle = 0
    for seed in SEEDS:
        mix, faults = schedule(seed)
        pauses = [(f.fault.at_ms, f.undo.at_ms) for f in faults if f.fault.action == "pause_load"]
        # A calm phase's opening idles too (calm_phase test below).
        assert pauses == [(p.start_ms, p.end_ms) if p.idle else (p.start_ms, opening_end(p, faults))
                          for p in mix.phases if (p.idle or p.calm) and p.end_ms > p.start_ms]
        idle += len(pauses)
        steps = fault_steps(faults, 30_000)
        assert [s["pause_load"] for s in steps if "pause_load" in s] == [max(1, round(b) - round(a)) for a, b in pauses]
    assert idle > 0.2 * sum(len(draw_mix(SPEC, seed, 30_000)[0].phases) for seed in SEEDS)


def test_a_calm_opening_s_slow_link_outlasts_the_scenario_s_broker_session():
    """With broker.session.timeout.ms at 20 s, the opening's clog lasts 20 to 40 s: the dead
    incarnation's messages still meet the new one, which registers once the old session expires."""
    delays = []
    for seed in SEEDS[:100]:
        mix, faults = draw_swarm(SPEC, seed, 120_000, BROKERS, CONTROLLERS, PARTITIONS, session_timeout_ms=20_000)
        for phase in (p for p in mix.phases if p.calm):
            [clog] = [f for f in faults if phase.start_ms <= f.fault.at_ms <= phase.start_ms + 500 and f.fault.action == "link"]
            delays.append(clog.fault.delay_ms)
    assert delays and all(20_000 <= d <= 40_000 for d in delays)
    assert max(delays) > 30_000  # the range follows the session, not the pattern's fixed one
