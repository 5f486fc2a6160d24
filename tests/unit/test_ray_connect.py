"""Which Ray a command uses (docs/reference/cli.md): its own embedded local Ray unless
`--address` (or RAY_ADDRESS) names a cluster, which must answer before anything runs.
tests/ray/test_embedded_ray.py checks the same on a real Ray; these check the decision alone."""

import socket
import time
from pathlib import Path

from click.testing import CliRunner

from actors.runtime.ray.adapter import address_problem, ray_init_arguments
from kraftlab.cli import main


def test_no_address_starts_an_embedded_ray_of_its_own():
    # "local", not None: plain ray.init() would join a cluster `ray start` left on this machine.
    assert ray_init_arguments(None, {})["address"] == "local"
    assert ray_init_arguments(None, {"RAY_ADDRESS": ""})["address"] == "local"


def test_an_address_or_ray_address_joins_that_cluster():
    assert ray_init_arguments("auto", {})["address"] == "auto"
    assert ray_init_arguments(None, {"RAY_ADDRESS": "ray://head:10001"})["address"] == "ray://head:10001"
    assert ray_init_arguments("10.0.0.1:6379", {"RAY_ADDRESS": "ray://head:10001"})["address"] == "10.0.0.1:6379"


def test_an_embedded_ray_takes_the_workers_niceness_and_a_joined_cluster_keeps_its_own():
    assert ray_init_arguments(None, {}, worker_niceness=0)["_system_config"] == {"worker_niceness": 0}
    assert "_system_config" not in ray_init_arguments(None, {})
    assert "_system_config" not in ray_init_arguments("auto", {}, worker_niceness=0)


# --- an address where no Ray cluster answers: refused before anything runs -----------------------


def unanswered_address() -> tuple[socket.socket, str]:
    """A port bound and never listening: a connection there is refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock, f"127.0.0.1:{sock.getsockname()[1]}"


def test_an_address_where_nothing_listens_is_named_with_where_it_came_from():
    sock, address = unanswered_address()
    with sock:
        problem = address_problem(address, {})
        assert problem is not None and problem.startswith(f"--address {address}: no Ray cluster answers")
        assert "Connection refused" in problem and "ray start --head" in problem
        assert address_problem(None, {"RAY_ADDRESS": f"ray://{address}"}).startswith(f"RAY_ADDRESS ray://{address}: no Ray")
    assert address_problem("head-without-port", {}) == (
        "--address head-without-port: not host:port; " + address_problem("head-without-port", {}).split("; ", 1)[1])


def test_an_address_where_something_listens_and_no_address_at_all_pass():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert address_problem(f"127.0.0.1:{server.getsockname()[1]}", {}) is None
    assert address_problem(None, {}) is None
    assert address_problem(None, {"RAY_ADDRESS": ""}) is None
    assert address_problem("local", {}) is None


def test_kraftlab_run_on_ray_at_an_unanswered_address_exits_2_at_once_and_writes_nothing(tmp_path, monkeypatch):
    """`ray.init` at such an address retries for minutes with only Ray's C++ warnings on the
    console (seen: 300 s and no word from kraftlab)."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    sock, address = unanswered_address()
    with sock:
        started = time.monotonic()
        result = CliRunner().invoke(main, ["run", "last-replica-standing-elr", "--runtime", "ray", "--address", address,
                                           "--out", str(tmp_path / "run")])
        took = time.monotonic() - started
    assert result.exit_code == 2, result.output
    assert f"--address {address}: no Ray cluster answers" in result.output
    assert took < 30  # not a speed target: the hang it guards against lasts minutes
    assert list(Path(tmp_path).iterdir()) == []  # no run directory, no .partial one
