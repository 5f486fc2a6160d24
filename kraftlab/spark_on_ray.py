"""The `raydp` engine of `kraftlab analyze`: Spark executors as Ray actors (RayDP's
`init_spark`) on an embedded local Ray, or on the cluster named by `--address`/RAY_ADDRESS.

It lives here, at the top layer, because joining Ray goes through the one module allowed to touch
Ray (the actors/runtime/ray/adapter package), which observability/ must not import. Sizes for 2 cores: one
executor of 2 GB (1 GB overflowed the stack in a lost-write join) running two tasks at once
(`spark.executor.cores`) while it reserves one Ray CPU (`spark.ray.actor.resource.cpu`, RayDP's key
for what the executor's actor asks of Ray's scheduler). An executor asking Ray for both CPUs hangs
RayDP here; two task slots on one reserved CPU run (10 million events: 139 s against 174 s with
one slot, same checks.json).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from actors.runtime import interrupts
from actors.runtime.ray import adapter
from observability.analysis.session import APP_NAME, console_to_file, own_sigint_handler, python_for_workers, quiet_py4j, spark_conf

EXECUTORS = 1
EXECUTOR_CORES = 2  # Spark's task slots in the executor
EXECUTOR_RAY_CPUS = 1  # what the executor's actor reserves of Ray's CPUs
EXECUTOR_MEMORY = "2GB"
# Spark's inputs are the run's files, on the machine where the command runs (a run's driver writes
# its history there; on a cluster the other hosts do not have them): the executor is placed on
# this Ray node, by asking for a sliver of the resource only this node has.
EXECUTOR_RESOURCE_PREFIX = "spark.ray.raydp_spark_executor.actor.resource."
THIS_NODE_SHARE = 0.01


def start(log_dir: Path, address: str | None = None):
    """A Spark session on Ray; `stop` ends it (and the embedded Ray it started)."""
    import raydp

    quiet_py4j()
    python_for_workers()
    # The executor is a Ray worker, and Ray starts workers at niceness 15; in its JVM the task
    # threads then had it too, but not the JIT compiler and GC threads (started before), so on 2
    # cores the tasks yielded to the compiler and to the driver's JVM: the first scan took 18-20 s
    # against 14 s at niceness 0. The embedded Ray runs nothing but this session.
    adapter.connect(address, worker_niceness=0)
    # RayDP 1.6.5 reaches for Ray's deprecated `ray.worker.global_worker`: Ray warns on every use.
    # The behaviour was verified with the pinned versions (pyproject.toml); the warning says nothing
    # to a user of `kraftlab analyze`.
    with warnings.catch_warnings(), console_to_file(Path(log_dir)), own_sigint_handler():
        warnings.simplefilter("ignore")
        logging.getLogger("ray").setLevel(logging.ERROR)
        configs = {**spark_conf(Path(log_dir)), "spark.ray.actor.resource.cpu": str(EXECUTOR_RAY_CPUS),
                   EXECUTOR_RESOURCE_PREFIX + adapter.this_node_resource(): str(THIS_NODE_SHARE)}
        spark = raydp.init_spark(APP_NAME, num_executors=EXECUTORS, executor_cores=EXECUTOR_CORES,
                                 executor_memory=EXECUTOR_MEMORY, configs=configs)
    interrupts.reclaim()  # what ray.init or RayDP may have taken of SIGTERM's
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def stop() -> None:
    import raydp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raydp.stop_spark()
    adapter.shutdown()


def analyze_on_ray(run_dir: Path, out_dir: Path, address: str | None = None):
    """`analyze_run` on a RayDP session started (and stopped) here; the start is timed apart."""
    import time

    from observability.analysis.analyze import analyze_run
    from observability.analysis.loading import discover

    discover(run_dir)  # bad input fails before Ray or Spark start
    started = time.perf_counter()
    spark = start(out_dir, address)
    start_s = time.perf_counter() - started
    try:
        checks, timings = analyze_run(run_dir, out_dir, engine="raydp", spark=spark)
    finally:
        stop()
    return checks, {**timings, "spark_start_s": start_s, "total_s": time.perf_counter() - started}


def analyze_runs(run_dirs: list[Path], engine: str, log_dir: Path, address: str | None = None, spark=None) -> list[dict]:
    """checks.json of each run directory (each analyzed into its own `analysis/`), in one Spark
    session of `engine` started and stopped here (or `spark`, left running): the demo's two runs
    pay for one Spark start."""
    from observability.analysis.analyze import analyze_run
    from observability.analysis.loading import discover
    from observability.analysis.session import start_local

    for run_dir in run_dirs:
        discover(run_dir)  # bad input fails before Ray or Spark start
    own = spark is None
    if own:
        spark = start(log_dir, address) if engine == "raydp" else start_local(log_dir)
    try:
        return [analyze_run(run_dir, engine=engine, spark=spark)[0] for run_dir in run_dirs]
    finally:
        if own and engine == "raydp":
            stop()
        elif own:
            spark.stop()
