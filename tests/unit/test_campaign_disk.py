"""The campaign's warning that its run directories will not fit (kraftlab/campaign/disk.py): the
first runs measured on real files, the free space given."""

from __future__ import annotations

from pathlib import Path

from kraftlab.campaign.disk import SAMPLE_RUNS, DiskWatch, tree_bytes


def finished_runs(runs_dir: Path, n: int, size: int) -> list[str]:
    for i in range(n):
        (runs_dir / f"c0-s{i}" / "events").mkdir(parents=True)
        (runs_dir / f"c0-s{i}" / "events" / "nodes-00000.parquet").write_bytes(b"x" * (size - 100))
        (runs_dir / f"c0-s{i}" / "summary.json").write_bytes(b"{" + b" " * 98 + b"}")
    return [f"c0-s{i}" for i in range(n)]


def test_a_run_directory_is_measured_with_its_subfolders(tmp_path):
    (run,) = finished_runs(tmp_path, 1, 5000)
    assert tree_bytes(tmp_path / run) == 5000


def test_it_warns_once_when_the_runs_left_would_not_fit(tmp_path):
    runs = finished_runs(tmp_path, SAMPLE_RUNS + 2, 3_000_000)
    watch = DiskWatch(tmp_path, "all", free_bytes=lambda _: 10 * 10**9)
    said = [watch.after_run(run, 100_000 - i - 1) for i, run in enumerate(runs)]
    assert said[:SAMPLE_RUNS - 1] == [None] * (SAMPLE_RUNS - 1)  # not before the first runs are measured
    warning = said[SAMPLE_RUNS - 1]
    assert warning is not None and "the 99,992 runs left need about 300.0 GB (3.0 MB a run" in warning
    assert "10.0 GB free" in warning and "--keep-runs failures" in warning
    assert said[SAMPLE_RUNS:] == [None, None]  # once


def test_no_warning_when_they_fit_or_nothing_is_left(tmp_path):
    runs = finished_runs(tmp_path, SAMPLE_RUNS, 3_000_000)
    fits = DiskWatch(tmp_path, "all", free_bytes=lambda _: 10 * 10**9)
    assert [fits.after_run(run, 1000) for run in runs] == [None] * SAMPLE_RUNS  # 3 GB of 10
    done = DiskWatch(tmp_path, "all", free_bytes=lambda _: 0)
    assert [done.after_run(run, 0) for run in runs] == [None] * SAMPLE_RUNS


def test_with_keep_runs_failures_it_gives_no_advice_it_already_follows(tmp_path):
    runs = finished_runs(tmp_path, SAMPLE_RUNS, 3_000_000)
    watch = DiskWatch(tmp_path, "failures", free_bytes=lambda _: 1)
    warning = [watch.after_run(run, 10) for run in runs][-1]
    assert warning is not None and "--keep-runs" not in warning
