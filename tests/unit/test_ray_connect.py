"""Which Ray a command uses (contract.md, "Command line"): its own embedded local Ray unless
`--address` (or RAY_ADDRESS) names a cluster. tests/ray/test_embedded_ray.py checks the same on a
real Ray; these check the decision alone."""

from actors.runtime.ray.adapter import ray_init_arguments


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
