"""Kafka's default key partitioner (murmur2), bit-for-bit identical to Java's.

librdkafka's default partitioner is CRC32-based, so every producer sets
``partitioner=murmur2_random``; when a record must land on *another* key's partition (the
``results`` topic is keyed per call but partitioned by session) we compute the partition
here and produce with it explicitly. Java's ``Utils.murmur2`` works on signed 32-bit ints;
we mask to 32 bits after every multiply to reproduce its overflow.
"""

from __future__ import annotations

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Java ``org.apache.kafka.common.utils.Utils.murmur2``, as a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length % 4
    # Java's switch falls through from 3 to 1; the multiply happens once for any tail.
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str | bytes, partitions: int) -> int:
    """The partition Java's (and librdkafka's ``murmur2_random``) partitioner picks for ``key``.

    ``toPositive(murmur2(bytes)) % n``, where toPositive masks the sign bit (it is not abs()).
    """
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    data = key.encode("utf-8") if isinstance(key, str) else key
    return (murmur2(data) & 0x7FFFFFFF) % partitions
