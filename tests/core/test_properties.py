"""Tests for zkconsumer.core.properties: java.util.Properties.load/store semantics (Kafka's ConsumerConfig.scala)."""

import pytest
from hypothesis import given, settings, strategies as st

from zkconsumer.errors import PropertiesSyntaxError
from zkconsumer.core.properties import (dump_properties, load_properties, parse_properties,
                                        parse_property_override)


@pytest.mark.parametrize("line", [
    "key=value", "key:value", "key value", "key = value", "key : value", "key   value",
    "key\t=\tvalue", "  key=value", "\tkey\f:value", "key\fvalue",
])
def test_separator_forms(line):
    assert parse_properties(line + "\n") == {"key": "value"}


def test_separator_edge_cases():
    # only one '=' or ':' is consumed after whitespace; the next is part of the value
    assert parse_properties("a = = b") == {"a": "= b"}
    assert parse_properties("a==b") == {"a": "=b"}
    assert parse_properties("a:=b") == {"a": "=b"}
    assert parse_properties("a =:b") == {"a": ":b"}
    assert parse_properties("a b c") == {"a": "b c"}
    # key only, key with separator but no value, empty key
    assert parse_properties("lonely") == {"lonely": ""}
    assert parse_properties("k=") == {"k": ""}
    assert parse_properties("k :  ") == {"k": ""}
    assert parse_properties("=v") == {"": "v"}
    # trailing whitespace of the value is kept
    assert parse_properties("k=v  \t") == {"k": "v  \t"}
    # only space, tab and form feed are whitespace
    assert parse_properties("a\x0bb=c") == {"a\x0bb": "c"}


def test_escaped_separators_in_key():
    assert parse_properties(r"a\=b=c") == {"a=b": "c"}
    assert parse_properties(r"a\:b:c") == {"a:b": "c"}
    assert parse_properties(r"a\ b c") == {"a b": "c"}
    assert parse_properties(r"a\\=b") == {"a\\": "b"}


def test_comments_and_blank_lines():
    text = "# comment\n! bang comment\n   # indented\n\n   \n\t\f\na=1\n#b=2\nc=3 # not a comment\n"
    assert parse_properties(text) == {"a": "1", "c": "3 # not a comment"}
    # a backslash at the end of a comment does not continue it
    assert parse_properties("# comment \\\na=1") == {"a": "1"}
    # comment at EOF without newline
    assert parse_properties("a=1\n# end") == {"a": "1"}
    # '#' after a continuation is literal
    assert parse_properties("a=1\\\n  #2") == {"a": "1#2"}


def test_continuations():
    assert parse_properties("a=one\\\n    two\\\n\tthree\nb=2") == {"a": "onetwothree", "b": "2"}
    assert parse_properties("key\\\n  =value") == {"key": "value"}
    assert parse_properties("fruits apple, \\\r\n   banana\r\nx=y") == {"fruits": "apple, banana", "x": "y"}
    assert parse_properties("a=1\\\r   2\rb=3") == {"a": "12", "b": "3"}
    # backslash at EOF is dropped
    assert parse_properties("a=1\\") == {"a": "1"}
    assert parse_properties("a=1\\\n") == {"a": "1"}


def test_even_backslashes_do_not_continue():
    assert parse_properties("a=x\\\\\nb=y") == {"a": "x\\", "b": "y"}
    assert parse_properties("a=x\\\\\\\\\nb=y") == {"a": "x\\\\", "b": "y"}
    # odd: 3 backslashes = one literal backslash + continuation
    assert parse_properties("a=x\\\\\\\n  z\nb=y") == {"a": "x\\z", "b": "y"}


def test_line_endings():
    assert parse_properties("a=1\r\nb=2\rc=3\n") == {"a": "1", "b": "2", "c": "3"}


def test_escapes():
    assert parse_properties(r"k=\t\n\r\f\\\q\#\ x") == {"k": "\t\n\r\f\\q# x"}
    assert parse_properties(r"k=\u0041\u00e9\u00E9") == {"k": "A\u00e9\u00e9"}
    assert parse_properties(r"\u006b\u0065\u0079=v") == {"key": "v"}
    # a surrogate pair written by Java's store() is one code point
    assert parse_properties(r"k=\uD83D\uDE00") == {"k": "\U0001F600"}
    assert parse_properties(r"k=\uD83D") == {"k": "\ud83d"}
    # non-ASCII written raw
    assert parse_properties("ключ=значение ✓") == {"ключ": "значение ✓"}


@pytest.mark.parametrize("text,lineno", [
    ("k=\\u12", 1), ("a=1\n\nk=\\u12G4", 3), ("a=1\nk\\uzzzz=v", 2), ("# c\nk=\\u", 2),
    ("a=1\nk=ok\\\n   \\u00", 2),
])
def test_malformed_unicode_escape(text, lineno):
    with pytest.raises(PropertiesSyntaxError, match=r"line %d\b" % lineno):
        parse_properties(text)


def test_duplicates_later_wins_and_order_preserved():
    d = parse_properties("b=1\na=2\nb=3\nc=4")
    assert d == {"b": "3", "a": "2", "c": "4"}
    assert list(d) == ["b", "a", "c"]


def test_load_properties_utf8_and_latin1(tmp_path):
    p = tmp_path / "c.properties"
    p.write_bytes("group.id=g\nname=caf\u00e9\n".encode("utf-8"))
    assert load_properties(p) == {"group.id": "g", "name": "caf\u00e9"}
    p.write_bytes("name=caf\u00e9\n".encode("latin-1"))  # not valid UTF-8
    assert load_properties(str(p)) == {"name": "caf\u00e9"}
    p.write_bytes(b"\xef\xbb\xbfa=1\n")  # BOM
    assert load_properties(p) == {"a": "1"}
    p.write_text("a=\\u12\n")
    with pytest.raises(PropertiesSyntaxError, match="c.properties.*line 1"):
        load_properties(p)


def test_parse_property_override():
    assert parse_property_override("group.id=g") == ("group.id", "g")
    assert parse_property_override(" a.b =x=y") == ("a.b", "x=y")
    assert parse_property_override("k=") == ("k", "")
    with pytest.raises(PropertiesSyntaxError, match="'novalue'"):
        parse_property_override("novalue")
    with pytest.raises(PropertiesSyntaxError, match="' =v'"):
        parse_property_override(" =v")


def test_dump_matches_java_store_escaping():
    text = dump_properties({" k y": " v #!=:\\ x", "é": "\U0001F600\t"})
    assert text == "\\ k\\ y=\\ v \\#\\!\\=\\:\\\\ x\n\\u00E9=\\uD83D\\uDE00\\t\n"
    assert dump_properties({"a": "1"}, comments="hello\nworld") == "#hello\n#world\na=1\n"
    assert text.isascii()


_PRINTABLE = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E))


@given(st.dictionaries(_PRINTABLE, _PRINTABLE))
def test_roundtrip_printable(d):
    assert parse_properties(dump_properties(d)) == d


@given(st.dictionaries(st.text(), st.text()))
def test_roundtrip_unicode(d):
    out = parse_properties(dump_properties(d))
    assert out == d
    assert list(out) == list(d)


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from(list(" \t\f\r\n\\=:#!uU0aFgkv\u00e9\U0001F600"))) | st.text())
def test_any_text_parses_or_raises_syntax_error(text):
    try:
        result = parse_properties(text)
    except PropertiesSyntaxError:
        return
    assert isinstance(result, dict)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in result.items())
