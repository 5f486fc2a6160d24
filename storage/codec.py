"""Encoding records for storage: msgpack bodies in length-prefixed, CRC-checked frames.

A frame is `length (4 bytes, big endian) | crc32 of the body (4 bytes) | body`. Reading stops at
the first incomplete or corrupt frame, so a torn tail (a crash in the middle of a write) is
detected and the caller truncates the file to the valid prefix. Pure functions: no file I/O.

Records are frozen dataclasses registered with `@record_type`; they encode as
`[type name, field values...]`. Lists decode back to tuples (records hold tuples, never lists).
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import msgpack

_HEADER = struct.Struct(">II")
_REGISTRY: dict[str, type] = {}


def record_type(cls: type) -> type:
    """Register a frozen dataclass so that `encode_record`/`decode_record` can carry it."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    name = cls.__name__
    if _REGISTRY.get(name, cls) is not cls:
        raise ValueError(f"record type {name} registered twice")
    _REGISTRY[name] = cls
    return cls


_SCALARS = frozenset({int, str, bytes, float, bool, type(None)})


def _plain(value: Any) -> Any:
    t = type(value)
    if t in _SCALARS:
        return value  # the common cases first (a storage hot path)
    if t is tuple or t is list:
        return [_plain(v) for v in value]
    if t in _FIELD_NAMES or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        return encode_value(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def encode_value(rec: Any) -> list:
    cls = type(rec)
    names = _FIELD_NAMES.get(cls)
    if names is None:
        if _REGISTRY.get(cls.__name__) is not cls:
            raise TypeError(f"{cls.__name__} is not a registered record type")
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(rec))
    return ["@" + cls.__name__, *(_plain(getattr(rec, name)) for name in names)]


def _restore(value: Any) -> Any:
    if isinstance(value, list):
        if value and isinstance(value[0], str) and value[0].startswith("@") and value[0][1:] in _REGISTRY:
            return decode_value(value)
        return tuple(_restore(v) for v in value)
    if isinstance(value, dict):
        return {k: _restore(v) for k, v in value.items()}
    return value


def decode_value(data: list) -> Any:
    cls = _REGISTRY[data[0][1:]]
    return cls(*(_restore(v) for v in data[1:]))


def encode_record(rec: Any) -> bytes:
    return msgpack.packb(encode_value(rec), use_bin_type=True)


def decode_record(data: bytes) -> Any:
    return decode_value(msgpack.unpackb(data, raw=False, strict_map_key=False))


def pack(obj: Any) -> bytes:
    """Plain data (lists, dicts, ints, registered records) to msgpack bytes."""
    return msgpack.packb(_plain(obj), use_bin_type=True)


def unpack(data: bytes) -> Any:
    return _restore(msgpack.unpackb(data, raw=False, strict_map_key=False))


def frame(body: bytes) -> bytes:
    return _HEADER.pack(len(body), zlib.crc32(body)) + body


def read_frames(data: bytes) -> tuple[list[bytes], int]:
    """The bodies of the valid frames at the start of `data`, and the length of that valid prefix."""
    bodies: list[bytes] = []
    pos = 0
    end = len(data)
    while pos + _HEADER.size <= end:
        length, crc = _HEADER.unpack_from(data, pos)
        start = pos + _HEADER.size
        if start + length > end:
            break  # torn: the write did not finish
        body = data[start : start + length]
        if zlib.crc32(body) != crc:
            break  # corrupt
        bodies.append(bytes(body))
        pos = start + length
    return bodies, pos


def iter_frames(data: bytes) -> Iterator[bytes]:
    yield from read_frames(data)[0]
