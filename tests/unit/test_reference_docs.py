"""The documentation's generated reference pages (kraftlab/reference_docs.py) are the ones committed
in docs/reference/, and cover what the code defines: every event kind and its columns, every metric
family, every anomaly and invariant, every top-level key of the scenario and campaign files."""

from kraftlab import reference_docs
from observability.anomaly_names import ANOMALY_NAMES
from observability.checks.invariants import DISRUPTION_NAMES, INVARIANT_NAMES
from observability.events import KINDS
from observability.metrics.model import FAMILIES
from workloads.campaign.spec import CampaignSpec
from workloads.scenario.schema import Scenario

PAGES = reference_docs.pages()


def test_the_committed_pages_are_the_ones_the_code_generates():
    for path, markdown in PAGES.items():
        committed = reference_docs.DOCS / path
        assert committed.is_file() and committed.read_text() == markdown, f"docs/{path} is stale: run `make docs-reference`"


def test_every_event_kind_has_a_section_with_its_columns():
    page = PAGES[reference_docs.EVENTS_PAGE]
    for kind in KINDS:
        assert f"### `{kind}`" in page, kind
    # A batch kind's columns are the rows it writes, not its fields.
    produce_send = page.split("### `produce_send`")[1].split("### ")[0]
    assert "| `sequence` | int64 |" in produce_send and "`sequences`" not in produce_send


def test_every_metric_family_anomaly_and_invariant_is_listed():
    assert all(f"`{name}`" in PAGES[reference_docs.METRICS_PAGE] for name in FAMILIES)
    findings = PAGES[reference_docs.FINDINGS_PAGE]
    for name in (*ANOMALY_NAMES, *INVARIANT_NAMES, *DISRUPTION_NAMES):
        assert f"| `{name}` |" in findings, name


def test_the_file_formats_list_every_top_level_key():
    for model, page in ((Scenario, reference_docs.SCENARIO_PAGE), (CampaignSpec, reference_docs.CAMPAIGN_PAGE)):
        for key in model.model_json_schema(by_alias=True)["properties"]:
            assert f"| `{key}` |" in PAGES[page], (page, key)


def test_a_table_cell_never_breaks_its_row():
    assert reference_docs._cell("a | b\nc") == "a \\| b c"
