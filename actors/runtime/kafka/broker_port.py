"""The broker a Kafka listener serves, as the gateway sees it: its role reached through its node
process (actors/runtime/ray/node_process.py), in the same process and event loop."""

from __future__ import annotations

from typing import Any

from actors.contract import Envelope

from .apis import topic_uuid
from .admin import ConfigView
from .gateway import ClusterView, PartitionView


def cluster_view(role: Any) -> ClusterView:
    """The broker's metadata image as Metadata answers it (Kafka's broker answers from its
    MetadataCache): topics with their ids, every partition's leader, epoch, replicas and ISR, and
    the brokers that are not fenced."""
    image = role.image
    topics = {name: topic_uuid(topic_id) for name, topic_id in image.topics.items()}
    partitions = {key: PartitionView(p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr)) for key, p in image.partitions.items()}
    brokers = tuple(sorted(b for b, reg in image.brokers.items() if not reg.fenced))
    return ClusterView(topics, partitions, brokers)


def config_view(role: Any) -> ConfigView:
    """The configs DescribeConfigs answers from (Kafka's broker answers it from its metadata
    image): the topics' and the cluster's dynamic configs, and the static ones it started with."""
    image, cfg = role.image, role.settings.config
    static = {"min.insync.replicas": cfg.min_insync_replicas, "unclean.leader.election.enable": cfg.unclean_leader_election_enable,
              "log.segment.bytes": cfg.log_segment_bytes}
    return ConfigView({t: dict(c) for t, c in image.topic_configs.items()}, dict(image.cluster_config), static)


class NodeBrokerPort:
    def __init__(self, process: Any, broker_id: int) -> None:
        self.process = process
        self.broker_id = broker_id
        self.listeners: dict[int, tuple[str, int]] = {}
        self.producer_ids_given = 0

    def new_producer_id(self) -> int:
        """Unique in the run: the broker, its process's incarnation and a count make the id, above
        the ids kraftlab's own producers take (from 1,000)."""
        self.producer_ids_given += 1
        return (1 << 48) + (self.broker_id << 32) + (self.process.incarnation << 20) + self.producer_ids_given

    def now_ms(self) -> float:
        return self.process.clock.now_ms()

    def deliver(self, src: str, message: object) -> None:
        self.process.deliver([(self.now_ms(), Envelope(src, self.process.name, message))])

    def cluster_view(self) -> ClusterView:
        return self.process.invoke(lambda role, _now: cluster_view(role))

    def configs(self) -> ConfigView:
        return self.process.invoke(lambda role, _now: config_view(role))

    def topic_id(self, topic: str) -> str | None:
        """The topic's id in the broker's metadata image (a produce's hot path: no whole view)."""
        return self.process.invoke(lambda role, _now: role.image.topics.get(topic))

    def record(self, event: object) -> None:
        self.process.record(event)
