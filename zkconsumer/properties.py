"""A faithful, pure-Python reader and writer for Java ``.properties`` text.

The old consumer is configured from ``java.util.Properties`` (Kafka 1.1.1 ``ConsumerConfig`` takes
``java.util.Properties`` and reads them through ``VerifiableProperties``), so files written for the Scala
``ZookeeperConsumerConnector`` must mean exactly the same thing here.  This module ports the
JDK 11+ ``Properties.LineReader.readLine`` / ``load0`` / ``loadConvert`` and ``saveConvert``
logic character for character:

* natural lines end in ``\\n``, ``\\r`` or ``\\r\\n``; leading ``' '``, ``'\\t'``, ``'\\f'`` are skipped;
* a logical line whose first non-blank character is ``#`` or ``!`` is a comment (a trailing
  backslash on a comment line does not continue it); blank lines are ignored;
* a line ending in an odd number of backslashes continues on the next natural line, whose
  leading whitespace is dropped; an even number is literal backslashes;
* the key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace around the
  separator (and at most one ``=``/``:`` after whitespace) is skipped; a key alone has value ``""``;
* escapes: ``\\t \\n \\r \\f \\uXXXX``, and ``\\<other>`` is ``<other>``; a malformed ``\\u``
  escape raises :class:`PropertiesSyntaxError` naming the line;
* later duplicate keys win; file order (of first appearance) is preserved.

Java strings are UTF-16: ``\\uD83D\\uDE00`` is one character.  Escaped surrogate pairs are therefore
combined into one code point; lone surrogates are kept as they are.
"""

from __future__ import annotations

import os
from typing import Dict, Iterator, List, Mapping, Optional, Tuple, Union

from .errors import PropertiesSyntaxError

__all__ = ["parse_properties", "load_properties", "parse_property_override", "dump_properties"]

# the only whitespace Java's Properties knows
_WS = " \t\f"
_HEX = "0123456789ABCDEF"


def _logical_lines(text: str) -> Iterator[Tuple[int, str]]:
    """Yield ``(first natural line number, logical line)`` exactly as JDK ``LineReader.readLine``."""
    n = len(text)
    i = 0
    lineno = 1
    while True:
        buf: List[str] = []
        skip_ws = True
        appended_begin = False
        preceding_bs = False
        start = lineno
        while True:
            # EOF
            if i >= n:
                if not buf:
                    return
                if preceding_bs:
                    buf.pop()
                yield start, "".join(buf)
                return
            c = text[i]
            i += 1
            if c == "\n" or (c == "\r" and (i >= n or text[i] != "\n")):
                lineno += 1
            if skip_ws:
                if c in _WS:
                    continue
                if not appended_begin and (c == "\r" or c == "\n"):
                    continue
                skip_ws = False
                appended_begin = False
            if not buf and (c == "#" or c == "!"):
                # Comment: consume the rest of the natural line including its terminator.
                while i < n:
                    c = text[i]
                    i += 1
                    if c == "\n" or c == "\r":
                        if c == "\n" or i >= n or text[i] != "\n":
                            lineno += 1
                        break
                else:
                    return
                skip_ws = True
                continue
            if c != "\n" and c != "\r":
                if not buf:
                    start = lineno
                buf.append(c)
                preceding_bs = (not preceding_bs) if c == "\\" else False
                continue
            # End of a natural line.
            if not buf:
                skip_ws = True
                continue
            if i >= n:
                if preceding_bs:
                    buf.pop()
                yield start, "".join(buf)
                return
            if preceding_bs:
                # the continuation backslash is not part of the line
                buf.pop()
                skip_ws = True
                appended_begin = True
                preceding_bs = False
                if c == "\r":
                    if i >= n:
                        yield start, "".join(buf)
                        return
                    if text[i] == "\n":
                        i += 1
                        lineno += 1
            else:
                yield start, "".join(buf)
                break


def _join_surrogates(s: str) -> str:
    """Combine UTF-16 surrogate pairs (as Java would see them) into single code points."""
    if not any("\ud800" <= ch <= "\udfff" for ch in s):
        return s
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _unescape(s: str, lineno: int) -> str:
    """Port of ``Properties.loadConvert``."""
    if "\\" not in s:
        return s
    out = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        # cannot happen after _logical_lines, but never crash
        if i >= n:
            break
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i:i + 4]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesSyntaxError(
                    "line %d: malformed \\uxxxx escape %r (need exactly 4 hex digits after \\u)"
                    % (lineno, "\\u" + digits))
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append({"t": "\t", "r": "\r", "n": "\n", "f": "\f"}.get(c, c))
    return _join_surrogates("".join(out))


def _split_key_value(line: str) -> Tuple[str, str]:
    """Port of the key/separator/value scan in ``Properties.load0``."""
    limit = len(line)
    key_len = 0
    value_start = limit
    has_sep = False
    preceding_bs = False
    while key_len < limit:
        c = line[key_len]
        if (c == "=" or c == ":") and not preceding_bs:
            value_start = key_len + 1
            has_sep = True
            break
        if c in _WS and not preceding_bs:
            value_start = key_len + 1
            break
        preceding_bs = (not preceding_bs) if c == "\\" else False
        key_len += 1
    while value_start < limit:
        c = line[value_start]
        if c not in _WS:
            if not has_sep and (c == "=" or c == ":"):
                has_sep = True
            else:
                break
        value_start += 1
    return line[:key_len], line[value_start:]


def parse_properties(text: str) -> Dict[str, str]:
    """Parse ``.properties`` text exactly as ``java.util.Properties.load(Reader)`` does.

    Returns a dict in file order (a later duplicate key replaces the value but keeps the
    first position).  Raises :class:`PropertiesSyntaxError` only for a malformed ``\\uXXXX``.
    """
    result: Dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        result[_unescape(raw_key, lineno)] = _unescape(raw_value, lineno)
    return result


def load_properties(path: Union[str, os.PathLike[str]]) -> Dict[str, str]:
    """Read a ``.properties`` file.

    Encoding: the bytes are decoded as UTF-8 (what Java 9+ resource bundles and most editors
    produce); if they are not valid UTF-8 they are decoded as ISO-8859-1 (what
    ``Properties.load(InputStream)`` assumes), which can decode any byte sequence.
    ``\\uXXXX`` escapes work with either encoding.  A leading UTF-8 BOM is dropped.
    Syntax errors are re-raised with the path prepended.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        return parse_properties(text)
    except PropertiesSyntaxError as e:
        raise PropertiesSyntaxError("%s: %s" % (os.fspath(path), e)) from None


def parse_property_override(arg: str) -> Tuple[str, str]:
    """Split a CLI ``--property key=value`` argument at its first ``=``.

    The key has surrounding whitespace removed; the value is kept verbatim (it may contain
    further ``=``, and may be empty).  No escape processing is done.  Raises
    :class:`PropertiesSyntaxError` naming the argument if there is no ``=`` or the key is empty.
    """
    if "=" not in arg:
        raise PropertiesSyntaxError(
            "invalid --property argument %r: expected key=value (no '=' found)" % (arg,))
    key, value = arg.split("=", 1)
    key = key.strip()
    if not key:
        raise PropertiesSyntaxError(
            "invalid --property argument %r: expected key=value (the key is empty)" % (arg,))
    return key, value


def _escape(s: str, escape_space: bool) -> str:
    """Port of ``Properties.saveConvert(s, escapeSpace, escapeUnicode=true)``."""
    out = []
    for x, ch in enumerate(s):
        o = ord(ch)
        if 61 < o < 127:
            out.append("\\\\" if ch == "\\" else ch)
        elif ch == " ":
            out.append("\\ " if (x == 0 or escape_space) else " ")
        elif ch in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[ch])
        elif ch in "=:#!":
            out.append("\\" + ch)
        elif o < 0x20 or o > 0x7E:
            units = ch.encode("utf-16-be", "surrogatepass")
            for k in range(0, len(units), 2):
                u = (units[k] << 8) | units[k + 1]
                out.append("\\u" + "".join(_HEX[(u >> sh) & 0xF] for sh in (12, 8, 4, 0)))
        else:
            out.append(ch)
    return "".join(out)


def dump_properties(props: Mapping[str, str], comments: Optional[str] = None) -> str:
    """Write ``props`` as ``.properties`` text, escaping as ``Properties.store(OutputStream)`` does.

    Output is pure ASCII (``\\uXXXX`` for everything outside 0x20..0x7E, UTF-16 pairs for astral
    characters), one ``key=value`` per line in mapping order, ``\\n`` line ends.  No date comment
    is written (deterministic output); ``comments`` lines, if given, are written first as ``#``
    lines.  ``parse_properties(dump_properties(d)) == d`` for every dict of str, except strings
    holding two separate surrogate code points that form a valid pair (Java cannot tell those
    apart from the combined character).
    """
    lines = []
    if comments is not None:
        for c in comments.splitlines() or [""]:
            lines.append("#" + "".join(ch if 0x20 <= ord(ch) <= 0x7E else _escape(ch, False)
                                       for ch in c))
    for k, v in props.items():
        lines.append("%s=%s" % (_escape(str(k), True), _escape(str(v), False)))
    return "".join(line + "\n" for line in lines)
