"""Will the campaign's run directories fit on the disk? A standard run keeps about 3 MB (its
history and metrics), so a campaign of 100,000 runs would need some 300 GB: the command measures
the first runs it finishes and warns, once, when the runs left would need more than the disk has
free, rather than letting the campaign fail with a full disk hours later."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

SAMPLE_RUNS = 8  # finished runs measured before the projection (then no more walks of run directories)


def tree_bytes(path: Path) -> int:
    total = 0
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            total += tree_bytes(Path(entry.path))
        elif entry.is_file(follow_symlinks=False):
            total += entry.stat(follow_symlinks=False).st_size
    return total


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"


class DiskWatch:
    def __init__(self, runs_dir: Path, keep_runs: str, free_bytes: Callable[[Path], int] | None = None) -> None:
        self.runs_dir = runs_dir
        self.keep_runs = keep_runs
        self._free = free_bytes or (lambda p: shutil.disk_usage(p).free)
        self._sizes: list[int] = []
        self.warned = False

    def after_run(self, run: str, remaining: int) -> str | None:
        """Measure run `run`'s directory (among the first SAMPLE_RUNS); once they are measured, a
        warning when `remaining` runs like them would not fit in the free space (said once)."""
        if self.warned or len(self._sizes) >= SAMPLE_RUNS:
            return None
        run_dir = self.runs_dir / run
        if run_dir.is_dir():
            self._sizes.append(tree_bytes(run_dir))
        if len(self._sizes) < SAMPLE_RUNS or remaining <= 0:
            return None
        per_run = sum(self._sizes) / len(self._sizes)
        need, free = per_run * remaining, self._free(self.runs_dir)
        if need <= free:
            return None
        self.warned = True
        advice = ("; `--keep-runs failures` keeps the history of failing runs only (the others' summary, scenario "
                  "and results row stay)") if self.keep_runs == "all" else ""
        return (f"disk: the {remaining:,} runs left need about {human(need)} ({human(per_run)} a run, as the first "
                f"{len(self._sizes)}), and {self.runs_dir} has {human(free)} free{advice}")
