"""Which role each node of a scenario runs: brokers b1..bN run `BrokerNode`, controller voters
c1..cM run `ControllerNode` (docs/reference)."""

from __future__ import annotations

from actors.broker_node import BrokerNode
from actors.contract import RoleFactory
from actors.controller_node import ControllerNode
from actors.settings import ClusterSettings


def role_factories(settings: ClusterSettings) -> dict[str, RoleFactory]:
    factories: dict[str, RoleFactory] = {}
    for i in range(1, settings.brokers + 1):
        factories[f"b{i}"] = lambda ctx: BrokerNode(ctx, settings)
    for i in range(1, settings.controllers + 1):
        factories[f"c{i}"] = lambda ctx: ControllerNode(ctx, settings)
    return factories
