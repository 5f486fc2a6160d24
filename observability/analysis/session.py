"""The Spark session `kraftlab analyze` runs its jobs in: plain PySpark (`local`, here) or Spark on
Ray through RayDP (`raydp`, started by kraftlab/spark_on_ray.py with the settings defined here:
joining Ray goes through the actors/runtime/ray/adapter package, which this layer must not import).

Sized for small machines on purpose: every core for tasks (`local[*]`; RayDP: one executor running
two tasks at once while it reserves one Ray CPU, see kraftlab/spark_on_ray.py) and few shuffle
partitions (the histories of one run are small; the default 200 partitions would cost more in
scheduling than the jobs themselves). The driver's Python waits while Spark works, so the tasks
can have the cores.
Spark's own log4j output goes to a file (`spark.log` in the output directory), so that no JVM
warning or Java stack trace reaches the console.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SHUFFLE_PARTITIONS = 4
APP_NAME = "kraftlab-analyze"

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n
"""


def _log_config(log_dir: Path) -> Path:
    """A log4j2 configuration sending everything at WARN and above to `log_dir/spark.log`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    config = log_dir / "log4j2.properties"
    config.write_text(_LOG4J2.format(log_file=(log_dir / "spark.log").resolve()))
    return config


def spark_conf(log_dir: Path) -> dict[str, str]:
    """The settings both engines share (sizes, logs to a file, UTC)."""
    log4j = f"file:{_log_config(log_dir).resolve()}"
    java_opts = f"-Dlog4j2.configurationFile={log4j}"
    return {
        # RayDP sets the driver's log4j file itself, from this key (it would win over ours).
        "spark.log4j.config.file.name": log4j,
        "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
        # Above 32 paths Spark lists the files in a Spark job of one task per file (5 s of 118
        # tasks on RayDP here); the driver lists them itself in milliseconds.
        "spark.sql.sources.parallelPartitionDiscovery.threshold": str(2**31 - 1),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        # Identical results on both engines: the session time zone must not depend on the host.
        "spark.sql.session.timeZone": "UTC",
    }


@contextmanager
def console_to_file(log_dir: Path) -> Iterator[None]:
    """Point this process's stdout and stderr (the file descriptors, which the JVMs started now
    inherit for life) at `log_dir/spark-console.log` while they start. RayDP launches its own JVMs
    (the app master, with Ray's native client logging to stderr), which no log4j setting reaches."""
    log_dir.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_dir / "spark-console.log", "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def python_for_workers() -> None:
    # Python workers must run this interpreter (the venv's), not whatever `python3` is on PATH.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def quiet_py4j() -> None:
    """py4j logs through Python's root logger ("KeyboardInterrupt while sending command", with a
    traceback) when the JVM goes away, as it does on Ctrl-C: keep that off the console (the JVM's
    own logs are in the log folder). A handler on the root logger turns off Python's last-resort
    printing of it; a program that configured logging keeps its handlers."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())


def start_local(log_dir: Path):
    """Plain PySpark on this machine's cores."""
    from pyspark.sql import SparkSession

    quiet_py4j()
    python_for_workers()
    builder = SparkSession.builder.master("local[*]").appName(APP_NAME)
    for key, value in spark_conf(Path(log_dir)).items():
        builder = builder.config(key, value)
    with console_to_file(Path(log_dir)), own_sigint_handler():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def own_sigint_handler() -> Iterator[None]:
    """Keep the process's SIGINT handler in force while Spark starts. PySpark's SparkContext
    installs a handler of its own as it starts, which calls into the JVM to cancel the jobs; a
    Ctrl-C while the session was still being made then ran that handler instead of the command's,
    and the command never learnt of the signal: py4j turned the interrupted call into an error, and
    the command ended with a traceback and exit 1 (seen on a loaded machine). So, for the start,
    PySpark's `signal.signal(SIGINT, ...)` is not carried out; its other signal calls are."""
    import pyspark.context as context

    _reap_spark_jvms_at_exit()
    if threading.current_thread() is not threading.main_thread():
        yield  # PySpark installs no handler outside the main thread
        return
    real = context.signal

    class KeepSigint:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        @staticmethod
        def signal(signum: int, handler: Any) -> Any:
            if signum == real.SIGINT:
                return real.getsignal(signum)
            return real.signal(signum, handler)

    context.signal = KeepSigint()  # type: ignore[assignment]
    try:
        yield
    finally:
        context.signal = real


_REAPER_REGISTERED = False
# What Spark's driver JVM runs: PySpark's launch_gateway starts it through spark-submit.
_SPARK_JVM_MAIN = "org.apache.spark.deploy.SparkSubmit"


def _reap_spark_jvms_at_exit() -> None:
    """Stop, when this process exits, the Spark driver JVMs it started. PySpark's JVM is meant to
    exit when its stdin closes with our process, but one interrupted by Ctrl-C (the signal reaches
    the whole process group) while starting or stopping can stay: its main thread gone, py4j's
    gateway thread keeps it alive, an orphan holding some 130 MB (seen after every Ctrl-C of
    `kraftlab analyze`). Registered once, at the first Spark start."""
    global _REAPER_REGISTERED
    if not _REAPER_REGISTERED:
        import atexit

        atexit.register(reap_spark_jvms)
        _REAPER_REGISTERED = True


def reap_spark_jvms(timeout_s: float = 10.0) -> list[int]:
    """Terminate (then kill) this process's child JVMs running Spark's driver; their pids."""
    import psutil

    jvms = []
    for child in psutil.Process().children():
        try:
            if any(_SPARK_JVM_MAIN in part for part in child.cmdline()):
                child.terminate()
                jvms.append(child)
        except psutil.Error:  # gone already, or not ours to read
            continue
    _, alive = psutil.wait_procs(jvms, timeout=timeout_s)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    return [p.pid for p in jvms]

