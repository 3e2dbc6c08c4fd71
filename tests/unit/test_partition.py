"""murmur2 must match Java's Utils.murmur2 exactly, or co-partitioning silently breaks."""

from __future__ import annotations

import pytest

from runplane.kafka.partition import murmur2, partition_for

# From Kafka's own clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java.
JAVA_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), JAVA_MURMUR2)
def test_murmur2_matches_java(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_partition_matches_a_measured_placement() -> None:
    # Measured with librdkafka: b"session-1" over 12 partitions went to 4 with murmur2.
    assert partition_for("session-1", 12) == 4
    assert partition_for(b"session-1", 12) == 4


def test_partition_masks_sign_bit_not_abs() -> None:
    # -973932308 & 0x7fffffff = 1173551340; abs() would give 973932308 — different partitions.
    assert partition_for(b"21", 1000) == 1173551340 % 1000
    assert partition_for(b"21", 1000) != 973932308 % 1000


def test_partition_is_in_range_for_every_tail_length() -> None:
    for n in (1, 3, 6, 12):
        for i in range(40):
            assert 0 <= partition_for("k" * i, n) < n


def test_partition_rejects_zero_partitions() -> None:
    with pytest.raises(ValueError):
        partition_for("x", 0)
