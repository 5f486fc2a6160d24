"""Names and references in a scenario file (node names, selectors, topic-partitions, broker ids)
and the strict base of every model: unknown keys are errors, values are not coerced."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)


class Strict(BaseModel):
    """Unknown keys are errors; values are not coerced between types."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, frozen=True)


# --- names and references --------------------------------------------------------------------

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
TOPIC_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"  # Kafka's legal topic characters
PARTITION_REF_PATTERN = r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<index>\d+)$"

# Selectors, resolved when the step runs (workloads/steps.py `resolve`): a role of the moment.
NODE_SELECTORS = ("controller-leader", "controller-follower", "fenced-broker")
# Followed by `:TOPIC-PARTITION`. partition-last-isr: the ISR's one member once the ISR has shrunk
# to one replica (KIP-966's last replica standing); partition-elr: the lowest-id member of the ELR.
PARTITION_SELECTORS = ("partition-leader", "partition-follower", "partition-last-isr", "partition-elr")
# The clients' node names: the steps' producer and consumer, and each load's (numbered from 1 in
# the order the load steps start them). Network faults may name them; crashes may not.
CLIENT_PATTERN = r"producer|consumer|load-producer-[1-9]\d*|load-consumer-[1-9]\d*"
NODE_REF_PATTERN = (r"^(b\d+|c\d+|" + "|".join(NODE_SELECTORS) + "|(" + "|".join(PARTITION_SELECTORS) + r"):[A-Za-z0-9._-]+-\d+|"
                    + CLIENT_PATTERN + ")$")

NodeRef = Annotated[
    str,
    Field(
        pattern=NODE_REF_PATTERN,
        description="a node name (b2, c1) or a selector resolved when the step runs: controller-leader, "
        "controller-follower, fenced-broker, partition-leader:t-0, partition-follower:t-0, partition-last-isr:t-0, "
        "partition-elr:t-0; network faults (isolate, partition, link, heal) may also name a client: producer, "
        "consumer, load-producer-N, load-consumer-N",
    ),
]


def is_client(ref: str) -> bool:
    return re.fullmatch(CLIENT_PATTERN, ref) is not None
PartitionRef = Annotated[str, Field(pattern=PARTITION_REF_PATTERN, description="topic-partition, e.g. t-0")]
BrokerId = Annotated[int, Field(ge=1, description="a broker id, 1..cluster.brokers")]


def split_partition_ref(ref: str) -> tuple[str, int]:
    m = re.match(PARTITION_REF_PATTERN, ref)
    if m is None:
        raise ValueError(f"{ref!r} is not a partition reference like t-0")
    return m["topic"], int(m["index"])
