"""`kraftlab demo` ends with Spark's analysis of both histories (kraftlab/demo.py `analyze_demo`):
here in the simulator with the shared local session (tests/ray/test_demo_on_ray.py runs the whole
command on Ray with RayDP)."""

from __future__ import annotations

from kraftlab import demo


def test_the_demo_table_gains_sparks_anomaly_counts(spark, tmp_path):
    rows = demo.analyze_demo(demo.run_demo(runtime="sim", out_root=tmp_path / "demo"), "local", spark=spark)
    on, off = rows
    assert (on.variant, off.variant) == ("ELR on", "ELR off")
    # Without ELR the re-elected broker 1 lost acknowledged records: Spark finds them by identity,
    # exactly the acks=all records the run's own checker counted.
    assert off.analysis["valid"] is False
    assert off.anomalies()["lost-write"] == off.analysis["stats"]["lost_by_acks"]["all"] == off.acked_lost > 0
    # With ELR nothing acknowledged is lost, and the history shows no anomaly at all (the load
    # producers are idempotent, as Kafka's are by default: no retry appended twice).
    assert on.acked_lost == 0 and on.anomalies() == {} and on.analysis["valid"] is True
    assert on.analysis_problems() == off.analysis_problems() == []
    for r in rows:
        assert (r.run_dir / "analysis" / "checks.json").is_file() and (r.run_dir / "analysis" / "report.html").is_file()
