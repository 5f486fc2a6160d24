"""The scenario's `load` section: which client runs the `load` steps' producers and consumers, and a
real client's settings (docs/how-to/real-clients.md, "Real clients as load").

`client: kraftlab` (the default) is kraftlab's own producer and consumer roles. `client:
librdkafka` runs each load producer and consumer as a confluent-kafka client in a Ray actor of
its own, against the brokers' Kafka listeners; `config` is passed to it under librdkafka's names.
The `load` steps still say how many clients, at what rate and for how long; their own `acks`,
`idempotent` and `config` keys become librdkafka settings (`kafka_settings`), and a `config`
entry here that contradicts one a step sets is refused (`conflicts`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr

from .names import Strict

LoadClient = Literal["kraftlab", "librdkafka"]

# The settings kraftlab gives each librdkafka client itself: the cluster's listeners, and the
# client.id that tells the listeners which load client a connection is.
OWN_SETTINGS = ("bootstrap.servers", "client.id")
# The load steps' `config` keys librdkafka takes under the same name (Kafka's Java names it lacks
# are refused with librdkafka's own: `TAKEN_ELSEWHERE`).
SAME_NAME = ("delivery.timeout.ms", "linger.ms", "batch.size")
TAKEN_ELSEWHERE = {"buffer.memory": "queue.buffering.max.kbytes", "max.block.ms": "none: produce() fails at once on a full queue"}
# The step's fields (by their Python names) behind its `config` keys.
_FIELD = {"buffer.memory": "buffer_memory", "max.block.ms": "max_block_ms", "delivery.timeout.ms": "delivery_timeout_ms",
          "linger.ms": "linger_ms", "batch.size": "batch_size"}


class LoadSpec(Strict):
    client: LoadClient = Field(
        "kraftlab", description="who runs the load steps' producers and consumers: kraftlab (its own client roles) or "
        "librdkafka (confluent-kafka clients in Ray actors, against the brokers' Kafka listeners; runtime ray only, and "
        "it turns cluster.listeners [kafka] on)"
    )
    config: dict[str, StrictStr | StrictInt | StrictFloat | StrictBool] = Field(
        {}, description="librdkafka settings for the load's clients, under librdkafka's names (acks, enable.idempotence, "
        "linger.ms, retries, delivery.timeout.ms, ...); acks and enable.idempotence default to the load step's; "
        "client: librdkafka only"
    )


def _acks(value: Any) -> str:
    """acks as one spelling: all (also -1), 1 or 0."""
    text = str(value).lower()
    return "all" if text in ("all", "-1") else text


def kafka_settings(spec: LoadSpec, step: Any) -> dict[str, Any]:
    """The librdkafka settings of one `load` step's producers and consumers: the step's own
    (acks, enable.idempotence, the `config` keys librdkafka shares), then `spec.config` over them."""
    out: dict[str, Any] = {"acks": _acks(step.acks)}
    given = step.config.model_fields_set
    for name in SAME_NAME:
        if _FIELD[name] in given and getattr(step.config, _FIELD[name]) is not None:
            out[name] = getattr(step.config, _FIELD[name])
    out.update(spec.config)
    out["acks"] = _acks(out["acks"])
    if "enable.idempotence" not in spec.config:
        # As Kafka's default since 3.0 (the step's `idempotence()`), of the acks in force.
        out["enable.idempotence"] = step.idempotent if step.idempotent is not None else out["acks"] == "all"
    return out


def conflicts(spec: LoadSpec, steps: list[Any]) -> Iterator[tuple[str, str]]:
    """(key path, problem) for each `load.config` entry a client cannot take, and each that
    contradicts what a `load` step (given as (index, its args)) sets itself."""
    if spec.client != "librdkafka":
        if spec.config:
            yield "load.config", "librdkafka settings need load.client: librdkafka (kraftlab's own load takes the load steps' keys)"
        return
    for key in OWN_SETTINGS:
        if key in spec.config:
            yield f"load.config.{key}", "set by kraftlab for each load client (the cluster's listeners; the client's name)"
    for index, args in steps:
        at = f"steps[{index}].load"
        given = args.config.model_fields_set
        for key, instead in TAKEN_ELSEWHERE.items():
            if _FIELD[key] in given:
                yield f"{at}.config.{key}", f"not a librdkafka setting (load.client: librdkafka); librdkafka's: {instead}"
        if "acks" in spec.config and "acks" in args.model_fields_set and _acks(spec.config["acks"]) != _acks(args.acks):
            yield "load.config.acks", f"{spec.config['acks']!r} contradicts {at}.acks ({args.acks!r}); give it in one place"
        if "enable.idempotence" in spec.config and args.idempotent is not None and spec.config["enable.idempotence"] != args.idempotent:
            yield ("load.config.enable.idempotence", f"{spec.config['enable.idempotence']!r} contradicts {at}.idempotent "
                   f"({args.idempotent!r}); give it in one place")
        for key in SAME_NAME:
            if key in spec.config and _FIELD[key] in given and spec.config[key] != getattr(args.config, _FIELD[key]):
                yield f"load.config.{key}", f"{spec.config[key]!r} contradicts {at}.config.{key} ({getattr(args.config, _FIELD[key])!r})"
