"""The campaign file (docs/reference/campaign-format.md) as pydantic models, and its validation.

A campaign is a base scenario, a matrix of overrides (every combination is a cell), seeds (each
cell runs once per seed), a random fault profile and a load profile drawn from each seed, and an
optional `expect` block. Validation happens before any run starts and names the file and the key:
a matrix value is checked by applying it to the base scenario and validating the result with the
scenario schema, so a campaign accepts exactly the overrides `kraftlab run --set` accepts.

Additions beyond docs/reference (documented in docs/reference/campaign-format.md): `set` (overrides for every run), `variants` (named sets of overrides, one
cell each, crossed with the matrix: "each switch off, one at a time" is not a product), `load`,
`faults.mean_outage_ms`, `faults.converge_ms`, `faults.targets`, `faults.link_drop`,
`faults.link_delay_ms`, `faults.slow_delay_ms`, and `expect[].catch` accepting `liveness`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from observability.anomaly_names import ANOMALY_NAMES
from observability.checks.invariants import DISRUPTION_NAMES, INVARIANT_NAMES
from workloads.faults import FAULT_KINDS, FaultKind
from workloads.scenario.names import NODE_SELECTORS, PARTITION_SELECTORS
from workloads.scenario.loading import (
    Problem,
    ScenarioError,
    _format_loc,
    _line_of,
    _message,
    _set_path,
    merge_alternatives,
    read_yaml_file,
    resolve_in_library,
    resolve_source,
    validate,
)
from workloads.scenario.names import NAME_PATTERN
from workloads.scenario.step_spec import TRIGGER_STATES, Acks, TriggerState

CAMPAIGN_LIBRARY_DIR = Path(__file__).resolve().parents[1] / "campaigns"  # workloads/campaigns
# A run that did not converge after the faults healed (kraftlab/campaign/outcome.py).
LIVENESS = "liveness"
# A step of the base scenario itself failed (an `expect` or a `wait_for` of its own): a finding
# and a signature name like the others, so `catch` and `absent` may name it too.
EXPECT = "expect"
FINDING_NAMES = frozenset(INVARIANT_NAMES) | DISRUPTION_NAMES | frozenset(ANOMALY_NAMES) | {LIVENESS, EXPECT}
VARIANT_KEY = "variant"  # the results column naming a run's variant
# What a campaign may allow (`allow`): the anomaly each excuses when the history shows only such.
ALLOWANCES = {"acks-1-loss": "lost-write", "retry-duplicate": "duplicate"}
Allowance = Literal[tuple(ALLOWANCES)]  # type: ignore[valid-type]
# The roles a swarm's faults may aim at: the steps' selectors, a partition's taking the partition
# the fault picks (workloads/scenario/names.py).
ROLES: tuple[str, ...] = NODE_SELECTORS + PARTITION_SELECTORS


class CampaignError(ScenarioError):
    """An invalid campaign file: exit code 2, nothing runs."""

    def __str__(self) -> str:
        lines = [f"{self.file}: invalid campaign ({len(self.problems)} problem{'s' if len(self.problems) != 1 else ''})"]
        lines += [f"  {self.file}: {p}" for p in self.problems]
        return "\n".join(lines)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Range = Annotated[list[Annotated[float, Field(ge=0)]], Field(min_length=2, max_length=2)]


def _ordered(value: list[float]) -> list[float]:
    low, high = value
    if high < low:
        raise ValueError(f"expected [low, high] with low <= high (got {[low, high]})")
    return value


def _shares_within_one(value: list[float]) -> list[float]:
    if value[1] > 1:
        raise ValueError(f"expected shares between 0 and 1 (got {value})")
    return value


LogRange = Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=2, max_length=2)]
IntRange = Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=2, max_length=2)]
RoleName = Literal[ROLES]  # type: ignore[valid-type]
SwarmTargets = Literal["all", "brokers", "controllers"]
# Compound faults (workloads/campaign/swarm.py): Jepsen's `:majority` target, FoundationDB's
# Rollback workload (clog a process, then kill it).
PATTERNS = ("majority", "clog_then_kill")
PatternName = Literal[PATTERNS]  # type: ignore[valid-type]


class SwarmSpec(Strict):
    """A fault mix drawn anew for each seed (swarm testing: Groce et al., ISSTA 2012): some fault
    kinds on and others off, nodes or roles aimed at, heavy-tailed intervals and outages, protocol
    states that the next fault follows, one to a few phases each with a fresh draw
    (workloads/campaign/swarm.py). Every range is [low, high]; the log ranges are drawn
    log-uniformly, so that sub-second blips and outages longer than every timeout both come up."""

    kinds: Annotated[list[FaultKind], Field(min_length=1)] = Field(
        ["crash_os", "crash_process", "isolate", "partition", "link", "slow"],
        description="the fault kinds each phase draws its own from: each on or off (at least one on)",
    )
    targets: Annotated[list[SwarmTargets], Field(min_length=1)] = Field(
        ["all", "brokers", "controllers"], description="the node sets a phase aims at, one drawn per phase: all, brokers, controllers"
    )
    roles: list[RoleName] = Field(  # type: ignore[valid-type]
        list(ROLES), description="the roles a fault may aim at, resolved when it fires (each on or off per phase; [] "
        "aims at nodes only): " + ", ".join(ROLES)
    )
    phases: IntRange = Field([2, 5], description="[low, high]: how many phases, each with a mix of its own")
    interval_ms: LogRange = Field([200.0, 20_000.0], description="[low, high]: a phase's mean time from one fault to the next")
    outage_ms: LogRange = Field(
        [100.0, 60_000.0], description="[low, high]: how long a fault lasts (each phase draws a range of its own within it)"
    )
    triggers: list[TriggerState] = Field(  # type: ignore[valid-type]
        list(TRIGGER_STATES), description="the protocol states a fault may wait for (each on or off per phase; [] none): "
        + ", ".join(TRIGGER_STATES)
    )
    trigger_window_ms: Range = Field([0.0, 1_000.0], description="[low, high]: how soon after its state the fault follows")
    within_tolerance: Annotated[float, Field(ge=0, le=1)] = Field(
        0.75, description="the share of seeds whose lossy crashes of brokers (an OS crash, losing the page cache; a disk "
        "loss) outstanding at once stay fewer than min.insync.replicas, within the protocol's tolerance, where every lost "
        "record is a finding (a crash is outstanding until its broker is back in the ISR of every partition it held); past "
        "the budget such a seed's broker crashes are process crashes"
    )
    patterns: list[PatternName] = Field(  # type: ignore[valid-type]
        list(PATTERNS), description="compound faults a phase may make (each on or off per phase; [] none): majority (a crash "
        "or isolation of a majority of the controllers, or of the brokers, at once: Jepsen's majority target), "
        "clog_then_kill (a slow link from a node to a leader, then a crash of that node and its quick return while the "
        "link stays slow: FoundationDB's Rollback workload)"
    )
    hold: Annotated[float, Field(ge=0, le=1)] = Field(
        0.3, description="the share of phases that hold one fault for their whole span, and make no other: a leader (the "
        "controllers' or a partition's) cut off from the rest, as Jepsen's partitions of the primaries"
    )
    calm: Annotated[float, Field(ge=0, le=1)] = Field(
        0.4, description="the share of phases (of those that do not hold) that open calm: one compound fault and nothing "
        "else, the load idle, until its slow link heals (a slow link from a partition's follower to its leader, then a crash "
        "of that follower and its quick return: clog_then_kill, whether or not the phase's patterns have it on), so that "
        "the dead incarnation's messages meet the new one with no other fault or new record in between; the phase then "
        "goes on as drawn"
    )
    idle: Annotated[float, Field(ge=0, le=1)] = Field(
        0.3, description="the share of phases in which the load idles (its producers offer nothing, `pause_load`) from the "
        "phase's start to its end: the idle periods of TigerBeetle's VOPR, when nothing new is committed and old messages "
        "find the state they were sent in"
    )
    heal_all: Annotated[float, Field(ge=0, le=1)] = Field(
        0.33, description="the share of phases where the end of any fault's outage undoes every fault (heal all); in the "
        "others it undoes that fault alone"
    )
    link_drop: Range = Field([0.0, 1.0], description="[low, high]: the share of messages a link fault drops")
    link_delay_ms: Range = Field([0.0, 2_000.0], description="[low, high]: the delay a link fault adds")
    slow_delay_ms: Range = Field([50.0, 5_000.0], description="[low, high]: the delay a slow fault adds, dropping none")

    @field_validator("phases", "interval_ms", "outage_ms", "trigger_window_ms", "link_drop", "link_delay_ms", "slow_delay_ms")
    @classmethod
    def _range_ordered(cls, value: list[float]) -> list[float]:
        return _ordered(value)

    @field_validator("link_drop")
    @classmethod
    def _shares(cls, value: list[float]) -> list[float]:
        return _shares_within_one(value)


class FaultsSpec(Strict):
    """The random fault profile: a fixed mix (`kinds`, workloads/faults.py draws a schedule from it
    and each seed) or a mix per seed (`swarm`, workloads/campaign/swarm.py)."""

    kinds: Annotated[list[FaultKind], Field(min_length=1)] | None = Field(
        None,
        description="a fixed mix: the kinds each fault is drawn from at random: crash_os, crash_process, crash_disk "
        "(brokers only), isolate, partition (two groups), link (drops and delays), slow (delays only); give this or swarm",
    )
    swarm: SwarmSpec | None = Field(
        None, description="a mix per seed: its kinds, targets, roles, phases, ranges and triggers; give this or kinds"
    )
    mean_interval_ms: PositiveFloat = Field(
        5_000.0, description="the mean time from one fault's start to the next's (exponentially distributed)"
    )
    duration_ms: PositiveFloat = Field(  # the safety phase: faults start only within it
        60_000.0, description="the safety phase's length: faults start within it and end by its end"
    )
    mean_outage_ms: PositiveFloat = Field(
        4_000.0, description="how long a fault lasts on average (exponentially distributed) before its node restarts or its link heals"
    )
    # After the safety phase everything heals; within this bound the quorum must be led and every
    # partition led and acknowledging acks=all writes again, or the run is a liveness failure.
    converge_ms: PositiveInt = Field(
        60_000, description="after the safety phase heals everything, the bound for each of: the quorum led, every partition "
        "led, one acks=all record acknowledged by each partition; a miss is a liveness failure"
    )
    targets: Literal["all", "brokers", "controllers"] = Field(
        "all", description="the nodes the faults pick among: every broker and controller, the brokers or the controllers"
    )
    link_drop: Range = Field(
        [0.1, 1.0], description="[low, high]: the share of messages a link fault drops, drawn from this range"
    )
    link_delay_ms: Range = Field([0.0, 50.0], description="[low, high]: the delay a link fault adds, drawn from this range")
    slow_delay_ms: Range = Field(
        [50.0, 2_000.0],
        description="[low, high]: the delay a slow fault adds to every message of one link, drawn from this range",
    )

    # Field validators, not a model one: the error then names the key (`faults.link_drop`).
    @field_validator("link_drop", "link_delay_ms", "slow_delay_ms")
    @classmethod
    def _range_ordered(cls, value: list[float]) -> list[float]:
        return _ordered(value)

    @model_validator(mode="after")
    def _kinds_or_swarm(self) -> FaultsSpec:
        if (self.kinds is None) == (self.swarm is None):
            raise ValueError("give exactly one of `kinds` (a fixed mix for every seed) or `swarm` (a mix drawn per seed)")
        return self

    @field_validator("link_drop")
    @classmethod
    def _shares(cls, value: list[float]) -> list[float]:
        return _shares_within_one(value)


def _one_or_choices(kind: Any) -> Any:
    """A load key: one value, or a list of values one of which each seed draws."""
    return kind | Annotated[list[kind], Field(min_length=1)]


class LoadProfile(Strict):
    """The load of each run, drawn from its seed: a list is a choice among its values. The drawn
    values become one `load` step (docs/reference) in place of the base scenario's first `load`
    step, or after the base steps when it has none, so that it runs through the safety phase."""

    producers: _one_or_choices(PositiveInt) = Field(  # type: ignore[valid-type]
        1, description="how many load producers; a list: one of its values drawn per seed"
    )
    consumers: _one_or_choices(NonNegativeInt) = Field(  # type: ignore[valid-type]
        1, description="how many load consumers, each following every partition of the load; a list: one of its values drawn per seed"
    )
    rate_per_s: _one_or_choices(PositiveFloat) = Field(  # type: ignore[valid-type]
        100.0, description="records per second offered, all producers together; a list: one of its values drawn per seed"
    )
    acks: _one_or_choices(Acks) = Field(  # type: ignore[valid-type]
        "all", description="the load producers' acks: all (the same as -1), 1 or 0"
    )
    message_bytes: _one_or_choices(PositiveInt) = Field(  # type: ignore[valid-type]
        100, description="each record's value size, in bytes; a list: one of its values drawn per seed"
    )
    idempotent: _one_or_choices(bool) | None = Field(  # type: ignore[valid-type]
        None, description="the load producers' enable.idempotence when their acks is all (acks 0 and 1 are never "
        "idempotent); a list: one of its values drawn per seed; absent: Kafka's default (on with acks all)"
    )
    topics: list[str] | None = Field(
        None, description="the topics whose partitions the load writes and reads (one list, not drawn); absent: every "
        "topic of the base scenario's `topics`"
    )


class ExpectRule(Strict):
    """One `expect` entry: in every cell matching `when`, `catch` names must each show up in at
    least one seed; or (`clean: true`) no seed may show any finding; or (`absent`, kraftlab's) no
    seed may show one of these names (for profiles whose runs may go beyond the protocol's
    tolerance, where other findings are the protocol's limits, not the switch's doing)."""

    when: dict[str, Any] = Field(
        {}, description="matrix key (or `variant`) -> value: the cells the rule applies to; empty: every cell"
    )
    catch: Annotated[list[str], Field(min_length=1)] | None = Field(
        None, description="finding names each found in at least one seed of every matching cell"
    )
    clean: bool | None = Field(None, description="true: no run of a matching cell shows a finding or raises")
    absent: Annotated[list[str], Field(min_length=1)] | None = Field(
        None, description="finding names no seed of a matching cell may show"
    )

    @model_validator(mode="after")
    def _catch_or_clean(self) -> ExpectRule:
        if sum(x is not None for x in (self.catch, self.clean, self.absent)) != 1:
            raise ValueError("give exactly one of `catch` (a list of names), `clean: true` or `absent` (a list of names)")
        if self.clean is False:
            raise ValueError("`clean` can only be true (a cell that must show nothing)")
        for name in (self.catch or []) + (self.absent or []):
            if name not in FINDING_NAMES:
                raise ValueError(
                    f"unknown name {name!r} (an anomaly: {', '.join(ANOMALY_NAMES)}; `{LIVENESS}`; `{EXPECT}`; or an "
                    f"invariant of docs/explanation/protocol-facts.md: {', '.join(sorted(INVARIANT_NAMES))}; or, with the base "
                    f"scenario's disruption_checks, {', '.join(sorted(DISRUPTION_NAMES))})"
                )
        return self


class CampaignSpec(Strict):
    name: Annotated[str, Field(
        pattern=NAME_PATTERN, max_length=200,
        description="the campaign's name: its default output folder and the start of its runs' scenario names",
    )]
    description: str = Field("", description="free text: what the campaign checks")
    scenario: str = Field(description="the base scenario: a path (relative to the campaign file first) or a library name")
    seeds: PositiveInt | Annotated[list[NonNegativeInt], Field(min_length=2, max_length=2)] = Field(
        1, description="the seeds each cell runs with: N for seeds 0..N-1, or [first, last], both included"
    )
    # kraftlab's: overrides for every run (dotted paths, as `--set`), before the cell's own.
    set: dict[str, Any] = Field(
        {}, description="overrides for every run (dotted paths, as `--set`), before the cell's own"
    )
    matrix: dict[str, Annotated[list[Any], Field(min_length=1)]] = Field(
        {}, description="dotted path (as `--set`) -> the values it takes; every combination is a cell"
    )
    variants: dict[Annotated[str, Field(pattern=NAME_PATTERN)], dict[str, Any]] | None = Field(
        None, description="named sets of overrides, one cell each, crossed with the matrix"
    )
    faults: FaultsSpec | None = Field(
        None, description="the random fault profile, a schedule drawn from each seed; absent: no faults"
    )
    load: LoadProfile | None = Field(
        None,
        description="the load drawn from each seed, in place of the base's first `load` step; absent: the base's own load",
    )
    expect: list[ExpectRule] = Field(
        [], description="rules on the cells' findings; one that does not hold makes the exit code 1"
    )
    # kraftlab's: what Kafka's clients are promised may happen, excused rather than found. By
    # default a campaign judges every anomaly as docs/reference defines it (a lost acks=1 record
    # is a lost-write); a campaign whose load draws weaker producers says which it allows.
    allow: list[Allowance] = Field(  # type: ignore[valid-type]
        [], description="what Kafka allows its clients, excused in every run: acks-1-loss (a lost-write of a record "
        "acknowledged with acks 1 or 0 that no consumer read: the leader alone had it) and retry-duplicate (a "
        "duplicate of a record of a load producer without idempotence: a retried batch)"
    )

    @field_validator("seeds")
    @classmethod
    def _seed_range(cls, value: int | list[int]) -> int | list[int]:
        if isinstance(value, list) and value[1] < value[0]:
            raise ValueError(f"expected [first, last] with first <= last (got {value})")
        return value

    @field_validator("variants")
    @classmethod
    def _some_variants(cls, value: dict | None) -> dict | None:
        if value is not None and not value:
            raise ValueError("give at least one variant, or leave the key out")
        return value

    def seed_list(self) -> list[int]:
        """`seeds: N` is seeds 0..N-1; `[first, last]` both ends included."""
        if isinstance(self.seeds, int):
            return list(range(self.seeds))
        return list(range(self.seeds[0], self.seeds[1] + 1))

    def cells(self) -> list[Cell]:
        """Every cell: each variant (if any) crossed with every combination of the matrix, in file order."""
        variants: list[tuple[str | None, dict[str, Any]]] = list((self.variants or {None: {}}).items())  # type: ignore[dict-item]
        keys = list(self.matrix)
        out = []
        for variant, overrides in variants:
            for values in itertools.product(*(self.matrix[k] for k in keys)):
                out.append(Cell(len(out), variant, dict(zip(keys, values, strict=True)), dict(overrides)))
        return out


def same_value(a: Any, b: Any) -> bool:
    """Equal as YAML values: `true` is not `1` (Python's `True == 1` would make a `when: {key:
    true}` select the cell of value 1), `"1"` is not `1`, `[1, 2]` is not `[2, 1]`; a mapping's
    keys in any order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return a == b


@dataclass(frozen=True)
class Cell:
    index: int
    variant: str | None
    values: dict[str, Any]  # matrix key (dotted path) -> value
    variant_overrides: dict[str, Any]

    def overrides(self) -> dict[str, Any]:
        """What this cell sets on the base scenario (after the campaign's `set`): the variant's
        keys, then the matrix's."""
        return {**self.variant_overrides, **self.values}

    def label(self) -> str:
        parts = ([self.variant] if self.variant is not None else []) + [f"{k}={v}" for k, v in self.values.items()]
        return ", ".join(parts) or "(all runs)"

    def columns(self) -> dict[str, Any]:
        """The results columns naming this cell."""
        return ({VARIANT_KEY: self.variant} if self.variant is not None else {}) | self.values


@dataclass(frozen=True)
class Campaign:
    """A validated campaign: its spec, where it came from, and the base scenario's raw mapping."""

    spec: CampaignSpec
    path: Path
    base_path: Path
    base_raw: dict[str, Any]
    base_text: str
    text: str = ""  # the campaign as run: the file's text, or with the command line's seeds and `--set`

    def base_with(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """The base scenario with the campaign's `set`, then `overrides` (a cell's)."""
        raw = copy.deepcopy(self.base_raw)
        for key, value in {**self.spec.set, **overrides}.items():
            _set_path(raw, key.split("."), copy.deepcopy(value), key, str(self.base_path))
        return raw



def load_campaign(arg: str, *, seeds: int | None = None, first_seed: int | None = None, overrides: Iterable[str] = ()) -> Campaign:
    """Read and validate a campaign given as a path or a library name; every matrix and variant
    value is validated against the base scenario. Raises CampaignError naming file and key.

    The command line's `--seeds N` (how many), `--first-seed K` (from which; default the file's
    first) and `--set KEY=VALUE` (joining the file's `set`) change the campaign before it is
    validated: a held-out seed range, or a protocol switch turned off, needs no edited file. The
    campaign as run is then `Campaign.text`."""
    path = _resolve_campaign(arg)
    file = str(path)
    text, raw = read_yaml_file(path, CampaignError)
    if not isinstance(raw, dict):
        raise CampaignError(file, [Problem("", "expected a campaign mapping with at least `name` and `scenario`")])
    if seeds is not None or first_seed is not None or overrides:
        raw = _from_command_line(raw, file, seeds, first_seed, overrides)
        text = yaml.safe_dump(raw, sort_keys=False)
    try:
        spec = CampaignSpec.model_validate(raw)
    except ValidationError as exc:
        root = _compose(text)
        problems = [Problem(_campaign_loc(tuple(e["loc"]), raw), _campaign_message(e), _line_of(root, tuple(e["loc"]))) for e in exc.errors()]
        raise CampaignError(file, merge_alternatives(problems)) from None
    campaign = _with_base(spec, path, text)
    problems = _check_overrides(campaign) + _check_expect(campaign.spec, _compose(text))
    if problems:
        raise CampaignError(file, problems)
    return campaign


def _from_command_line(raw: dict[str, Any], file: str, seeds: int | None, first_seed: int | None, overrides: Iterable[str]) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    if seeds is not None or first_seed is not None:
        try:
            current = CampaignSpec.model_fields["seeds"].default if "seeds" not in raw else raw["seeds"]
            listed = list(range(current)) if isinstance(current, int) else list(range(current[0], current[1] + 1))
        except (TypeError, IndexError):
            listed = [0]  # the file's own `seeds` is invalid: validation says so
        first = listed[0] if first_seed is None else first_seed
        count = len(listed) if seeds is None else seeds
        raw["seeds"] = [first, first + count - 1]
    if overrides:
        sets = dict(raw.get("set") or {})
        for item in overrides:
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise CampaignError(file, [Problem(f"--set {item}", "expected KEY=VALUE, a dotted key path of the scenario")])
            try:
                sets[key.strip()] = yaml.safe_load(value) if value.strip() else ""
            except yaml.YAMLError:
                sets[key.strip()] = value
        raw["set"] = sets
    return raw


def campaign_library() -> dict[str, Path]:
    return {p.stem: p for p in sorted(CAMPAIGN_LIBRARY_DIR.glob("*.yaml"))}


def _resolve_campaign(arg: str) -> Path:
    return resolve_in_library(arg, campaign_library(), "campaign", CampaignError)


def _compose(text: str):
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None


def _campaign_loc(loc: tuple, raw: Any) -> str:
    # A matrix or variant key is a dotted path itself: keep it whole, after the section's name.
    if len(loc) >= 2 and loc[0] in ("matrix", "variants"):
        rest = _format_loc(loc[2:], None)
        return f"{loc[0]}.{loc[1]}" + (f"[{rest}]" if rest.isdigit() else (f".{rest}" if rest else ""))
    return _format_loc(loc, raw)


def _campaign_message(err: dict) -> str:
    if err["type"] == "literal_error" and err["loc"][:1] == ("faults",):
        for key, what, names in (("kinds", "fault kind", FAULT_KINDS), ("roles", "role", ROLES), ("triggers", "trigger", TRIGGER_STATES)):
            if key in err["loc"]:
                return f"unknown {what} {err.get('input')!r} (expected one of: {', '.join(names)})"
    return _message(err, CampaignSpec)


def _with_base(spec: CampaignSpec, path: Path, text: str) -> Campaign:
    """The base scenario, found relative to the campaign file first (then as a path or a library name)."""
    candidate = (path.parent / spec.scenario) if not Path(spec.scenario).is_absolute() else Path(spec.scenario)
    try:
        base_path = candidate if candidate.is_file() else resolve_source(spec.scenario)
        base_text, base_raw = read_yaml_file(base_path)
        validate(base_raw, str(base_path), base_text)
    except ScenarioError as exc:
        detail = "; ".join(str(p) for p in exc.problems)
        raise CampaignError(str(path), [Problem("scenario", f"the base scenario {exc.file}: {detail}", _line_of(_compose(path.read_text()), ("scenario",)))]) from None
    return Campaign(spec, path, base_path, base_raw, base_text, text)


def _check_overrides(campaign: Campaign) -> list[Problem]:
    """Each matrix value and each variant, applied alone to the base scenario, must give a valid
    scenario: the error names the campaign key and what the scenario schema expected."""
    problems: list[Problem] = []
    root = _compose(campaign.path.read_text())
    spec = campaign.spec
    checks: list[tuple[str, tuple, dict[str, Any]]] = []
    for key, values in spec.matrix.items():
        if key in (VARIANT_KEY, "seed", "name"):
            problems.append(Problem(f"matrix.{key}", f"{key!r} is not a scenario key a matrix may set (the campaign sets it)"))
            continue
        for i, value in enumerate(values):
            checks.append((f"matrix.{key}[{i}]", ("matrix", key), {key: value}))
    for name, overrides in (spec.variants or {}).items():
        checks.append((f"variants.{name}", ("variants", name), overrides))
    if spec.set:
        checks.append(("set", ("set",), {}))
    for where, loc, overrides in checks:
        try:
            validate(campaign.base_with(overrides), str(campaign.base_path))
        except ScenarioError as exc:
            detail = "; ".join(f"{p.path or '(file)'}: {p.message}" for p in exc.problems)
            problems.append(Problem(where, f"the base scenario with this value is invalid: {detail}", _line_of(root, loc)))
    return problems


def _check_expect(spec: CampaignSpec, root) -> list[Problem]:
    problems = []
    for i, rule in enumerate(spec.expect):
        for key, value in rule.when.items():
            line = _line_of(root, ("expect", i, "when", key))
            if key == VARIANT_KEY and spec.variants is not None:
                allowed = list(spec.variants)
            elif key in spec.matrix:
                allowed = spec.matrix[key]
            else:
                keys = list(spec.matrix) + ([VARIANT_KEY] if spec.variants is not None else [])
                problems.append(Problem(f"expect[{i}].when.{key}",
                                        f"not a matrix key (expected one of: {', '.join(keys) or 'none: the campaign has no matrix'})", line))
                continue
            if not any(same_value(value, v) for v in allowed):
                problems.append(Problem(f"expect[{i}].when.{key}", f"{value!r} is not one of the campaign's values {allowed!r}", line))
    return problems
