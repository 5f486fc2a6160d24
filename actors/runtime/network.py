"""The network model shared by both drivers: latency distributions and injected faults.

Faults are directed: `(src, dst)` is the link from src to dst. A two-way partition cuts both
directions; `link(from, to, drop, delay_ms)` degrades one direction only. Everything here is pure:
the caller passes the random stream, so the simulator stays deterministic and the Ray runtime can use
the same rules in every actor's send path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import random


@dataclass(frozen=True, slots=True)
class LatencyModel:
    """One-way message latency in ms.

    constant: always `low_ms`; uniform: in [low_ms, high_ms); exponential: `low_ms` plus an
    exponential tail with mean `mean_ms` (the long tail of a busy network).
    """

    kind: Literal["constant", "uniform", "exponential"] = "uniform"
    low_ms: float = 0.5
    high_ms: float = 2.0
    mean_ms: float = 1.0

    def __post_init__(self) -> None:
        if self.low_ms < 0 or self.mean_ms <= 0 or (self.kind == "uniform" and self.high_ms < self.low_ms):
            raise ValueError(f"invalid latency model {self!r}")

    def sampler(self, rng: random.Random):
        """A zero-argument function drawing one latency (bound once: this is the hot path)."""
        low, high, mean = self.low_ms, self.high_ms, self.mean_ms
        if self.kind == "constant":
            return lambda: low
        if self.kind == "uniform":
            span = high - low
            draw = rng.random
            return lambda: low + span * draw()
        expo = rng.expovariate
        rate = 1.0 / mean
        return lambda: low + expo(rate)


@dataclass(frozen=True, slots=True)
class LinkFault:
    drop: float = 0.0  # probability in [0, 1] that a message on this link is lost
    delay_ms: float = 0.0  # added to every message's latency on this link


class NetworkFaults:
    """The faults in force. `active` is False when there are none (the common fast path)."""

    def __init__(self) -> None:
        self._isolated: set[str] = set()
        # Each cut directed link, with how many partitions in force cut it: undoing one partition
        # (`unpartition`) leaves the links another one cuts too.
        self._cut: Counter[tuple[str, str]] = Counter()
        self._links: dict[tuple[str, str], LinkFault] = {}
        self.active = False

    def _refresh(self) -> None:
        self.active = bool(self._isolated or self._cut or self._links)

    # --- injecting ------------------------------------------------------------------------

    def isolate(self, node: str) -> None:
        """Cut every link to and from `node`."""
        self._isolated.add(node)
        self._refresh()

    def partition(self, groups: Iterable[Iterable[str]]) -> None:
        """Only nodes in the same group can talk. Nodes named in no group (typically clients) keep
        all their links."""
        groups = [set(g) for g in groups]
        for i, a in enumerate(groups):
            for b in groups[i + 1 :]:
                for x in a:
                    for y in b:
                        self._cut[(x, y)] += 1
                        self._cut[(y, x)] += 1
        self._refresh()

    def link(self, src: str, dst: str, *, drop: float = 0.0, delay_ms: float = 0.0) -> None:
        """Degrade the one-way link src -> dst (drop=1 cuts it)."""
        if not 0.0 <= drop <= 1.0 or delay_ms < 0:
            raise ValueError(f"link fault needs 0 <= drop <= 1 and delay_ms >= 0, got {drop}, {delay_ms}")
        self._links[(src, dst)] = LinkFault(drop, delay_ms)
        self._refresh()

    def heal(self, node: str | None = None) -> None:
        """Remove every fault, or only the faults on links that touch `node`."""
        if node is None:
            self._isolated.clear()
            self._cut.clear()
            self._links.clear()
        else:
            self._isolated.discard(node)
            self._cut = Counter({pair: n for pair, n in self._cut.items() if node not in pair})
            self._links = {pair: f for pair, f in self._links.items() if node not in pair}
        self._refresh()

    # --- undoing one fault exactly (a generated schedule's `undo`) --------------------------------

    def unisolate(self, node: str) -> None:
        """End `node`'s isolation, and nothing else."""
        self._isolated.discard(node)
        self._refresh()

    def unpartition(self, groups: Iterable[Iterable[str]]) -> None:
        """End the partition into `groups`: the links it cut, unless another partition cuts them too."""
        groups = [set(g) for g in groups]
        for i, a in enumerate(groups):
            for b in groups[i + 1 :]:
                for pair in [(x, y) for x in a for y in b] + [(y, x) for x in a for y in b]:
                    if self._cut[pair] <= 1:
                        self._cut.pop(pair, None)
                    else:
                        self._cut[pair] -= 1
        self._refresh()

    def unlink(self, src: str, dst: str) -> None:
        """End the fault of the one-way link src -> dst."""
        self._links.pop((src, dst), None)
        self._refresh()

    def undo(self, fault: str, target: tuple) -> None:
        """End one network fault: `isolate` of (node,), `link` of (src, dst), `partition` of its groups."""
        if fault == "isolate":
            self.unisolate(target[0])
        elif fault == "link":
            self.unlink(*target)
        elif fault == "partition":
            self.unpartition(target)
        else:
            raise ValueError(f"{fault!r} is not a network fault")

    # --- asking ---------------------------------------------------------------------------

    def can_reach(self, src: str, dst: str) -> bool:
        """Whether the link is up at all (ignoring random drops)."""
        if src in self._isolated or dst in self._isolated or (src, dst) in self._cut:
            return False
        fault = self._links.get((src, dst))
        return fault is None or fault.drop < 1.0

    def fate(self, src: str, dst: str, draw) -> float | None:
        """None if the message is lost, else the extra delay in ms. `draw()` gives a uniform
        [0, 1) number and is called only when a random drop is possible."""
        if src in self._isolated or dst in self._isolated or (src, dst) in self._cut:
            return None
        fault = self._links.get((src, dst))
        if fault is None:
            return 0.0
        if fault.drop >= 1.0 or (fault.drop > 0.0 and draw() < fault.drop):
            return None
        return fault.delay_ms

    def state(self) -> tuple[frozenset[str], frozenset[tuple[str, str]], dict[tuple[str, str], LinkFault]]:
        """The faults in force: isolated nodes, cut directed links, degraded directed links (for
        a backend that makes them elsewhere, such as the kernel's packet filter)."""
        return frozenset(self._isolated), frozenset(self._cut), dict(self._links)  # a Counter's keys: the links cut now

    def describe(self) -> dict:
        """The faults in force, as plain data (for traces and summaries)."""
        return {
            "isolated": sorted(self._isolated),
            "cut": sorted([list(p) for p in self._cut]),
            "links": {f"{s}->{d}": {"drop": f.drop, "delay_ms": f.delay_ms} for (s, d), f in sorted(self._links.items())},
        }
