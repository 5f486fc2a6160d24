"""report.html as a person sees it: headless Chromium renders the page with its PNGs from disk and
takes a screenshot, which must have the window's size and show the plots, not only the text."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from PIL import Image

from observability.analysis.report import write_report

from .test_report import checks, history, window_rows, write_analysis

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, HEIGHT = 1280, 2000
PLOT_BLUE = (0x1F, 0x77, 0xB4)  # matplotlib's first line colour, C0

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} not installed (apt-get install chromium; .ci/run does)"),
]


def screenshot(page: Path, shot: Path, profile: Path) -> None:
    # No network, no background services: the page must render from the files beside it alone.
    subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={profile}", f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
                    page.resolve().as_uri()],
                   check=True, capture_output=True, timeout=120)


def test_report_renders_in_chromium(tmp_path):
    run = history().write(tmp_path / "run")
    out = write_analysis(run / "analysis", checks(), window_rows())
    page = write_report(out, run)
    shot = tmp_path / "report.png"
    screenshot(page, shot, tmp_path / "chromium-profile")
    assert shot.is_file()
    with Image.open(shot) as image:
        assert image.size == (WIDTH, HEIGHT)
        rgb = image.convert("RGB")
    colours = rgb.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50, "a blank page"
    # The page's own style has no blue: matplotlib's first line colour (C0, the acked records and
    # the p50 markers) is there only if the browser loaded and drew the PNGs. Text, tables and a
    # broken-image icon give hundreds of colours too, so counting colours alone would not tell.
    plotted = sum(n for n, colour in colours if _near(colour, PLOT_BLUE))
    assert plotted > 200, f"{plotted} pixels of the plots' blue: the images did not render"


def _near(colour: tuple[int, int, int], target: tuple[int, int, int], tolerance: int = 24) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(colour, target))
