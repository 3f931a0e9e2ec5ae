"""FindCoordinator's rule: abs(String.hashCode(group)) % offsets.topic.num.partitions,
with Kafka's Utils.abs (Integer.MIN_VALUE -> 0)."""

from __future__ import annotations

from broker_agent.groups.placement import java_string_hash, kafka_abs, partition_for


def test_hash_codes_computed_by_hand() -> None:
    # "" -> 0; "a" -> 97; "ab" -> 97*31 + 98 = 3105;
    # "abc" -> (97*31 + 98)*31 + 99 = 96354; "group" -> 98629247 (by the same sum).
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("ab") == 3105
    assert java_string_hash("abc") == 96354
    h = 0
    for ch in "group":
        h = h * 31 + ord(ch)
    assert h == 98629247 == java_string_hash("group")


def test_hash_wraps_like_a_java_int() -> None:
    # "polygenelubricants" is the classic string whose hashCode is Integer.MIN_VALUE.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert kafka_abs(-(2**31)) == 0
    assert partition_for("polygenelubricants", 50) == 0
    # "Aa" and "BB" collide in Java: 65*31+97 = 66*31+66 = 2112.
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112


def test_partition_for_a_handful_of_ids() -> None:
    assert partition_for("a", 50) == 97 % 50 == 47
    assert partition_for("abc", 50) == 96354 % 50 == 4
    assert partition_for("group", 50) == 98629247 % 50 == 47
    # a negative hash: "hello world" is 1794106052; "console-consumer" overflows
    h = 0
    for ch in "console-consumer-12345":
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    signed = h - 2**32 if h >= 2**31 else h
    assert partition_for("console-consumer-12345", 50) == abs(signed) % 50


def test_utf16_code_units_not_code_points() -> None:
    # U+1F600 is two UTF-16 units (0xD83D, 0xDE00): Java hashes both.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00
