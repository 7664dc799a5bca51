"""Topic filters for wildcard subscriptions: Scala ``kafka.consumer.TopicFilter`` (reference §3.9, §2.6).

``Whitelist(regex)`` allows topics whose *whole* name matches the regex (Java ``String.matches``);
``Blacklist(regex)`` allows topics that do not. Both refuse the internal topic ``__consumer_offsets`` unless
``exclude_internal_topics`` is false (``exclude.internal.topics``, §1).

The raw regex is normalised exactly as Scala does (property files may bring quotes)::

    rawRegex.trim.replace(',', '|').replace(" ", "")
            .replaceAll("^[\\"']+", "").replaceAll("[\\"']+$", "")

and the normalised string (``.regex``) is what a registration stores as its subscription key (§2.6).

Java vs Python regex syntax
---------------------------
The regex is written for ``java.util.regex``. It is compiled once, after a translation to Python ``re``
syntax, with ``re.ASCII`` (Java's ``\\d \\w \\s \\b`` and ``(?i)`` are ASCII-only by default):

Translated:
  * ``\\p{Lower} \\p{Upper} \\p{ASCII} \\p{Alpha} \\p{Digit} \\p{Alnum} \\p{Punct} \\p{Graph} \\p{Print}
    \\p{Blank} \\p{Cntrl} \\p{XDigit} \\p{Space}`` (and ``\\P{..}`` outside a class, ``\\p{IsX}`` spellings of
    these) become explicit ASCII classes;
  * ``\\Q...\\E`` quoting becomes escaped literals;
  * ``(?<name>...)`` becomes ``(?P<name>...)`` and ``\\k<name>`` becomes ``(?P=name)``;
  * ``\\z`` becomes ``\\Z``; Java's ``\\Z`` (end, before an optional final line terminator) becomes a lookahead;
  * ``\\h \\H \\v \\V \\R \\e \\cX \\x{h..h}`` and Java octal ``\\0ooo`` become their explicit equivalents;
  * inline flags in the middle of a pattern, ``a(?i)b``, which Java applies up to the end of the enclosing
    group, become a scoped group ``a(?i:b)`` (Python 3.11 rejects non-leading global flags);
  * ``|``, ``&`` and ``~`` inside a character class are escaped (literal in Java; Python warns about them).

Rejected with :class:`~zkconsumer.errors.ConfigError` (no faithful Python equivalent):
  * character-class union / intersection / nesting (``[a-c[x-z]]``, ``[a-z&&[^e]]``);
  * Unicode property classes other than the POSIX ones above (``\\p{L}``, ``\\p{IsLatin}``, ``\\p{javaLowerCase}``)
    and ``\\P{..}`` inside a class;
  * ``\\G``, ``\\X``, ``\\b{g}``, and the inline flags ``d``, ``u``, ``U``, ``c``;
  * a ``{`` that does not start a valid repetition ``{n}``, ``{n,}`` or ``{n,m}`` (Java: "Illegal repetition";
    Python would take it literally, and would read ``{,n}`` as ``{0,n}``).

Possessive quantifiers and atomic groups are native in Python 3.11. Not emulated (harmless for legal topic
names, which use only ``[a-zA-Z0-9._-]``): Java's ``.`` and ``$`` also treat ``\\r``, ``\\u0085``, ``\\u2028``,
``\\u2029`` as line terminators.
"""

import re

from .errors import ConfigError

INTERNAL_TOPICS = frozenset(["__consumer_offsets"])
WHITE_LIST = "white_list"
BLACK_LIST = "black_list"

_POSIX = {
    "Lower": "a-z", "Upper": "A-Z", "ASCII": "\\x00-\\x7f", "Alpha": "a-zA-Z", "Digit": "0-9",
    "Alnum": "a-zA-Z0-9", "Punct": "!-/:-@\\[-`{-~", "Graph": "!-~", "Print": " -~", "Blank": " \\t",
    "Cntrl": "\\x00-\\x1f\\x7f", "XDigit": "0-9a-fA-F", "Space": " \\t\\n\\x0b\\f\\r",
}
_HSPACE = " \\t\\xa0\\u1680\\u180e\\u2000-\\u200a\\u202f\\u205f\\u3000"
_VSPACE = "\\n\\x0b\\f\\r\\x85\\u2028\\u2029"
_REPETITION = re.compile(r"\{[0-9]+(,[0-9]*)?\}")
_JAVA_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")


def normalise_regex(raw):
    """Scala's normalisation of a filter regex (§3.9): trim, ',' -> '|', drop spaces, strip outer quotes."""
    if not isinstance(raw, str):
        raise ConfigError("topic filter", raw, "a regular expression string")
    regex = raw.strip().replace(",", "|").replace(" ", "")
    regex = re.sub(r"^[\"']+", "", regex)
    return re.sub(r"[\"']+$", "", regex)


class _Reject(Exception):
    pass


def _char_escape(cp):
    return "\\x%02x" % cp if cp < 0x100 else ("\\u%04x" % cp if cp < 0x10000 else "\\U%08x" % cp)


def _escape(pattern, i, in_class):
    """Translate the escape starting at pattern[i] == '\\'; return (python_text, next_index)."""
    if i + 1 >= len(pattern):
        raise _Reject("trailing backslash")
    c = pattern[i + 1]
    j = i + 2
    if c == "Q":
        end = pattern.find("\\E", j)
        lit = pattern[j:] if end < 0 else pattern[j:end]
        nxt = len(pattern) if end < 0 else end + 2
        if in_class:
            return "".join(_char_escape(ord(ch)) for ch in lit), nxt
        return re.escape(lit), nxt
    if c in "pP":
        if j < len(pattern) and pattern[j] == "{":
            end = pattern.find("}", j)
            if end < 0:
                raise _Reject("unclosed \\p{")
            name, j = pattern[j + 1:end], end + 1
        elif j < len(pattern):
            name, j = pattern[j], j + 1
        else:
            raise _Reject("incomplete \\p")
        key = name[2:] if name.startswith("Is") else name
        if key not in _POSIX:
            raise _Reject("unsupported character property \\%s{%s}" % (c, name))
        if in_class:
            if c == "P":
                raise _Reject("\\P{..} inside a character class")
            return _POSIX[key], j
        return ("[%s]" if c == "p" else "[^%s]") % _POSIX[key], j
    if c in "hHvV":
        body = _HSPACE if c in "hH" else _VSPACE
        if in_class:
            if c.isupper():
                raise _Reject("\\%s inside a character class" % c)
            return body, j
        return ("[%s]" if c.islower() else "[^%s]") % body, j
    if c == "R" and not in_class:
        return "(?:\\r\\n|[%s])" % _VSPACE, j
    if c == "e":
        return "\\x1b", j
    if c == "c":
        if j >= len(pattern):
            raise _Reject("incomplete \\c")
        return _char_escape(ord(pattern[j]) ^ 64), j + 1
    if c == "x" and j < len(pattern) and pattern[j] == "{":
        end = pattern.find("}", j)
        digits = pattern[j + 1:end] if end > 0 else ""
        if not re.fullmatch(r"[0-9a-fA-F]{1,8}", digits) or int(digits, 16) > 0x10FFFF:
            raise _Reject("bad \\x{...} escape")
        return _char_escape(int(digits, 16)), end + 1
    if c == "0":
        m = re.match(r"[0-3][0-7]{2}|[0-7]{1,2}", pattern[j:])
        if not m:
            raise _Reject("bad octal escape \\0")
        return _char_escape(int(m.group(0), 8)), j + m.end()
    if c == "z" and not in_class:
        return "\\Z", j
    if c == "Z" and not in_class:
        return "(?=(?:\\r\\n|[%s])?\\Z)" % _VSPACE, j
    if c == "k" and not in_class:
        m = re.match(r"<([a-zA-Z][a-zA-Z0-9]*)>", pattern[j:])
        if not m:
            raise _Reject("bad \\k<name>")
        return "(?P=%s)" % m.group(1), j + m.end()
    if c in "GX" or (c == "b" and pattern.startswith("{", j)):
        raise _Reject("unsupported escape \\%s" % c)
    return pattern[i:j], j


def _class(pattern, i):
    """Translate the character class starting at pattern[i] == '['; return (python_text, next_index)."""
    out = ["["]
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        out.append("^")
        j += 1
    first = True
    while j < len(pattern):
        c = pattern[j]
        if c == "]" and not first:
            out.append("]")
            return "".join(out), j + 1
        first = False
        if c == "\\":
            text, j = _escape(pattern, j, True)
            out.append(text)
        elif c == "[":
            raise _Reject("nested or union character classes are not supported")
        elif c == "&" and pattern.startswith("&&", j):
            raise _Reject("character class intersection (&&) is not supported")
        elif c in "|&~":
            out.append("\\" + c)
            j += 1
        else:
            out.append(c)
            j += 1
    raise _Reject("unclosed character class")


def translate_java_regex(pattern):
    """Translate a ``java.util.regex`` pattern to Python ``re`` syntax (see the module docstring)."""
    out = []
    # One entry per open group: number of scoped-flag groups opened inside it that must close with it.
    pending = [0]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            text, i = _escape(pattern, i, False)
            out.append(text)
        elif c == "[":
            text, i = _class(pattern, i)
            out.append(text)
        elif c == "{":
            m = _REPETITION.match(pattern, i)
            if not m:
                raise _Reject("illegal repetition at index %d" % i)
            out.append(m.group(0))
            i = m.end()
        elif c == "(":
            m = _JAVA_FLAGS.match(pattern, i)
            if pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
                out.append("(?P<")
                i += 3
                pending.append(0)
            elif m:
                on, off, end = m.group(1), m.group(2) or "", m.group(3)
                bad = set(on + off) - set("imsx")
                if bad:
                    raise _Reject("unsupported inline flag(s) %s" % "".join(sorted(bad)))
                if not on and not off:
                    if end == ")":
                        i = m.end()       # "(?)" is a no-op in Java
                        continue
                    out.append("(?:")
                    pending.append(0)
                else:
                    out.append("(?%s%s:" % (on, "-" + off if off else ""))
                    if end == ")":
                        pending[-1] += 1   # closes with the enclosing group
                    else:
                        pending.append(0)
                i = m.end()
            else:
                out.append("(")
                i += 1
                pending.append(0)
        elif c == ")":
            out.append(")" * pending.pop() + ")")
            if not pending:
                raise _Reject("unbalanced parenthesis")
            i += 1
        else:
            out.append(c)
            i += 1
    out.append(")" * pending[-1])
    return "".join(out)


def compile_java_regex(regex, key="topic filter"):
    """Compile a Java regex (translated) for full matching; raise ConfigError if Java or Python would reject it."""
    try:
        return re.compile(translate_java_regex(regex), re.ASCII)
    except (_Reject, re.error, OverflowError, RecursionError) as exc:
        raise ConfigError(key, regex, "a valid regular expression", detail=str(exc)) from None


def is_internal_topic(topic):
    """``Topic.InternalTopics.contains(topic)`` (0.8.2) / ``Topic.isInternal`` (1.1.1): only __consumer_offsets."""
    return topic in INTERNAL_TOPICS


class TopicFilter:
    """Base of Whitelist / Blacklist (§3.9). ``regex`` is the normalised string, compiled once."""

    pattern = None

    def __init__(self, raw_regex):
        self.raw_regex = raw_regex
        self.regex = normalise_regex(raw_regex)
        self._compiled = compile_java_regex(self.regex)

    def matches(self, topic):
        """Java ``topic.matches(regex)``: the regex must match the whole name."""
        return self._compiled.fullmatch(topic) is not None

    def is_topic_allowed(self, topic, exclude_internal_topics=True):
        raise NotImplementedError

    def __eq__(self, other):
        return type(self) is type(other) and self.regex == other.regex

    def __hash__(self):
        return hash((type(self).__name__, self.regex))

    def __repr__(self):
        return "%s(%r)" % (type(self).__name__, self.regex)

    def __str__(self):
        return self.regex


class Whitelist(TopicFilter):
    """Allow topics whose whole name matches; internal topics only if exclude_internal_topics is false."""

    pattern = WHITE_LIST

    def is_topic_allowed(self, topic, exclude_internal_topics=True):
        return self.matches(topic) and not (is_internal_topic(topic) and exclude_internal_topics)


class Blacklist(TopicFilter):
    """Allow topics whose whole name does not match; internal topics only if exclude_internal_topics is false."""

    pattern = BLACK_LIST

    def is_topic_allowed(self, topic, exclude_internal_topics=True):
        return (not self.matches(topic)) and not (is_internal_topic(topic) and exclude_internal_topics)


def topic_filter_for(pattern, regex):
    """Rebuild the filter of a wildcard registration: pattern "white_list" -> Whitelist, "black_list" -> Blacklist."""
    if pattern == WHITE_LIST:
        return Whitelist(regex)
    if pattern == BLACK_LIST:
        return Blacklist(regex)
    raise ConfigError("topic filter pattern", pattern, "%r or %r" % (WHITE_LIST, BLACK_LIST))
