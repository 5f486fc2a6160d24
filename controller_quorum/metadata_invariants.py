"""Partition invariants of reference/protocol-facts.md that the controller's committed metadata
alone can show (the data-plane ones arrive with the brokers' replicas, issue 4).

| name           | checked here                                                                  |
|----------------|-------------------------------------------------------------------------------|
| IsrElrShape    | ISR and ELR are subsets of the replicas, disjoint, ELR empty when ISR >= MinISR |
| NoFencedInIsr  | with ELR on, no fenced broker is in an ISR                                    |
| MonotonicEpochs| leader epoch, partition epoch and broker epoch only grow                      |

Checked whenever the most advanced committed image moves on.
"""

from __future__ import annotations

from collections.abc import Callable

from .metadata import MetadataImage
from .partition_change import ChangePolicy


class MetadataInvariants:
    def __init__(
        self,
        image: Callable[[], MetadataImage | None],
        policy: Callable[[str, MetadataImage, int], ChangePolicy],
        *,
        elr_enabled: bool,
    ) -> None:
        self._image = image
        self._policy = policy
        self.elr_enabled = elr_enabled
        self._checked_offset = -1
        self._partition_epochs: dict[tuple[str, int], tuple[int, int]] = {}
        self._broker_epochs: dict[int, int] = {}

    def check(self) -> dict[str, str]:
        img = self._image()
        if img is None or img.offset <= self._checked_offset:
            return {}
        self._checked_offset = img.offset
        found: dict[str, str] = {}
        for key, p in img.partitions.items():
            name = f"{key[0]}-{key[1]}"
            isr, elr, replicas = set(p.isr), set(p.elr), set(p.replicas)
            min_isr = self._policy(key[0], img, len(p.replicas)).min_isr
            if not isr <= replicas or not elr <= replicas or isr & elr or (elr and len(isr) >= min_isr):
                found.setdefault("IsrElrShape", f"{name}: replicas {p.replicas}, ISR {p.isr}, ELR {p.elr}, MinISR {min_isr}")
            if self.elr_enabled:
                fenced = [b for b in p.isr if b in img.brokers and img.brokers[b].fenced]
                if fenced:
                    found.setdefault("NoFencedInIsr", f"{name}: fenced brokers {fenced} in ISR {p.isr}")
            before = self._partition_epochs.get(key)
            now = (p.leader_epoch, p.partition_epoch)
            if before is not None and (now[0] < before[0] or now[1] < before[1]):
                found.setdefault("MonotonicEpochs", f"{name}: (leader epoch, partition epoch) went from {before} to {now}")
            self._partition_epochs[key] = now
        for b, reg in img.brokers.items():
            if reg.epoch < self._broker_epochs.get(b, -1):
                found.setdefault("MonotonicEpochs", f"broker {b}'s epoch went from {self._broker_epochs[b]} to {reg.epoch}")
            self._broker_epochs[b] = reg.epoch
        return found
