"""The dynamic configuration of the cluster and its topics (Kafka's ConfigurationControlManager):
IncrementalAlterConfigs as records, and what a MinISR change does to the ELRs (KIP-966)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .metadata import ConfigRecord
from .proposal import Proposal
from .requests import UNKNOWN_TOPIC_OR_PARTITION, AdminError


def alter_config(p: Proposal, topic: str | None, config: dict[str, Any]) -> AdminError | None:
    """IncrementalAlterConfigs of a topic's keys, or of the cluster's (`topic` None). As Kafka's
    ConfigurationControlManager, a topic key set to the value it already has writes no record
    (`!Objects.equals(currentValue, newValue) || type == BROKER`), so nothing that follows a config
    record (the ELR clearing below) happens; the cluster's keys are always written."""
    resource, name = ("topic", topic) if topic is not None else ("cluster", "")
    w = p.image
    if topic is not None and topic not in w.topics:
        return AdminError(UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic}")
    if topic is not None:
        current = w.topic_configs.get(topic, {})
        config = {k: v for k, v in config.items() if current.get(k) != v}
    if not config:
        return None
    p.add(*[ConfigRecord(resource, name, k, v) for k, v in config.items()])
    if "min.insync.replicas" in config:
        # A dynamic MinISR change clears the ELR of the partitions it applies to (KIP-966).
        for part in list(w.partitions.values()):
            if (topic is None or part.topic == topic) and (part.elr or part.last_known_elr):
                p.add(replace(part, elr=(), last_known_elr=(), partition_epoch=part.partition_epoch + 1, reason="min_isr_changed", election=None))
    return None
