"""`analyze_run` writes report.html and its PNGs beside checks.json, and times it."""

from __future__ import annotations

from observability.analysis.analyze import analyze_run

from .histories import clean


def test_analyze_writes_the_report_beside_checks(spark, tmp_path):
    run_dir = clean().write(tmp_path / "run")
    _, timings = analyze_run(run_dir, spark=spark)
    out = run_dir / "analysis"
    page = (out / "report.html").read_text()
    assert 'class="verdict valid">valid<' in page
    for png in ("latency.png", "rate.png", "isr_elr.png"):
        assert f'<img src="{png}"' in page and (out / png).is_file()
    assert timings["report_s"] > 0
