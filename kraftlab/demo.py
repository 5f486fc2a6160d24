"""`kraftlab demo`: KIP-966's Last Replica Standing under load, with ELR on and with ELR off.

Both library scenarios (`last-replica-standing-load` and `...-no-elr`) run at once, by default on
an embedded local Ray, and the demo compares what each cost: acknowledged records lost, time the
partition was offline and could not take acks=all writes, acknowledged records per second of
load, and the p99 produce latency (handed over -> acknowledged). ELR trades availability for
durability: without it broker 1 is elected again sooner, with a log its host's crash truncated.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.runtime import interrupts
from kraftlab.runner import DEFAULT_RUNS_ROOT, RunResult, run_scenario
from workloads.scenario.loading import load_scenario

VARIANTS = (
    ("ELR on", "last-replica-standing-load"),
    ("ELR off", "last-replica-standing-load-no-elr"),
)

# The demo's `--client`: the scenario keys it sets (`load.client: librdkafka` turns the brokers'
# Kafka listeners on; the load steps' acks all stays librdkafka's acks, idempotence its default).
CLIENT_OVERRIDES: dict[str, tuple[str, ...]] = {"kraftlab": (), "librdkafka": ("load.client=librdkafka",)}

ProgressCallback = Callable[[str, int, int, str], None]  # variant, step index, steps, step kind


@dataclass(frozen=True)
class DemoRow:
    variant: str
    scenario: str
    ok: bool  # the scenario's own expectations held (ELR on: nothing lost; off: the loss happened)
    acked: int
    acked_lost: int
    offline_s: float
    unavailable_s: float  # offline or under min ISR: acks=all writes impossible
    records_per_s: float
    p99_ms: float | None
    run_dir: Path
    # Why `ok` is False: failed steps, expected violations not seen, violations not expected.
    problems: tuple[str, ...] = ()
    # Spark's verdict on the run's history (`kraftlab analyze`'s checks.json), once analyzed.
    analysis: dict[str, Any] | None = None

    def analysis_problems(self) -> list[str]:
        """Where Spark's reading of the history disagrees with the run's own: a different count
        of acknowledged acks=all records lost, or anomalies in a run that lost nothing."""
        if self.analysis is None:
            return []
        out = []
        spark_lost = self.analysis["stats"]["lost_by_acks"].get("all", 0)
        if spark_lost != self.acked_lost:
            out.append(f"Spark found {spark_lost:,} acknowledged acks=all records lost, the run's checker {self.acked_lost:,}")
        if self.acked_lost == 0 and self.analysis["valid"] is not True:
            found = ", ".join(f"{n} {c:,}" for n, c in self.anomalies().items())
            out.append(f"Spark: the history is {self.analysis['valid']} ({found or self.analysis.get('reason', 'invariants')})")
        return out

    def anomalies(self) -> dict[str, int]:
        """The anomalies Spark found in the history, by name (those with a count only)."""
        if self.analysis is None:
            return {}
        return {name: a["count"] for name, a in self.analysis["anomalies"].items() if a["count"]}

    @classmethod
    def from_result(cls, variant: str, result: RunResult) -> DemoRow:
        s = result.summary
        st = s["stats"]
        availability = st.get("availability", {}).get("t-0", {})
        return cls(
            variant=variant,
            scenario=s["scenario"],
            ok=s["ok"],
            acked=st.get("acked") or 0,
            acked_lost=st.get("acked_lost") or 0,
            offline_s=availability.get("offline_ms", 0.0) / 1000.0,
            unavailable_s=availability.get("unavailable_ms", 0.0) / 1000.0,
            records_per_s=st.get("load", {}).get("acked_per_s", 0.0),
            p99_ms=st.get("produce_latency_ms", {}).get("p99"),
            run_dir=result.run_dir,
            problems=tuple(problems(s)),
        )


def problems(summary: dict[str, Any]) -> list[str]:
    """What kept a run from going as its scenario expects, in words (empty when it did)."""
    out = [f"step {f['step']} ({f['kind']}): {f['detail']}" for f in summary["failures"]]
    seen = {v["invariant"] for v in summary["violations"]}
    expected = set(summary["expect_violations"])
    if expected - seen:
        out.append(f"expected violations not seen: {', '.join(sorted(expected - seen))}")
    if seen - expected:
        out.append(f"violations not expected: {', '.join(sorted(seen - expected))}")
    return out


def default_root() -> Path:
    """Where the demo's two runs go without `--out`: `runs/demo-<local time>/`."""
    return DEFAULT_RUNS_ROOT / f"demo-{time.strftime('%Y%m%d-%H%M%S')}"


def run_demo(
    *,
    runtime: str = "ray",
    address: str | None = None,
    out_root: Path | None = None,
    on_progress: ProgressCallback | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    on_metrics_url: Callable[[str, str], None] | None = None,
    faults: str = "emulated",
    client: str = "kraftlab",
) -> list[DemoRow]:
    """Run both variants concurrently; rows in VARIANTS order. `metrics_port`: serve each run's
    metrics live, the first variant's on that port and the second's on the next one (0: any free
    ports); each URL goes to `on_metrics_url(variant, url)`. `faults`: the Ray runs' fault backend.
    `client`: who runs the load (`load.client`): kraftlab's own clients, or librdkafka's (real
    confluent-kafka clients against the brokers' Kafka listeners; Ray only)."""
    overrides = CLIENT_OVERRIDES[client]
    scenarios = [(variant, name, load_scenario(name, overrides, runtime=runtime)[0]) for variant, name in VARIANTS]
    root = Path(out_root) if out_root is not None else default_root()
    if runtime == "ray":
        from actors.runtime.ray import adapter  # Ray is only loaded when used

        adapter.connect(address)  # once, before the two runs share the connection

    def one(index: int, variant: str, name: str, sc: Any) -> DemoRow:
        def step(index: int, st: Any) -> None:
            if on_progress is not None:
                on_progress(variant, index, len(sc.steps), st.kind())

        port = None
        if metrics_port is not None:
            port = metrics_port + index if metrics_port else 0
        result = run_scenario(sc, source=name, overrides=overrides, out_dir=root / name, on_step=step, address=address, metrics_port=port,
                              metrics_host=metrics_host, faults=faults,
                              on_metrics_url=(lambda url: on_metrics_url(variant, url)) if on_metrics_url else None)
        if on_progress is not None:
            on_progress(variant, len(sc.steps), len(sc.steps), "done")
        return DemoRow.from_result(variant, result)

    with ThreadPoolExecutor(len(scenarios)) as pool:
        futures = [pool.submit(one, i, *v) for i, v in enumerate(scenarios)]
        try:
            return [f.result() for f in futures]
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM reach the main thread only
            _stop_both(futures)
            raise


def _stop_both(futures: list[Future]) -> None:
    """Stop both runs now, not when their steps end (the pool's exit would wait for them): each
    run's thread stops at its next poll (`interrupts.Abandoned`) and keeps, as an interrupted
    `kraftlab run` does, what it recorded in its folder with `interrupted.txt`; the simulator's
    runs stop between two steps. A run already past its epilogue ends complete, with its
    summary.json. The command says where both are (the demo's folder, `interrupts.record_into`)."""
    interrupts.abandon_runs()
    wait(futures)


def analyze_demo(rows: list[DemoRow], engine: str, address: str | None = None, spark=None) -> list[DemoRow]:
    """Both histories checked by Spark (`kraftlab analyze`, one session for the two, or `spark`),
    each into its run directory's `analysis/` (checks.json, report.html); the rows with Spark's
    verdicts."""
    from dataclasses import replace

    from kraftlab.spark_on_ray import analyze_runs

    log_dir = rows[0].run_dir.parent / "analysis-logs"
    checks = analyze_runs([r.run_dir for r in rows], engine, log_dir, address, spark=spark)
    return [replace(r, analysis=c) for r, c in zip(rows, checks, strict=True)]
