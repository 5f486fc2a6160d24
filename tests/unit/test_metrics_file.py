"""metrics.om as every run writes it (observability/metrics/): OpenMetrics that promtool can load
(families once each, `# EOF`, seconds), every series the contract names, and the same bytes for
the same seed."""

from __future__ import annotations

import re
from collections import defaultdict

from kraftlab.runner import run_scenario
from observability.checks.invariants import INVARIANT_NAMES
from observability.metrics.openmetrics import SIM_EPOCH_S
from workloads.scenario.loading import load_scenario, validate

CONTRACT_SERIES = (
    "kafka_server_replicamanager_underreplicatedpartitions", "kafka_server_replicamanager_underminisrpartitioncount",
    "kafka_server_replicamanager_leadercount", "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafka_controller_kafkacontroller_activecontrollercount", "kafka_controller_kafkacontroller_fencedbrokercount",
    "kafka_controller_controllerstats_uncleanleaderelections_total",
    "kafka_controller_controllerstats_electionfromeligibleleaderreplicas_total",
    "kafka_server_raftmetrics_current_epoch", "kafka_server_raftmetrics_current_leader",
    "kraftlab_partition_isr_size", "kraftlab_partition_elr_size", "kraftlab_partition_last_known_elr_size",
    "kraftlab_partition_leader", "kraftlab_partition_high_watermark", "kraftlab_records_total", "kraftlab_records_lost",
    "kraftlab_produce_latency_seconds_bucket", "kraftlab_elections_total", "kraftlab_fault_active",
    "kraftlab_invariant_violations_total",
)
SAMPLE = re.compile(r"^([a-z_]+)(\{[^}]*\})? (-?[0-9.e+]+) ([0-9]+\.[0-9]{3})$")


def run(tmp_path, name: str = "last-replica-standing-no-elr", where: str = "run"):
    scenario, _ = load_scenario(name)
    return run_scenario(scenario, source=name, out_dir=tmp_path / where)


def test_metrics_om_is_openmetrics_with_every_series_of_the_contract(tmp_path):
    result = run(tmp_path)
    lines = (result.run_dir / "metrics.om").read_text().splitlines()
    assert lines[-1] == "# EOF" and lines.count("# EOF") == 1
    families = [line.split()[2] for line in lines if line.startswith("# TYPE")]
    assert len(families) == len(set(families))  # each family in one block
    names, last_stamp = set(), defaultdict(float)
    family = None
    for line in lines[:-1]:
        if line.startswith("# TYPE"):
            family = line.split()[2]
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, line
        name, labels, _, stamp = m.groups()
        assert name.startswith(family)  # in its family's block
        names.add(name)
        key = (name, labels)
        assert float(stamp) >= last_stamp[key]  # each series in time order
        last_stamp[key] = float(stamp)
        assert SIM_EPOCH_S <= float(stamp) <= SIM_EPOCH_S + result.summary["stats"]["sim_ms"] / 1000 + 1  # seconds
    assert set(CONTRACT_SERIES) <= names, set(CONTRACT_SERIES) - names
    # Counters end in _total, and only counters.
    types = {line.split()[2]: line.split()[3] for line in lines if line.startswith("# TYPE")}
    assert {f for f, t in types.items() if t == "counter"} == {n[: -len("_total")] for n in names if n.endswith("_total")}


def test_a_family_with_no_series_in_the_run_is_still_declared(tmp_path):
    """A run with no topic and no fault: no partition or fault series can exist, and the file
    still declares every family docs/reference names, with its type, so a reader finds each name."""
    scenario = validate({"name": "quiet", "cluster": {"brokers": 1, "controllers": 1}, "steps": [{"wait": 2000}]}, "quiet.yaml")
    result = run_scenario(scenario, source="quiet.yaml", out_dir=tmp_path / "quiet")
    lines = (result.run_dir / "metrics.om").read_text().splitlines()
    declared = {line.split()[2] for line in lines if line.startswith("# TYPE")}
    sampled = {SAMPLE.match(line).group(1) for line in lines if not line.startswith("#")}
    assert "kraftlab_partition_leader" not in sampled and "kraftlab_fault_active" not in sampled
    for name in CONTRACT_SERIES:
        family = name.removesuffix("_total").removesuffix("_bucket")
        assert family in declared, name


def test_the_same_seed_gives_the_same_metrics(tmp_path):
    first, second = run(tmp_path, where="a"), run(tmp_path, where="b")
    assert (first.run_dir / "metrics.om").read_bytes() == (second.run_dir / "metrics.om").read_bytes()


def test_the_final_sample_holds_the_runs_own_counts(tmp_path):
    result = run(tmp_path)
    text = (result.run_dir / "metrics.om").read_text()
    last = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            last[(m.group(1), m.group(2))] = float(m.group(3))
    stats = result.summary["stats"]
    assert last[("kraftlab_records_lost", None)] == stats["acked_lost"] > 0
    assert last[("kraftlab_records_total", '{outcome="ok"}')] == stats["acked"]
    assert last[("kraftlab_produce_latency_seconds_count", None)] == stats["acked"]
    violated = {v["invariant"] for v in result.summary["violations"]}
    assert {re.search(r'invariant="([^"]+)"', labels).group(1) for (name, labels), value in last.items()
            if name == "kraftlab_invariant_violations_total" and value > 0} == violated
    # Every invariant's series exists, at 0 where nothing was violated (the documented "must exist").
    assert len([1 for name, _ in last if name == "kraftlab_invariant_violations_total"]) == len(INVARIANT_NAMES)
    assert {labels for name, labels in last if name == "kraftlab_elections_total"} == {
        f'{{kind="{kind}"}}' for kind in ("clean", "elr", "last_known_leader", "preferred", "unclean")}


def test_each_series_is_written_whole_before_the_next_as_openmetrics_requires(tmp_path, monkeypatch):
    # "Metrics MUST NOT be interleaved": within a family, every sample of one series, then the
    # next (before, one second of every series after the other). A histogram's series is its
    # labels but `le`: one MetricPoint (buckets, count, sum) per second, in time order.
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from observability.metrics import openmetrics

    text = (run(tmp_path).run_dir / "metrics.om").read_text()
    seen: list[tuple[str, str]] = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and not m.group(1).startswith("kraftlab_produce_latency_seconds"):
            series = (m.group(1), m.group(2) or "")
            if not seen or seen[-1] != series:
                assert series not in seen, f"{series} interleaved with another series"
                seen.append(series)
    # Python's strict OpenMetrics parser takes the file's counters and gauges (it reads one
    # MetricPoint per histogram, so the latency histogram, one point a second, is left out here).
    blocks = text.split("# TYPE ")[1:]
    kept = "".join("# TYPE " + b for b in blocks if not b.startswith("kraftlab_produce_latency_seconds "))
    families = list(text_string_to_metric_families(kept if kept.endswith("# EOF\n") else kept + "# EOF\n"))
    assert len(families) == len(blocks) - 1
    # Sorting the spool in small runs merged from disk gives the same file.
    monkeypatch.setattr(openmetrics, "SORT_CHUNK_LINES", 7)
    assert (run(tmp_path, where="again").run_dir / "metrics.om").read_text() == text
