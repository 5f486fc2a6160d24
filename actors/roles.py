"""Which role each node of a scenario runs.

Brokers are nodes b1..bN, controller voters c1..cM (contract.md). Until the protocol roles land
(issue 3: controller quorum; issue 4: brokers' data plane), every node runs `IdleNode`.
"""

from __future__ import annotations

from actors.contract import RoleFactory
from actors.idle import IdleNode


def role_factories(brokers: int, controllers: int) -> dict[str, RoleFactory]:
    factories: dict[str, RoleFactory] = {}
    for i in range(1, brokers + 1):
        factories[f"b{i}"] = IdleNode
    for i in range(1, controllers + 1):
        factories[f"c{i}"] = IdleNode
    return factories
