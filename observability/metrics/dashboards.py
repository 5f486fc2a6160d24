"""Grafana dashboards as code: cluster, partitions, clients and faults, over the series of
`metrics.om` (model.py), built with Grafana's Foundation SDK (`grafana-foundation-sdk`, the
Grafana 11.6 schema) and written as JSON under infra/grafana/dashboards/ by
`kraftlab dashboards generate`.

Every query works on a single run (series without a `run` label) and on a campaign loaded by
`kraftlab metrics load` (a `run` label per run): the `run` variable's All value is `.*`, which
also matches a missing label. The datasource is the variable `datasource` (type prometheus); the
provisioned one (infra/grafana/provisioning/) has the uid `kraftlab-prometheus`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus as gp
from grafana_foundation_sdk.builders import stat, statetimeline, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as md

from .openmetrics import SIM_EPOCH_S

DATASOURCE_UID = "kraftlab-prometheus"
DS = md.DataSourceRef(type_val="prometheus", uid="${datasource}")
R = 'run=~"$run"'
P = 'run=~"$run", topic=~"$topic", partition=~"$partition"'
# Grafana's variables in queries, and what the PromQL test and the pictures put in their place.
SUBSTITUTIONS = {"$__rate_interval": "5s", "$__interval": "1s", "$run": ".*", "$topic": ".*", "$partition": ".*"}
# The node faults that take a process down (model.py's NODE_FAULTS; they end at `restart`).
DOWN_FAULTS = "crash_process|crash_os|crash_disk|shutdown"


@dataclass(frozen=True)
class Q:
    expr: str
    legend: str


@dataclass(frozen=True)
class PanelSpec:
    title: str
    description: str
    queries: tuple[Q, ...]
    kind: str = "timeseries"  # timeseries | state | stat
    unit: str = "short"
    width: int = 12
    height: int = 8
    main: bool = True  # drawn in the picture (docs/dashboard-<name>.png)


@dataclass(frozen=True)
class DashboardSpec:
    name: str  # file infra/grafana/dashboards/<name>.json, uid kraftlab-<name>
    title: str
    description: str
    panels: tuple[PanelSpec, ...]


FAULT_ANNOTATION = Q(f'max by (run, fault, target) (kraftlab_fault_active{{{R}}}) == 1', "{{run}} {{fault}} {{target}}")

DASHBOARDS = (
    DashboardSpec("cluster", "kraftlab: cluster", "Brokers alive and fenced, the active controller, the Raft epoch and leader", (
        PanelSpec("Brokers alive", "Brokers not down by a node fault (crash or shutdown until restart)", (
            Q(f'count by (run) (kafka_server_replicamanager_leadercount{{{R}}} unless on (run, node) '
              f'label_replace(kraftlab_fault_active{{{R}, fault=~"{DOWN_FAULTS}"}} == 1, "node", "$1", "target", "(.*)"))',
              "{{run}} alive"),), width=8),
        PanelSpec("Brokers fenced", "Brokers fenced in the committed metadata (Kafka's FencedBrokerCount, on the active controller)", (
            Q(f'max by (run) (kafka_controller_kafkacontroller_fencedbrokercount{{{R}}})', "{{run}} fenced"),), width=8),
        PanelSpec("Active controllers", "Voters that are the active controller: 1 in a healthy quorum, 0 during an election", (
            Q(f'sum by (run) (kafka_controller_kafkacontroller_activecontrollercount{{{R}}})', "{{run}} active"),), width=8),
        PanelSpec("Active controller by voter", "1 while the voter is the active controller", (
            Q(f'max by (run, node) (kafka_controller_kafkacontroller_activecontrollercount{{{R}}})', "{{run}} {{node}}"),),
            kind="state"),
        PanelSpec("Raft epoch", "The highest quorum epoch among the voters", (
            Q(f'max by (run) (kafka_server_raftmetrics_current_epoch{{{R}}})', "{{run}} epoch"),)),
        PanelSpec("Raft leader known by each voter", "The quorum leader each voter knows, -1 for none", (
            Q(f'max by (run, node) (kafka_server_raftmetrics_current_leader{{{R}}})', "{{run}} {{node}}"),)),
        PanelSpec("Raft leader changes (last minute)", "Changes of the known leader in the last minute, most seen by a voter", (
            Q(f'max by (run) (changes(kafka_server_raftmetrics_current_leader{{{R}}}[1m]))', "{{run}} changes"),)),
    )),
    DashboardSpec("partitions", "kraftlab: partitions", "ISR, ELR and LastKnownELR sizes, leaders, under-MinISR and offline partitions, elections by kind", (
        PanelSpec("ISR size", "Committed ISR size", (
            Q(f'max by (run, topic, partition) (kraftlab_partition_isr_size{{{P}}})', "{{run}} {{topic}}-{{partition}}"),), width=8),
        PanelSpec("ELR size", "Committed ELR size (KIP-966): replicas that may be elected though out of the ISR", (
            Q(f'max by (run, topic, partition) (kraftlab_partition_elr_size{{{P}}})', "{{run}} {{topic}}-{{partition}}"),), width=8),
        PanelSpec("LastKnownELR size", "Committed LastKnownELR size (KIP-966)", (
            Q(f'max by (run, topic, partition) (kraftlab_partition_last_known_elr_size{{{P}}})', "{{run}} {{topic}}-{{partition}}"),), width=8),
        PanelSpec("Offline partitions", "Partitions without a leader: Kafka's OfflinePartitionsCount (active controller) and the committed records'", (
            Q(f'max by (run) (kafka_controller_kafkacontroller_offlinepartitionscount{{{R}}})', "{{run}} Kafka"),
            Q(f'sum by (run) (kraftlab_partition_leader{{{P}}} == bool -1)', "{{run}} committed"))),
        PanelSpec("Under-MinISR partitions", "Partitions whose ISR is below min.insync.replicas (Kafka's UnderMinIsrPartitionCount, "
                  "summed over the brokers that lead them: a partition without a leader counts as offline, not here)", (
            Q(f'sum by (run) (kafka_server_replicamanager_underminisrpartitioncount{{{R}}})', "{{run}} under MinISR"),)),
        PanelSpec("Partition leader", "The committed leader's broker id, -1 for none", (
            Q(f'max by (run, topic, partition) (kraftlab_partition_leader{{{P}}})', "{{run}} {{topic}}-{{partition}}"),)),
        PanelSpec("Leader elections by kind", "Committed partition leader elections, cumulative, by kind (clean, elr, unclean, last_known_leader...)", (
            Q(f'max by (run, kind) (kraftlab_elections_total{{{R}}})', "{{run}} {{kind}}"),)),
        PanelSpec("Kafka's election counters", "UncleanLeaderElections and ElectionFromEligibleLeaderReplicas as Kafka counts them: "
                  "with ELR off a re-election that loses records counts as clean", (
            Q(f'max by (run) (kafka_controller_controllerstats_uncleanleaderelections_total{{{R}}})', "{{run}} unclean"),
            Q(f'max by (run) (kafka_controller_controllerstats_electionfromeligibleleaderreplicas_total{{{R}}})', "{{run}} from ELR"))),
        PanelSpec("High watermark", "The committed leader's high watermark, as it last reported it", (
            Q(f'max by (run, topic, partition) (kraftlab_partition_high_watermark{{{P}}})', "{{run}} {{topic}}-{{partition}}"),)),
    )),
    DashboardSpec("clients", "kraftlab: clients", "Records per second by produce outcome and produce latency percentiles", (
        PanelSpec("Records per second by outcome", "ok: acknowledged; fail: surely not written; info: unknown", (
            Q(f'sum by (run, outcome) (rate(kraftlab_records_total{{{R}}}[$__rate_interval]))', "{{run}} {{outcome}}"),),
            unit="rps"),
        PanelSpec("Produce latency p50 / p99 / p99.9", "From the histogram of records acknowledged ok (handed over to acknowledged)", tuple(
            Q(f'histogram_quantile({q}, sum by (run, le) (rate(kraftlab_produce_latency_seconds_bucket{{{R}}}[$__rate_interval])))',
              f"{{{{run}}}} {name}") for q, name in ((0.5, "p50"), (0.99, "p99"), (0.999, "p99.9"))), unit="s"),
        PanelSpec("Records by outcome (cumulative)", "Records by produce outcome since the run started", (
            Q(f'max by (run, outcome) (kraftlab_records_total{{{R}}})', "{{run}} {{outcome}}"),)),
        PanelSpec("Mean produce latency", "Mean latency of the records acknowledged in the interval", (
            Q(f'sum by (run) (rate(kraftlab_produce_latency_seconds_sum{{{R}}}[$__rate_interval])) / '
              f'sum by (run) (rate(kraftlab_produce_latency_seconds_count{{{R}}}[$__rate_interval]))', "{{run}} mean"),), unit="s"),
    )),
    DashboardSpec("faults", "kraftlab: faults", "Fault windows, records lost and invariant violations", (
        PanelSpec("Fault windows", "1 while a fault the driver applied is active (node faults until restart, network faults until heal)", (
            Q(f'max by (run, fault, target) (kraftlab_fault_active{{{R}}})', "{{run}} {{fault}} {{target}}"),),
            kind="state", width=24, height=9),
        PanelSpec("Records lost", "Acknowledged acks=all records missing from the committed log now", (
            Q(f'max by (run) (kraftlab_records_lost{{{R}}})', "{{run}} lost"),)),
        PanelSpec("Invariant violations", "Violations found by the online checker (0 when none)", (
            Q(f'sum by (run) (kraftlab_invariant_violations_total{{{R}}}) or '
              f'0 * sum by (run) (kraftlab_records_total{{{R}}})', "{{run}} violations"),)),
        PanelSpec("Faults active now", "Faults active at the end of the range", (
            Q(f'sum by (run) (kraftlab_fault_active{{{R}}})', "{{run}}"),), kind="stat", width=8, main=False),
        PanelSpec("Records lost now", "Acknowledged records lost at the end of the range", (
            Q(f'max by (run) (kraftlab_records_lost{{{R}}})', "{{run}}"),), kind="stat", width=8, main=False),
        PanelSpec("Offline partitions now", "Partitions without a committed leader at the end of the range", (
            Q(f'sum by (run) (kraftlab_partition_leader{{{P}}} == bool -1)', "{{run}}"),), kind="stat", width=8, main=False),
    )),
)


def _target(q: Q, ref: str) -> gp.Dataquery:
    return gp.Dataquery().expr(q.expr).legend_format(q.legend).ref_id(ref).range().datasource(DS)


def _panel(spec: PanelSpec) -> Any:
    if spec.kind == "state":
        p = (statetimeline.Panel().show_value(common.VisibilityMode.NEVER).merge_values(True).row_height(0.8).line_width(0).fill_opacity(80)
             .mappings([md.ValueMap(options={"0": md.ValueMappingResult(text="off", color="transparent"),
                                             "1": md.ValueMappingResult(text="on", color="red")})]))
    elif spec.kind == "stat":
        p = stat.Panel()
    else:
        p = timeseries.Panel().line_interpolation(common.LineInterpolation.STEP_AFTER).fill_opacity(10)
    p = p.title(spec.title).description(spec.description).datasource(DS).unit(spec.unit).span(spec.width).height(spec.height)
    for i, q in enumerate(spec.queries):
        p = p.with_target(_target(q, chr(ord("A") + i)))
    return p


def _variable(name: str, query: str, label: str) -> gd.QueryVariable:
    return (gd.QueryVariable(name).label(label).query(query).datasource(DS).include_all(True).all_value(".*").multi(True)
            .current(md.VariableOption(selected=True, text="All", value="$__all"))
            .refresh(md.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(md.VariableSort.ALPHABETICAL_ASC))


VARIABLES = {
    "run": "label_values(kraftlab_records_total, run)",
    "topic": 'label_values(kraftlab_partition_isr_size{run=~"$run"}, topic)',
    "partition": 'label_values(kraftlab_partition_isr_size{run=~"$run", topic=~"$topic"}, partition)',
}


def build(spec: DashboardSpec) -> dict[str, Any]:
    """The dashboard's JSON model, as Grafana's dashboard API and file provisioning take it."""
    uid = f"kraftlab-{spec.name}"
    d = (gd.Dashboard(spec.title).uid(uid).description(spec.description).tags(["kraftlab"]).editable()
         .time("now-15m", "now").refresh("").timezone("utc").tooltip(md.DashboardCursorSync.CROSSHAIR)
         .with_variable(gd.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
                        .current(md.VariableOption(selected=True, text=DATASOURCE_UID, value=DATASOURCE_UID)))
         .annotation(gd.AnnotationQuery().name("Faults").datasource(DS).enable(True).icon_color("red")
                     .expr(FAULT_ANNOTATION.expr))
         .link(gd.DashboardLink("Simulated runs (time 0 = 2023-11-14T22:13:20Z)").type(md.DashboardLinkType.LINK)
               .url(f"/d/{uid}?from={int(SIM_EPOCH_S * 1000)}&to={int((SIM_EPOCH_S + 60) * 1000)}").include_vars(True)
               .keep_time(False).target_blank(False).as_dropdown(False).icon("external link").tooltip("").tags([])))
    for name, query in VARIABLES.items():
        d = d.with_variable(_variable(name, query, name))
    for panel in spec.panels:
        d = d.with_panel(_panel(panel))
    model = json.loads(json.dumps(d.build(), cls=JSONEncoder, sort_keys=True))
    # Prometheus annotation fields the SDK's (generic) AnnotationQuery does not model.
    fault = next(a for a in model["annotations"]["list"] if a["name"] == "Faults")
    fault.update({"titleFormat": "{{fault}} {{target}}", "textFormat": "{{run}}", "tagKeys": "fault,target",
                  "step": "1s", "useValueForTime": False})
    return model


def generate() -> dict[str, str]:
    """{file name: JSON text} of every dashboard."""
    return {f"{spec.name}.json": json.dumps(build(spec), indent=2, sort_keys=True) + "\n" for spec in DASHBOARDS}


def write(out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in generate().items():
        (out_dir / name).write_text(text)
        written.append(out_dir / name)
    return written


def panel_queries(model: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(panel title, target) of every panel of a dashboard's JSON model, rows' panels included."""
    for panel in model.get("panels", []):
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets", []):
                yield inner["title"], target


def annotation_queries(model: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for a in model.get("annotations", {}).get("list", []):
        if a.get("expr"):
            yield a["name"], a["expr"]


def substitute(expr: str, values: dict[str, str] = SUBSTITUTIONS) -> str:
    """`expr` with Grafana's variables replaced (longest names first: `$__rate_interval` before `$run`)."""
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace("${" + name[1:] + "}", values[name]).replace(name, values[name])
    return expr
