"""The scenario file, exactly as docs/reference defines it, as pydantic models.

Validation is strict: an unknown key, a wrong type (no silent "3" -> 3 coercion) or a bad value is
an error naming the key path. Cross-references (node names, topics, broker ids) are checked by
`Scenario.check_references` once the whole file has parsed. `Scenario.model_json_schema()` is the
published JSON Schema (workloads/scenario.schema.json) for editors.

The file's sections have a module each: names.py (names, references, the strict base model),
cluster_spec.py (`cluster` and `topics`), condition_spec.py (`wait_for`/`expect` conditions),
step_spec.py (the steps); this module is the whole file.

Every key is documented in docs/reference (steps-and-conditions.md, and scenario-format.md, which
`make docs-reference` generates from these models' descriptions).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    NonNegativeInt,
    field_validator,
    model_validator,
)

from observability.checks.invariants import DISRUPTION_NAMES, INVARIANT_NAMES

from .cluster_spec import ClusterSpec, TopicSpec
from .load_spec import LoadSpec
from .names import NAME_PATTERN, Strict
from .step_spec import CreatePartitionsStep, CreateTopicStep, Step

# --- the scenario ----------------------------------------------------------------------------


class Scenario(Strict):
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=200, description="the scenario's name, in run folders and summaries")]
    description: str = Field("", description="free text: what the scenario shows")
    runtime: Literal["sim", "ray"] = Field("sim", description="sim: the deterministic simulator; ray: Ray actors (`--runtime` overrides)")
    seed: NonNegativeInt = Field(0, description="the simulator's seed: the same seed gives the same run (`--seed` overrides)")
    cluster: ClusterSpec = Field(
        ClusterSpec(), description="the cluster: its size, storage, Kafka config, protocol switches, network and disk"
    )
    topics: list[TopicSpec] = Field([], description="topics created before the steps run")
    steps: list[Step] = Field([], description="run in order; each a one-key mapping: the step's kind and its arguments")
    load: LoadSpec = Field(LoadSpec(), description="who runs the load steps' producers and consumers (kraftlab or librdkafka), "
                                                   "and a real client's settings")
    expect_violations: list[str] = Field([], description="the invariants this scenario is meant to break (protocol variants); "
                                                          "`ok` requires exactly these")
    # kraftlab's: also check the quorum's liveness (EpochInflation, StaleLeader) after every event,
    # reported as violations: what turning `prevote` or `check_quorum` off shows under faults.
    disruption_checks: bool = Field(False, description="also check the quorum's liveness (EpochInflation, StaleLeader) after every event")

    @field_validator("expect_violations")
    @classmethod
    def _known_invariants(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in INVARIANT_NAMES | DISRUPTION_NAMES:
                raise ValueError(f"unknown invariant {name!r} (the names of docs/explanation/protocol-facts.md: {', '.join(sorted(INVARIANT_NAMES))}; "
                                 f"with disruption_checks: {', '.join(sorted(DISRUPTION_NAMES))})")
        return names

    @model_validator(mode="after")
    def _listeners_for_real_load(self) -> Scenario:
        """`load.client: librdkafka` needs the brokers' Kafka listeners: a user who asks for real
        clients as load asks for them too, so they are turned on (and scenario.yaml says so)."""
        if self.load.client == "librdkafka" and "kafka" not in self.cluster.listeners:
            object.__setattr__(self, "cluster", self.cluster.model_copy(update={"listeners": [*self.cluster.listeners, "kafka"]}))
        return self

    @model_validator(mode="after")
    def _fill_topic_defaults(self) -> Scenario:
        """A topic's replication factor, when not given: its assignment's, else min(3, brokers)."""

        def filled(t):
            if t.replication_factor is not None:
                return t
            rf = len(next(iter(t.assignment.values()))) if t.assignment else min(3, self.cluster.brokers)
            return t.model_copy(update={"replication_factor": rf})

        object.__setattr__(self, "topics", [filled(t) for t in self.topics])
        for step in self.steps:
            if isinstance(step, CreateTopicStep):
                object.__setattr__(step, "create_topic", filled(step.create_topic))
        return self

    def topic(self, name: str) -> TopicSpec | None:
        """The topic `name` as the scenario's steps may name it: from `topics`, or made by a
        `create_topic` step, with the partitions `create_partitions` steps add (steps that expect
        an error make nothing)."""
        found = next((t for t in self.topics if t.name == name), None)
        for step in self.steps:
            if isinstance(step, CreateTopicStep):
                args = step.create_topic
                if args.name == name and args.expect_error in (None, "NONE"):
                    # Created again after a `delete_topic`: either incarnation's partitions may be named.
                    found = args if found is None else found.model_copy(update={"partitions": max(found.partitions, args.partitions)})
            elif isinstance(step, CreatePartitionsStep) and found is not None:
                args = step.create_partitions
                if args.topic == name and args.expect_error in (None, "NONE"):
                    found = found.model_copy(update={"partitions": max(found.partitions, args.count)})
        return found
