"""The `pause_load` step: an idle period of the open-loop load (a swarm phase's `idle`). The
producers offer nothing for its span, then go on at their rate, without a burst of what the
pause did not offer; the consumers go on reading."""

from observability.history import read_history

from .cli_runs import run_text

SCENARIO = """
name: pause-load
cluster: {brokers: 3}
topics:
  - {name: t, replication_factor: 3}
steps:
  - load: {producers: 1, consumers: 1, rate_per_s: 100, acks: all}
  - wait: 2000
  - pause_load: 3000
  - wait: 5000
"""


def test_the_load_offers_nothing_while_paused_and_resumes_at_its_rate(tmp_path):
    summary, _ = run_text(tmp_path, SCENARIO)
    assert summary["ok"] and summary["stats"]["acked_lost"] == 0
    rows = read_history(tmp_path / "run" / "events").to_pylist()
    (paused,) = [r for r in rows if r["kind"] == "load_paused"]
    assert paused["for_ms"] == 3000
    start = paused["time_ms"]
    sends = sorted(r["time_ms"] for r in rows if r["kind"] == "produce_send")
    assert not [t for t in sends if start < t < start + 3000]
    before = [t for t in sends if start - 2000 <= t <= start]
    after = [t for t in sends if start + 3000 <= t <= start + 5000]
    # 100 records a second on either side of the pause (within a round of 10 ms), and no burst
    # of the 300 the pause did not offer.
    assert 195 <= len(before) <= 205 and 195 <= len(after) <= 205
