"""Messages pickled as their constructor and fields (actors.contract.pickled_by_fields): every
message class that travels between actors comes back equal, of the same class, through pickle
(what the Ray wire does to every message), and the decorator refuses a class its constructor
would not rebuild."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

import actors.replication.messages as replication_messages
import controller_quorum.messages as quorum_messages
import controller_quorum.requests as quorum_requests
from actors.contract import Envelope, pickled_by_fields
from storage import partition_log

MODULES = (replication_messages, quorum_messages, quorum_requests, partition_log)


def _message_classes():
    return [
        cls
        for module in MODULES
        for cls in vars(module).values()
        if isinstance(cls, type) and cls.__module__ == module.__name__ and dataclasses.is_dataclass(cls)
    ]


def test_every_frozen_message_class_is_pickled_by_its_fields():
    classes = _message_classes()
    assert len(classes) >= 30
    for cls in classes:
        assert "__reduce__" in vars(cls), f"{cls.__name__} is pickled field by field through dataclasses.fields()"


@pytest.mark.parametrize("cls", _message_classes(), ids=lambda c: c.__name__)
def test_a_message_comes_back_equal_through_pickle(cls):
    values = [(i, f"v{i}") for i, _ in enumerate(dataclasses.fields(cls))]  # any values: no validation
    message = cls(*values)
    wired = [(1.5, Envelope("b1", "b2", message))]
    back = pickle.loads(pickle.dumps(wired, protocol=5))
    assert back == wired and type(back[0][1].payload) is cls


def test_a_class_its_constructor_would_not_rebuild_is_refused():
    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived:
        a: int
        b: int = dataclasses.field(init=False, default=0)

    with pytest.raises(TypeError, match="would not rebuild"):
        pickled_by_fields(Derived)

    @dataclasses.dataclass(frozen=True)
    class Checked:
        a: int

        def __post_init__(self):
            pass

    with pytest.raises(TypeError, match="would not rebuild"):
        pickled_by_fields(Checked)
