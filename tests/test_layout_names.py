"""Tests for zkconsumer.layout.names."""

import pytest
from hypothesis import given, strategies as st

from zkconsumer.errors import InvalidNameError
from zkconsumer.layout import (is_legal_name, validate_broker_id, validate_consumer_id, validate_group,
                               validate_partition, validate_topic)

LEGAL_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
BAD_NAMES = ["", ".", "..", "../brokers", "a/b", "/", "x" * 250, "has space", "nul\x00", "caf\u00e9",
             "\u4e2d\u6587", "tab\t", "new\nline", "a:b", "a\\b", "emoji\U0001F600"]


@pytest.mark.parametrize("validate", [validate_group, validate_topic])
@pytest.mark.parametrize("bad", BAD_NAMES)
def test_group_and_topic_reject_bad_names(validate, bad):
    with pytest.raises(InvalidNameError) as info:
        validate(bad)
    assert info.value.name == bad


@pytest.mark.parametrize("validate", [validate_group, validate_topic])
@pytest.mark.parametrize("bad", [None, 1, b"group", ["g"]])
def test_group_and_topic_reject_non_strings(validate, bad):
    with pytest.raises(InvalidNameError):
        validate(bad)


@pytest.mark.parametrize("good", ["a", "orders", "my-group_1.x", "x" * 249, "...", ".a", "__consumer_offsets"])
def test_group_and_topic_accept_legal(good):
    assert validate_group(good) == good
    assert validate_topic(good) == good
    assert is_legal_name(good)


@given(st.text(alphabet=LEGAL_ALPHABET, min_size=1, max_size=249).filter(lambda s: s not in (".", "..")))
def test_legal_alphabet_always_accepted(name):
    assert validate_topic(name) == name


@given(st.text(min_size=1, max_size=60))
def test_accepted_names_are_safe_path_components(name):
    if is_legal_name(name):
        assert "/" not in name and name not in (".", "..") and name.isascii()
        assert all(c in LEGAL_ALPHABET for c in name)
    else:
        with pytest.raises(InvalidNameError):
            validate_group(name)


def test_error_message_names_kind_and_reason():
    with pytest.raises(InvalidNameError) as info:
        validate_group("../brokers")
    msg = str(info.value)
    assert "group id" in msg and "../brokers" in msg and "'/'" in msg


@pytest.mark.parametrize("good", [
    "mygroup_host1-1441925174996-4bd8d65c",
    "g_my.host.example.com-1-abcdef01",
    "g_host with space-1-00000000",          # hostnames are not restricted to Kafka's alphabet
    "g_h\u00f4te-1-12345678",
    "g_a:b",
    "...",
])
def test_consumer_id_accepts_hostname_forms(good):
    assert validate_consumer_id(good) == good


@pytest.mark.parametrize("bad", ["", ".", "..", "g_a/b", "../x", "/", "g\x00", "g\x01x", "g\x7f", "g\x85",
                                 "g\ud800", "g\ufff0", "x" * 1025, None, 5])
def test_consumer_id_rejects_unsafe(bad):
    with pytest.raises(InvalidNameError):
        validate_consumer_id(bad)


@pytest.mark.parametrize("value,expected", [(0, 0), (7, 7), ("0", 0), ("12", 12), (2 ** 31 - 1, 2 ** 31 - 1),
                                            ("2147483647", 2147483647)])
def test_partition_accepts(value, expected):
    assert validate_partition(value) == expected
    assert validate_broker_id(value) == expected


@pytest.mark.parametrize("bad", [-1, "-1", "01", "+1", " 1", "1 ", "", "1.0", 1.0, True, False, None, "x",
                                 "\u0661", 2 ** 31, "2147483648", "1_0", b"1"])
def test_partition_rejects(bad):
    with pytest.raises(InvalidNameError):
        validate_partition(bad)
    with pytest.raises(InvalidNameError):
        validate_broker_id(bad)


@given(st.integers(min_value=0, max_value=2 ** 31 - 1))
def test_partition_str_roundtrip(p):
    assert validate_partition(str(p)) == p
