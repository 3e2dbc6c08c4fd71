"""The ``Serde`` services use: ``serde.encode(topic, record)`` / ``serde.decode(topic, data)``.

``runplane.wire.serde_for(settings)`` (``_choice``) picks the implementation once at the edge:
Avro single-object encoding by default, the Confluent format with a registry. Both
refuse a record type the topic does not carry (``TOPIC_RECORDS``), on the way out as well as
on the way in, and raise only ``WireError`` for bad input (``RetryableError`` when the
registry itself cannot be reached: the message is not at fault, so do not dead-letter it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from runplane.wire._base import Record
from runplane.wire._serde import decode as _decode
from runplane.wire._serde import encode as _encode
from runplane.wire._topics import check_allowed

if TYPE_CHECKING:
    pass


class Serde(ABC):
    """Encodes and decodes wire records for a topic (logical name or full topic name)."""

    @abstractmethod
    def encode(self, topic: str, record: Record) -> bytes: ...

    @abstractmethod
    def decode(self, topic: str, data: bytes) -> Record: ...


class SingleObjectSerde(Serde):
    """Avro single-object encoding: self-describing, needs no registry."""

    def encode(self, topic: str, record: Record) -> bytes:
        check_allowed(topic, record)
        return _encode(record)

    def decode(self, topic: str, data: bytes) -> Record:
        return decode_for(topic, data)


def decode_for(topic: str, data: bytes) -> Record:
    """Decode single-object ``data`` and refuse a record type ``topic`` does not carry."""
    record = _decode(data)
    check_allowed(topic, record)
    return record
