"""Java regular expressions (``java.util.regex``, Java 17) evaluated in Python: the topic filters of wildcard
subscriptions (:mod:`zkconsumer.topic_filter`) and the Spark source's ``subscribePattern``.

The regex is written for ``java.util.regex`` (Java 17), and JVM members of the group register such regexes too, so
every member must match them as Java does. It is translated once to the syntax of the ``regex`` package (version 1
behaviour: nested sets and set intersection) and compiled; ``tests/test_topic_filter_java.py`` checks the result
against ``java.util.regex.Pattern`` itself over a corpus of patterns and topic names. The translation:

  * case-insensitivity as Java's: ``(?i)`` folds ASCII letters only, ``(?iu)`` (or ``(?U)``) folds Unicode letters
    one character at a time (no ``ß`` = ``ss``); ``(?i)\\p{Lu}`` matches any cased letter, as in Java;
  * ``\\d \\w \\s \\b`` and the POSIX classes ``\\p{Alpha}`` .. ``\\p{XDigit}`` are ASCII, Unicode under ``(?U)``;
    ``\\b`` uses Java 17's own word test (letters, digits, ``_``);
  * every ``\\p{..}``/``\\P{..}`` form Java knows: general categories (``Lu``, ``L``, ``IsL``, ``gc=Nd``),
    scripts (``IsLatin``, ``sc=Greek``), blocks (``InGreek``, ``blk=..``), binary properties (``IsAlphabetic``,
    ``IsWhite_Space`` ..), the ``java*`` classes (``javaLowerCase`` ..), ``all``, ``L1``, ``LD``;
  * character classes with Java's union (``[a-c[x-z]]``), intersection (``[a-z&&[^e]]``) and a ``^`` that negates
    the whole class;
  * ``\\Q..\\E``, ``\\h \\H \\v \\V \\R \\e \\a \\cX \\x{..} \\0ooo \\N{name}``, Java's ``\\Z`` and ``$`` (before a
    final line terminator), ``.`` (not a line terminator), back references (``(a)\\11`` is ``\\1`` then ``1``; a
    group that does not exist never matches), named groups and ``\\k<name>``;
  * inline flags scoped as in Java (to the end of the enclosing group); ``(?x)`` comments and white space,
    ``(?s)``, ``(?m)``, ``(?d)``;
  * possessive quantifiers and atomic groups are native.

Rejected with :class:`~zkconsumer.errors.ConfigError`: everything Java rejects (as far as the corpus shows), and
these constructs Java accepts but zkconsumer does not evaluate (a member registering one is assigned nothing, see
README "Wildcard subscriptions"): ``\\b{g}`` (grapheme boundaries), a repetition of a repetition
(``a{1}{2}``) and ``(?c)`` (canonical equivalence). Unicode data is the ``regex`` package's, Java 17's is Unicode 13: characters
assigned since then may differ (no legal topic name contains one).
"""

import unicodedata
from typing import AbstractSet, List, NoReturn, Optional, Protocol, Set, Tuple, Union

import regex

from .errors import ConfigError

__all__ = ["CompiledJavaRegex", "compile_java_regex", "translate_java_regex"]

_JAVA_WHITESPACE = " \t\n\r"


class CompiledJavaRegex(Protocol):
    """What is used of a compiled ``regex`` package pattern (the package has no type information)."""

    def fullmatch(self, string: str) -> Optional[object]: ...


class _Reject(Exception):
    pass


# --- character sets, as bodies of a regex-package set ("[" + body + "]") -----------------------------------------

def _ch(cp: int) -> str:
    """One code point, escaped for use anywhere (inside or outside a set)."""
    c = chr(cp)
    if c.isascii() and c.isalnum():
        return c
    return "\\x%02x" % cp if cp < 0x100 else ("\\u%04x" % cp if cp < 0x10000 else "\\U%08x" % cp)


_ASCII_POSIX = {
    "lower": "a-z", "upper": "A-Z", "ascii": "\\x00-\\x7f", "alpha": "a-zA-Z", "digit": "0-9",
    "alnum": "a-zA-Z0-9", "punct": "!-/:-@\\x5b-`{-~", "graph": "!-~", "print": " -~", "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f", "xdigit": "0-9a-fA-F", "space": " \\t\\n\\x0b\\f\\r",
}
_CASED = "\\p{Lu}\\p{Ll}\\p{Lt}"
_WORD_U = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}"
# Java's binary properties (Pattern: \p{IsX}, and the POSIX names under UNICODE_CHARACTER_CLASS)
_UNICODE_PROPS = {
    "alphabetic": "\\p{Alphabetic}", "assigned": "\\P{Cn}", "control": "\\p{Cc}", "hexdigit": "\\p{Nd}\\p{Hex_Digit}",
    "hex_digit": "\\p{Nd}\\p{Hex_Digit}", "ideographic": "\\p{Ideographic}", "joincontrol": "\\p{Join_Control}",
    "join_control": "\\p{Join_Control}", "letter": "\\p{L}", "lowercase": "\\p{Lowercase}",
    "noncharactercodepoint": "\\p{Noncharacter_Code_Point}", "noncharacter_code_point":
    "\\p{Noncharacter_Code_Point}", "titlecase": "\\p{Lt}", "punctuation": "\\p{P}", "uppercase": "\\p{Uppercase}",
    "whitespace": "\\p{White_Space}", "white_space": "\\p{White_Space}", "word": _WORD_U,
}
_UNICODE_POSIX = {
    "alpha": "\\p{Alphabetic}", "lower": "\\p{Lowercase}", "upper": "\\p{Uppercase}", "space": "\\p{White_Space}",
    "punct": "\\p{P}", "xdigit": "\\p{Nd}\\p{Hex_Digit}", "alnum": "\\p{Alphabetic}\\p{Nd}", "cntrl": "\\p{Cc}",
    "digit": "\\p{Nd}", "blank": "\\p{Zs}\\t", "graph": "[^\\p{White_Space}\\p{Cc}\\p{Cs}\\p{Cn}]",
    "print": "[[^\\p{White_Space}\\p{Cc}\\p{Cs}\\p{Cn}]\\p{Zs}\\t--\\p{Cc}]",
}
_CASED_PROPS = {"lowercase", "uppercase", "titlecase", "lower", "upper"}
_CATEGORIES = {"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Me", "Mc", "Nd", "Nl", "No", "Zs", "Zl", "Zp", "Cc", "Cf",
               "Co", "Cs", "Pd", "Ps", "Pe", "Pc", "Po", "Sm", "Sc", "Sk", "So", "Pi", "Pf", "L", "M", "N", "Z", "C",
               "P", "S", "LC"}
# Character.isXxx of the java* classes
_JAVA_CLASSES = {
    "javalowercase": "\\p{Lowercase}", "javauppercase": "\\p{Uppercase}", "javaalphabetic": "\\p{Alphabetic}",
    "javaideographic": "\\p{Ideographic}", "javatitlecase": "\\p{Lt}", "javadigit": "\\p{Nd}",
    "javadefined": "\\P{Cn}", "javaletter": "\\p{L}", "javaletterordigit": "\\p{L}\\p{Nd}",
    "javajavaidentifierstart": "\\p{L}\\p{Nl}\\p{Sc}\\p{Pc}",
    "javajavaidentifierpart": "\\p{L}\\p{Nl}\\p{Sc}\\p{Pc}\\p{Nd}\\p{Mn}\\p{Mc}\\x00-\\x08\\x0e-\\x1b\\x7f-\\x9f\\p{Cf}",
    "javaunicodeidentifierstart": "\\p{ID_Start}", "javaunicodeidentifierpart":
    "\\p{ID_Continue}\\x00-\\x08\\x0e-\\x1b\\x7f-\\x9f\\p{Cf}",
    "javaidentifierignorable": "\\x00-\\x08\\x0e-\\x1b\\x7f-\\x9f\\p{Cf}", "javaspacechar": "\\p{Z}",
    "javawhitespace": "[\\p{Z}--\\xa0\\u2007\\u202f]\\t\\n\\x0b\\f\\r\\x1c-\\x1f", "javaisocontrol":
    "\\x00-\\x1f\\x7f-\\x9f", "javamirrored": "\\p{Bidi_Mirrored}",
}
_JAVA_CASED_CLASSES = {"javalowercase", "javauppercase", "javatitlecase"}


def _checked(body: str) -> str:
    """Make sure the regex package knows the set (a script or block name Java knows but it does not, or the
    reverse, is a rejection, not a wrong answer)."""
    try:
        regex.compile("[%s]" % body, regex.V1)
    except regex.error as exc:
        raise _Reject("unknown character property: %s" % exc) from None
    return body


def _property_body(name: str, flags: AbstractSet[str]) -> str:
    """Set body of Java's \\p{name} under the given flags."""
    ci, uc = "i" in flags, "U" in flags
    if "=" in name:
        key, _, value = name.partition("=")
        key = key.lower()
        if key in ("sc", "script"):
            return _checked("\\p{Script=%s}" % value)
        if key in ("blk", "block"):
            return _checked("\\p{Block=%s}" % value)
        if key in ("gc", "general_category"):
            return _category_body(value, ci)
        raise _Reject("unknown Unicode property %s" % key)
    if name.startswith("In"):
        return _checked("\\p{Block=%s}" % name[2:])
    if name.startswith("Is"):
        bare = name[2:]
        key = bare.lower()
        if key in _UNICODE_PROPS or key in _UNICODE_POSIX:
            if ci and key in _CASED_PROPS:
                return _CASED
            return _UNICODE_PROPS.get(key) or _UNICODE_POSIX[key]
        try:
            return _named_class(bare, ci, uc)
        except _Reject:
            return _checked("\\p{Script=%s}" % bare)
    return _named_class(name, ci, uc)


def _category_body(name: str, ci: bool) -> str:
    if name not in _CATEGORIES:
        raise _Reject("unknown general category %s" % name)
    if ci and name in ("Lu", "Ll", "Lt"):
        return _CASED
    return "\\p{%s}" % name


def _named_class(name: str, ci: bool, uc: bool) -> str:
    """Java's CharPredicates.forProperty (plus the POSIX names under UNICODE_CHARACTER_CLASS)."""
    key = name.lower()
    if key in _ASCII_POSIX and name[0].isupper() and name[1:].islower() or name in ("ASCII", "XDigit"):
        if uc and key in _UNICODE_POSIX:
            return _CASED if ci and key in _CASED_PROPS else _UNICODE_POSIX[key]
        if ci and key in ("lower", "upper"):
            return "a-zA-Z"
        return _ASCII_POSIX[key]
    if name in _CATEGORIES:
        return _category_body(name, ci)
    if name == "LD":
        return "\\p{L}\\p{Nd}"
    if name == "L1":
        return "\\x00-\\xff"
    if name == "all":
        return "\\x00-\\U0010ffff"
    if name.startswith("java") and key in _JAVA_CLASSES:
        if ci and key in _JAVA_CASED_CLASSES:
            return _CASED
        return _JAVA_CLASSES[key]
    raise _Reject("unknown character property \\p{%s}" % name)


def _fold_ascii(lo: int, hi: int) -> str:
    """The ASCII-letter case counterparts of the code point range lo..hi, as set items."""
    out = []
    for a, b, delta in ((0x41, 0x5A, 0x20), (0x61, 0x7A, -0x20)):
        s, e = max(lo, a), min(hi, b)
        if s <= e:
            out.append("%s-%s" % (_ch(s + delta), _ch(e + delta)))
    return "".join(out)


_VSPACE = "\\n\\x0b\\f\\r\\x85\\u2028\\u2029"
_HSPACE = " \\t\\xa0\\u1680\\u180e\\u2000-\\u200a\\u202f\\u205f\\u3000"
_LINE_TERMINATORS = "\\n\\r\\x85\\u2028\\u2029"
_CONTROL_ESCAPES = {"t": 0x09, "n": 0x0A, "r": 0x0D, "f": 0x0C, "a": 0x07, "e": 0x1B}
_ALLOWED_FLAGS = set("idmsuxU")


class _Translator:
    """A recursive-descent reading of a java.util.regex pattern, writing the equivalent regex-package pattern."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        # capturing groups opened so far
        self.groups = 0
        self.names: Set[str] = set()

    # -- helpers ------------------------------------------------------------------------------------------------
    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def error(self, what: str) -> NoReturn:
        raise _Reject("%s near index %d" % (what, self.i))

    def skip_comments(self, flags: AbstractSet[str]) -> None:
        if "x" not in flags:
            return
        while self.i < len(self.p):
            c = self.p[self.i]
            if c in _JAVA_WHITESPACE + "\x0b\f":
                self.i += 1
            elif c == "#":
                while self.i < len(self.p) and self.p[self.i] not in "\n\r\x85\u2028\u2029":
                    self.i += 1
            else:
                return

    # -- the expression -----------------------------------------------------------------------------------------
    def translate(self) -> str:
        out = self.alternation(set())
        if self.i < len(self.p):
            self.error("unmatched closing ')'")
        return out

    def alternation(self, flags: AbstractSet[str]) -> str:
        """Alternatives up to ')' or the end; ``flags`` is the set in effect (inline flags change a copy)."""
        flags = set(flags)
        parts: List[str] = []
        seq: List[str] = []
        while True:
            self.skip_comments(flags)
            c = self.peek()
            if c == "" or c == ")":
                parts.append("".join(seq))
                return "|".join(parts)
            if c == "|":
                self.i += 1
                parts.append("".join(seq))
                seq = []
                continue
            atom = self.atom(flags)
            if atom is None:
                # an inline flag group (?i)
                continue
            self.skip_comments(flags)
            seq.append(atom + self.quantifier(flags))

    def quantifier(self, flags: AbstractSet[str]) -> str:
        c = self.peek()
        if c in ("*", "+", "?"):
            q = c
            self.i += 1
        elif c == "{":
            m = regex.compile(r"\{([0-9]+)(,([0-9]*))?\}").match(self.p, self.i)
            if not m:
                self.error("illegal repetition")
            lo, hi = int(m.group(1)), m.group(3)
            if hi and int(hi) < lo:
                self.error("illegal repetition range")
            if lo > 0x7FFFFFFF or (hi and int(hi) > 0x7FFFFFFF):
                self.error("repetition too large")
            q = m.group(0)
            self.i = m.end()
        else:
            return ""
        if self.peek() in ("?", "+"):
            q += self.peek()
            self.i += 1
        self.skip_comments(flags)
        if self.peek() in ("*", "+", "?"):
            self.error("dangling meta character %r" % self.peek())
        if self.peek() == "{" and regex.match(r"\{[0-9]", self.p[self.i:]):
            raise _Reject("a repetition of a repetition (%s%s..) is not supported" % (q, self.peek()))
        return q

    def atom(self, flags: Set[str]) -> Optional[str]:
        c = self.peek()
        if c == "(":
            return self.group(flags)
        if c == "[":
            return self.wrap_case(self.char_class(flags), flags)
        if c == "\\":
            return self.escape(flags)
        if c in ("*", "+", "?"):
            self.error("dangling meta character %r" % c)
        if c == "{":
            self.error("illegal repetition")
        self.i += 1
        if c == ".":
            if "s" in flags:
                return "(?s:.)"
            return "[^\\n]" if "d" in flags else "[^%s]" % _LINE_TERMINATORS
        if c == "^":
            if "m" in flags:
                terms = "\\n" if "d" in flags else _LINE_TERMINATORS
                return "(?:\\A|(?<=[%s])(?!\\Z))" % terms
            return "\\A"
        if c == "$":
            terms = "\\n" if "d" in flags else _LINE_TERMINATORS
            if "m" in flags:
                return "(?=[%s]|\\Z)" % terms
            return "(?=(?:\\r\\n|[%s])?\\Z)" % terms if "d" not in flags else "(?=\\n?\\Z)"
        return self.literal(ord(c), flags)

    def literal(self, cp: int, flags: AbstractSet[str]) -> str:
        if "i" not in flags:
            return _ch(cp)
        if "u" in flags or "U" in flags:
            return "(?i-f:%s)" % _ch(cp)
        extra = _fold_ascii(cp, cp)
        return "[%s%s]" % (_ch(cp), extra) if extra else _ch(cp)

    def wrap_case(self, set_text: str, flags: AbstractSet[str]) -> str:
        """A set under (?iu): Unicode simple case folding by the regex package ((?i) alone was applied by hand)."""
        if "i" in flags and ("u" in flags or "U" in flags):
            return "(?i-f:%s)" % set_text
        return set_text

    def group(self, flags: Set[str]) -> Optional[str]:
        """A group at self.i == '('; None for an inline flag group ``(?i)``, whose flags go into ``flags``."""
        p, start = self.p, self.i
        self.i += 1
        kind = "("
        inner_flags = flags
        if self.peek() == "?":
            self.i += 1
            c = self.peek()
            if c == ":":
                kind = "(?:"
                self.i += 1
            elif c in ("=", "!", ">"):
                kind = "(?" + c
                self.i += 1
            elif c == "<" and self.peek(1) in ("=", "!"):
                kind = "(?<" + self.peek(1)
                self.i += 2
            elif c == "<":
                m = regex.compile(r"<([a-zA-Z][a-zA-Z0-9]*)>").match(p, self.i)
                if not m:
                    self.error("bad named group")
                if m.group(1) in self.names:
                    self.error("named capturing group <%s> is already defined" % m.group(1))
                self.names.add(m.group(1))
                self.groups += 1
                kind = "(?P<%s>" % m.group(1)
                self.i = m.end()
            else:
                m = regex.compile(r"([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])").match(p, self.i)
                if not m:
                    self.error("unknown inline modifier")
                on, off = m.group(1), m.group(2) or ""
                bad = set(on + off) - _ALLOWED_FLAGS
                if bad:
                    # Java also has c
                    raise _Reject("unsupported inline flag(s) %s" % "".join(sorted(bad)))
                new = (set(flags) | set(on)) - set(off)
                self.i = m.end()
                if m.group(3) == ")":
                    flags.clear()
                    # to the end of the enclosing group
                    flags.update(new)
                    return None
                kind, inner_flags = "(?:", new
        else:
            self.groups += 1
        body = self.alternation(inner_flags)
        if self.peek() != ")":
            self.i = start
            self.error("unclosed group")
        self.i += 1
        return kind + body + ")"

    # -- escapes ------------------------------------------------------------------------------------------------
    def escape(self, flags: AbstractSet[str]) -> str:
        """An escape outside a class."""
        p = self.p
        c = self.peek(1)
        if c == "":
            self.error("unexpected end of pattern (trailing backslash)")
        if c == "Q":
            end = p.find("\\E", self.i + 2)
            lit = p[self.i + 2:] if end < 0 else p[self.i + 2:end]
            self.i = len(p) if end < 0 else end + 2
            return "(?:%s)" % "".join(self.literal(ord(ch), flags) for ch in lit)
        if c.isdigit() and c != "0":
            return self.backref(flags)
        if c == "k":
            m = regex.compile(r"\\k<([a-zA-Z][a-zA-Z0-9]*)>").match(p, self.i)
            if not m or m.group(1) not in self.names:
                self.error("named capturing group does not exist")
            self.i = m.end()
            ref = "(?P=%s)" % m.group(1)
            return "(?i:%s)" % ref if "i" in flags else ref
        if c == "b" and self.peek(2) == "{":
            raise _Reject("\\b{g} (grapheme cluster boundaries) is not supported")
        if c in "bB":
            self.i += 2
            w = _WORD_U if "U" in flags else "\\p{L}\\p{Nd}_"
            if c == "b":
                return "(?:(?<=[%s])(?![%s])|(?<![%s])(?=[%s]))" % (w, w, w, w)
            return "(?:(?<=[%s])(?=[%s])|(?<![%s])(?![%s]))" % (w, w, w, w)
        simple = {"A": "\\A", "G": "\\G", "z": "\\Z", "X": "\\X",
                  "Z": "(?=\\n?\\Z)" if "d" in flags else "(?=(?:\\r\\n|[%s])?\\Z)" % _LINE_TERMINATORS,
                  "R": "(?>\\r\\n|[%s])" % _VSPACE}
        if c in simple:
            self.i += 2
            return simple[c]
        kind, value = self.class_escape(flags)
        if kind == "set":
            return self.wrap_case("[%s]" % value, flags)
        # ("char", code point)
        assert isinstance(value, int)
        return self.literal(value, flags)

    def backref(self, flags: AbstractSet[str]) -> str:
        j = self.i + 1
        num = int(self.p[j])
        j += 1
        while j < len(self.p) and self.p[j].isdigit() and num * 10 + int(self.p[j]) <= self.groups:
            num = num * 10 + int(self.p[j])
            j += 1
        self.i = j
        if num > self.groups:
            # Java: a reference to a group that does not exist never matches
            return "(?!)"
        ref = "(?:\\%d)" % num if num < 100 else "(?:\\g<%d>)" % num
        return "(?i:%s)" % ref if "i" in flags else ref

    def class_escape(self, flags: AbstractSet[str]) -> Tuple[str, Union[str, int]]:
        """An escape that is a character or a set: ("char", code point) or ("set", set body)."""
        p = self.p
        c = self.peek(1)
        j = self.i + 2
        if c == "":
            self.error("unexpected end of pattern (trailing backslash)")
        if c in "dDwWsShHvV":
            body = {"d": "\\p{Nd}" if "U" in flags else "0-9",
                    "w": _WORD_U if "U" in flags else "a-zA-Z_0-9",
                    "s": "\\p{White_Space}" if "U" in flags else " \\t\\n\\x0b\\f\\r",
                    "h": _HSPACE, "v": _VSPACE}[c.lower()]
            self.i = j
            return "set", ("[^%s]" % body) if c.isupper() else body
        if c in "pP":
            if j < len(p) and p[j] == "{":
                end = p.find("}", j)
                if end < 0:
                    self.error("unclosed character family")
                name, j = p[j + 1:end], end + 1
            elif j < len(p):
                name, j = p[j], j + 1
            else:
                self.error("illegal character family escape")
            self.i = j
            body = _property_body(name, flags)
            return "set", ("[^%s]" % body) if c == "P" else body
        if c in _CONTROL_ESCAPES:
            self.i = j
            return "char", _CONTROL_ESCAPES[c]
        if c == "c":
            if j >= len(p):
                self.error("illegal control escape sequence")
            self.i = j + 1
            return "char", ord(p[j]) ^ 64
        if c == "x":
            if j < len(p) and p[j] == "{":
                end = p.find("}", j)
                digits = p[j + 1:end] if end > 0 else ""
                if not regex.fullmatch(r"[0-9a-fA-F]+", digits) or int(digits, 16) > 0x10FFFF:
                    self.error("illegal hexadecimal escape sequence")
                self.i = end + 1
                return "char", int(digits, 16)
            m = regex.compile(r"[0-9a-fA-F]{2}").match(p, j)
            if not m:
                self.error("illegal hexadecimal escape sequence")
            self.i = m.end()
            return "char", int(m.group(0), 16)
        if c == "u":
            m = regex.compile(r"[0-9a-fA-F]{4}").match(p, j)
            if not m:
                self.error("illegal Unicode escape sequence")
            cp = int(m.group(0), 16)
            self.i = m.end()
            # a surrogate pair written as two \\u escapes is one supplementary character, as in Java
            m2 = regex.compile(r"\\u([dD][c-fC-F][0-9a-fA-F]{2})").match(p, self.i)
            if 0xD800 <= cp < 0xDC00 and m2:
                self.i = m2.end()
                cp = 0x10000 + ((cp - 0xD800) << 10) + (int(m2.group(1), 16) - 0xDC00)
            return "char", cp
        if c == "0":
            m = regex.compile(r"[0-3][0-7]{2}|[0-7]{1,2}").match(p, j)
            if not m:
                self.error("illegal octal escape sequence")
            self.i = m.end()
            return "char", int(m.group(0), 8)
        if c == "N":
            m = regex.compile(r"\{([^}]*)\}").match(p, j)
            if not m:
                self.error("illegal character name escape")
            try:
                cp = ord(unicodedata.lookup(m.group(1)))
            except KeyError:
                self.error("unknown character name [%s]" % m.group(1))
            self.i = m.end()
            return "char", cp
        if c.isascii() and c.isalnum():
            self.error("illegal/unsupported escape sequence \\%s" % c)
        self.i = j
        return "char", ord(c)

    # -- character classes --------------------------------------------------------------------------------------
    def char_class(self, flags: AbstractSet[str]) -> str:
        """Java's class at self.i == '[' (union by nesting, intersection by &&, ^ negating the whole) as a set."""
        start = self.i
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        operands: List[List[str]] = []
        items: List[str] = []
        first = True
        while True:
            if "x" in flags:
                while self.peek() and self.peek() in _JAVA_WHITESPACE + "\x0b\f":
                    self.i += 1
            c = self.peek()
            if c == "":
                self.i = start
                self.error("unclosed character class")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[":
                items.append(self.char_class(flags))
                continue
            if c == "&" and self.peek(1) == "&":
                self.i += 2
                if items:
                    operands.append(items)
                items = []
                continue
            if c == "\\":
                if self.peek(1) == "Q":
                    end = self.p.find("\\E", self.i + 2)
                    lit = self.p[self.i + 2:] if end < 0 else self.p[self.i + 2:end]
                    self.i = len(self.p) if end < 0 else end + 2
                    items.extend(self.range_items(ord(ch), ord(ch), flags) for ch in lit)
                    continue
                kind, value = self.class_escape(flags)
                if kind == "set":
                    items.append("[%s]" % value)
                    continue
                # ("char", code point)
                assert isinstance(value, int)
                lo = value
            else:
                lo = ord(c)
                self.i += 1
            items.append(self.maybe_range(lo, flags))
        if items:
            operands.append(items)
        if not operands:
            body = "\\x00-\\U0010ffff" if negate else ""
            return "[%s]" % body if body else "(?!)"
        text = "&&".join("[%s]" % "".join(op) for op in operands)
        return "[%s%s]" % ("^" if negate else "", text)

    def maybe_range(self, lo: int, flags: AbstractSet[str]) -> str:
        if self.peek() == "-" and self.peek(1) not in ("]", "") and not (self.peek(1) == "[" or
                                                                         self.p.startswith("&&", self.i + 1)):
            self.i += 1
            c = self.peek()
            if c == "\\":
                kind, value = self.class_escape(flags)
                if kind == "set":
                    self.error("illegal character range")
                # ("char", code point)
                assert isinstance(value, int)
                hi = value
            else:
                hi = ord(c)
                self.i += 1
            if hi < lo:
                self.error("illegal character range")
            return self.range_items(lo, hi, flags)
        return self.range_items(lo, lo, flags)

    def range_items(self, lo: int, hi: int, flags: AbstractSet[str]) -> str:
        text = _ch(lo) if lo == hi else "%s-%s" % (_ch(lo), _ch(hi))
        if "i" in flags and not ("u" in flags or "U" in flags):
            text += _fold_ascii(lo, hi)
        return text


def translate_java_regex(pattern: str) -> str:
    """Translate a ``java.util.regex`` pattern to the ``regex`` package's syntax (version 1; see the module
    docstring). Raises ConfigError for what Java rejects and for the few constructs that are not supported."""
    try:
        return _Translator(pattern).translate()
    except _Reject as exc:
        raise ConfigError("topic filter", pattern, "a valid regular expression", detail=str(exc)) from None


def compile_java_regex(regex_text: str, key: str = "topic filter") -> CompiledJavaRegex:
    """Compile a Java regex (translated) for full matching; raise ConfigError if Java would reject it or it
    cannot be evaluated."""
    try:
        compiled: CompiledJavaRegex = regex.compile(_Translator(regex_text).translate(), regex.V1)
        return compiled
    except (_Reject, regex.error, OverflowError, RecursionError, ValueError) as exc:
        raise ConfigError(key, regex_text, "a valid regular expression", detail=str(exc)) from None
