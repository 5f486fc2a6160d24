"""What every role needs to know about the cluster it runs in (from the scenario's `cluster`)."""

from __future__ import annotations

from dataclasses import dataclass

from workloads.scenario.schema import ClusterSpec, KafkaConfig, ProtocolSwitches
from storage.modes import StorageMode


@dataclass(frozen=True)
class ClusterSettings:
    brokers: int
    controllers: int
    racks: int | None
    storage: StorageMode
    config: KafkaConfig
    protocol: ProtocolSwitches

    @classmethod
    def from_spec(cls, spec: ClusterSpec) -> ClusterSettings:
        return cls(spec.brokers, spec.controllers, spec.racks, StorageMode(spec.storage), spec.config, spec.protocol)

    @property
    def voters(self) -> tuple[str, ...]:
        return tuple(f"c{i}" for i in range(1, self.controllers + 1))

    def rack_of(self, broker: int) -> str | None:
        """Brokers are assigned to racks round-robin (contract.md)."""
        return None if self.racks is None else f"rack{(broker - 1) % self.racks}"
