"""A follower behind a slow link (the replication deep dive, "How a follower fetches"): each
fetch is answered only after the link's delay. With Kafka's `replica.socket.timeout.ms` (30 s)
the follower waits that long for an answer and replicates, slowly; with kraftlab's default (the
fetch's wait + 2 s, a lost connection noticed quickly) it gives up on every answer before it
arrives, so a one-way delay above about 2.5 s stops that follower's replication."""

import pytest

from .cli_runs import assert_ran_as_expected, run_text

SLOW_LINK = """
name: slow-link-to-a-follower
cluster:
  brokers: 3
  config: {CONFIG}
topics:
  - {name: t, replication_factor: 3, assignment: {0: [1, 2, 3]}}
steps:
  - link: {from: b1, to: b3, delay_ms: 3000}        # the leader's answers reach broker 3 3 s late
  - produce: {topic: t, partition: 0, count: 5, acks: 1, expect: acked}
  - wait_for: {replica: {partition: t-0, broker: 3}, leo: 5, timeout_ms: 20000}
"""


def test_with_kafkas_socket_timeout_a_follower_behind_a_slow_link_replicates(tmp_path):
    summary, result = run_text(tmp_path, SLOW_LINK.replace("{CONFIG}", "{replica.socket.timeout.ms: 30000}"))
    assert_ran_as_expected(summary, result)


@pytest.mark.parametrize("config", ["{}", "{replica.socket.timeout.ms: 2500}"])
def test_with_a_timeout_shorter_than_the_delay_the_follower_never_gets_an_answer(tmp_path, config):
    summary, result = run_text(tmp_path, SLOW_LINK.replace("{CONFIG}", config))
    assert result.exit_code == 1
    assert summary["failures"][0]["step"] == 2 and "timed out" in summary["failures"][0]["detail"]
