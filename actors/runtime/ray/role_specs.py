"""What a node actor runs, as plain picklable data (a role factory is built inside the actor)."""

from __future__ import annotations

from dataclasses import dataclass

from actors.contract import RoleFactory
from actors.settings import ClusterSettings


@dataclass(frozen=True)
class RoleSpec:
    kind: str  # "broker" | "controller" | "producer" | "consumer" | "kafka_producer" | "kafka_consumer"
    settings: ClusterSettings
    producer_id: int = 0
    # A real Kafka client's (`kafka_producer`, `kafka_consumer`: `load.client: librdkafka`) way in:
    # the brokers' Kafka listeners, as bootstrap.servers.
    bootstrap_servers: str | None = None
    dirty_expire_ms: float = 30_000.0
    background_flush_interval_ms: float = 5_000.0

    @property
    def brokers(self) -> list[str]:
        return [f"b{i}" for i in range(1, self.settings.brokers + 1)]

    def factory(self) -> RoleFactory:
        if self.kind == "broker":
            from actors.broker_node import BrokerNode

            return lambda ctx: BrokerNode(ctx, self.settings)
        if self.kind == "controller":
            from actors.controller_node import ControllerNode

            return lambda ctx: ControllerNode(ctx, self.settings)
        if self.kind == "producer":
            from actors.clients.producer import ProducerNode

            return lambda ctx: ProducerNode(ctx, self.brokers, self.producer_id)
        if self.kind == "consumer":
            from actors.clients.consumer import ConsumerNode

            return lambda ctx: ConsumerNode(ctx, self.brokers)
        if self.kind == "kafka_producer":
            from actors.runtime.kafka.load_producer import KafkaLoadProducer

            return lambda ctx: KafkaLoadProducer(ctx, self.bootstrap_servers)
        if self.kind == "kafka_consumer":
            from actors.runtime.kafka.load_consumer import KafkaLoadConsumer

            return lambda ctx: KafkaLoadConsumer(ctx, self.bootstrap_servers)
        raise ValueError(f"unknown role kind {self.kind!r}")
