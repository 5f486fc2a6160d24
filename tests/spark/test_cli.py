"""`kraftlab analyze` as a command. Bad input: exit code 2 and a message naming the path and what was
expected; nothing written; never a Java stack trace on the console. A valid history: exit 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from observability.analysis.analyze import analyze_run
from observability.analysis.errors import AnalysisInputError
from observability.analysis.loading import discover, load_history

from .histories import clean

ROOT = Path(__file__).resolve().parents[2]


def analyze_cli(run_dir: Path, *args: str, engine: str = "local") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "kraftlab.cli", "analyze", str(run_dir), "--engine", engine, *args],
                          capture_output=True, text=True, env=env, timeout=300)


def assert_input_error(result: subprocess.CompletedProcess, path: Path, expected: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    message = " ".join(result.stderr.split())  # rich wraps long lines
    assert str(path) in message and expected in message, result.stderr
    assert "Exception" not in result.stderr and "at org.apache" not in result.stderr


def truncated_history(run_dir: Path) -> Path:
    """A clean history whose one file lost its second half (its footer with it)."""
    clean().write(run_dir)
    (path,) = sorted((run_dir / "events").glob("*.parquet"))[:1]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def test_no_such_directory(tmp_path):
    assert_input_error(analyze_cli(tmp_path / "nope"), tmp_path / "nope", "no such directory")


def test_no_events_folder(tmp_path):
    assert_input_error(analyze_cli(tmp_path), tmp_path / "events", "no events/ folder")
    assert not (tmp_path / "analysis").exists()


def test_events_without_complete_parquet_files(tmp_path):
    # A file still being written (its name does not end in .parquet) is no history yet.
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / ".b1-00000.parquet.partial").write_bytes(b"PAR1")
    assert_input_error(analyze_cli(tmp_path), tmp_path / "events", "expected files ending in .parquet")
    assert not (tmp_path / "analysis").exists()


def test_truncated_parquet_file(tmp_path):
    path = truncated_history(tmp_path / "run")
    assert_input_error(analyze_cli(tmp_path / "run", "--out", str(tmp_path / "out")), path, "not a readable Parquet file")
    assert not (tmp_path / "out").exists()


def test_a_corrupt_page_that_spark_finds_is_named_too(spark, tmp_path):
    # The footer reads, the data of one file does not: Spark's failure comes back as bad input
    # naming that file (found again with pyarrow once Spark has failed). The load consumer's file:
    # it holds a kind the control cache reads (`consumer_done`), so Spark decodes its pages (a
    # file of record kinds only is skipped by its `kind` dictionary until a check reads it).
    run_dir = clean().write(tmp_path / "run", file_per_node=True)
    path = run_dir / "events" / "load-consumer-1-00000.parquet"
    data = bytearray(path.read_bytes())
    data[4:68] = b"\xff" * 64  # the first column chunk (time_ms, read by every check), not the footer
    path.write_bytes(bytes(data))
    with pytest.raises(AnalysisInputError, match="cannot read this history file") as caught:
        load_history(spark, discover(run_dir))
    assert str(caught.value).startswith(f"{path}: ")


def test_a_corrupt_page_found_by_a_check_is_named_too(spark, tmp_path):
    # The producer's file holds record kinds only: the loading skips its pages, the first check
    # that reads them fails. That is bad input as well, naming the file, with no checks.json.
    run_dir = clean().write(tmp_path / "run", file_per_node=True)
    path = run_dir / "events" / "p1-00000.parquet"
    data = bytearray(path.read_bytes())
    data[4:68] = b"\xff" * 64
    path.write_bytes(bytes(data))
    with pytest.raises(AnalysisInputError, match="cannot read this history file") as caught:
        analyze_run(run_dir, engine="local", spark=spark)
    assert str(caught.value).startswith(f"{path}: ")
    assert not (run_dir / "analysis" / "checks.json").exists()


def test_a_valid_history_exits_0_with_checks_in_the_run_directory_and_a_quiet_console(tmp_path):
    run_dir = clean().write(tmp_path / "run")
    result = analyze_cli(run_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "history: valid" in result.stdout
    assert result.stderr == "" and "WARN" not in result.stdout
    assert (run_dir / "analysis" / "checks.json").is_file()
    assert not [p for p in (run_dir / "analysis").iterdir() if p.name.endswith(".partial")]


def test_ctrl_c_mid_analysis_exits_130_without_a_traceback(tmp_path):
    """Ctrl-C reaches the JVM too (the same process group): PySpark's own SIGINT handler then
    failed in py4j and printed some 95 lines of tracebacks, with exit 1 (the code of an invalid
    history). The command keeps its own handler, from Spark's start on (a Ctrl-C while the
    session was still being made ran PySpark's instead: exit 1 and a traceback, on a loaded
    machine): one line, exit 130, no checks.json. The signal comes as soon as Spark's log is
    there, while Spark starts or works: both must end so."""
    import signal
    import time

    from click.testing import CliRunner

    from kraftlab.cli import main
    from tests.scenario.test_interrupted import long_scenario, start

    run = tmp_path / "run"
    assert CliRunner().invoke(main, ["run", str(long_scenario(tmp_path)), "--out", str(run)]).exit_code in (0, 1)
    proc = start(["analyze", str(run), "--engine", "local", "--out", str(tmp_path / "an")], tmp_path)
    deadline = time.monotonic() + 120
    while not (tmp_path / "an" / "spark.log").is_file() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, proc.stderr.read()[-3000:]
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert f"interrupted (Ctrl-C): stopped; what the analysis recorded until then is in {tmp_path / 'an'} (no checks.json)" in err, err
    assert "Traceback" not in err and "py4j" not in err and "Exception" not in err, err[-3000:]
    assert not (tmp_path / "an" / "checks.json").exists()
    # Spark's driver JVM went with the command (one interrupted so used to stay, an orphan).
    assert spark_jvms_of(tmp_path / "an") == []


def spark_jvms_of(out_dir) -> list[int]:
    """The pids of running Spark driver JVMs whose command line names `out_dir` (its log4j file)."""
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = p.info["cmdline"] or []
        if any("SparkSubmit" in part for part in cmdline) and any(str(out_dir) in part for part in cmdline):
            found.append(p.pid)
    return found


KEEPS_HANDLER = """
import signal
from pyspark.sql import SparkSession
from actors.runtime import interrupts
from observability.analysis.session import own_sigint_handler, python_for_workers
interrupts.install()
python_for_workers()
with own_sigint_handler():
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    print("ours while Spark starts:", signal.getsignal(signal.SIGINT) is interrupts._on_signal)
spark.stop()
"""


def test_the_commands_sigint_handler_stays_in_force_while_spark_starts():
    """The root of the Ctrl-C-mid-start failure above: PySpark's SparkContext installs a SIGINT
    handler of its own as it starts; within `own_sigint_handler` it does not, so a Ctrl-C at any
    moment of the start reaches the command's handler."""
    done = subprocess.run([sys.executable, "-c", KEEPS_HANDLER], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "ours while Spark starts: True" in done.stdout, done.stdout + done.stderr[-3000:]
