"""Differential test of zkconsumer.topic_filter against java.util.regex itself.

``tests/jvm/RegexOracle.java`` (run with ``java RegexOracle.java``, Java 11+) normalises each raw regex as Kafka
1.1.1's ``TopicFilter`` does and prints, for every pattern Java compiles, which topics match
(``Pattern.compile(regex).matcher(topic).matches()``), or Java's error. For every pattern of the corpus:

* the normalised regex is the same string;
* if Java compiles it, our Whitelist matches exactly the same topics — unless it is listed in ``UNSUPPORTED``
  (then we must reject it with a ConfigError, never guess);
* if Java rejects it, we reject it too.
"""
import os
import shutil
import subprocess

import pytest

from zkconsumer.errors import ConfigError
from zkconsumer.topic_filter import Whitelist, normalise_regex

ORACLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jvm", "RegexOracle.java")

TOPICS = [
    # legal Kafka topic names ([a-zA-Z0-9._-])
    "orders", "Orders", "ORDERS", "orders-1", "orders_2", "orders.v2", "mirror.orders", "clicks", "a", "aa", "aaa",
    "ab", "aab", "abab", "b", "e", "abc", "abcd", "x", "xyz", "Xyz", "X", "0", "123", "1.5", "a-b", "a_b", "a.b",
    "axb", "__consumer_offsets", "_internal", "-lead", "trail-", "..", "A1", "fooBar", "FooBar", "Test", "test",
    "TEST", "logs-2024.01.01", "ff", "ß",
    # and some that are not (registrations are matched against whatever /brokers/topics holds)
    "é", "É", "Été", "Ωmega", "ω", "日本", "ǅ", "٣", "a b", "a\tb", "ſ", "\u212a", "a\\b", "a\x1bb", "\x01",
]

PATTERNS = [
    # ordinary
    "orders", "orders.*", "orders|clicks", "orders,clicks", " orders , Orders ", "'orders'", "\"mirror\\..*\"",
    ".*", ".+", "", "a*", "a?b", "[a-z]+", "[A-Z][a-z]+", "[^a-z]+", "[a-z0-9._-]+", "\\w+", "\\W", "\\d+", "\\D+",
    "\\s", "\\S+", "a{2}", "a{1,2}b?", "a{2,}", "(ab)+", "(?:ab)+", "(a|b)*c?", "^orders$", "orders\\b.*",
    "\\borders\\b", "a\\Bb", "x{0}y?z", "a{1}{2}",
    # flags
    "(?i)orders", "(?i)ORDERS|x", "a(?i)b", "(?i:ab)c", "x(y(?i)z)", "(?i)a(?-i)b", "(?x)a#c", "(?s).*", "(?m)^a$",
    "(?i)é", "(?u)(?i)é", "(?iu)ω|é", "(?i)k", "(?iu)k", "(?i)ss", "(?iu)s", "(?U)\\w+", "(?U)\\d", "(?U)\\p{Alpha}+",
    "(?d).+", "(?)a", "(?i)\\p{Lu}", "(?i)[a-z]+", "(?i)[^a-z]",
    # groups, references, lookaround, possessive, atomic
    "(?<n>a)\\k<n>", "(a)\\1", "(a)\\11", "(?=a)a.*", "(?!a).*", "(?<=a)b", "a.(?<!x)", "(?>a+)b", "a++", "a++b",
    "a*+a", "a?+b", "a{1,2}+b",
    # quoting and escapes
    "\\Qa.b\\E", "\\Qa.b", "[\\Q.\\E]b", "\\Q\\E", "a\\.b", "\\x61+", "\\x{61}", "\\u0061", "\\0141", "\\t", "\\cA",
    "\\e", "\\a", "\\N{LATIN SMALL LETTER A}", "\\h", "a\\hb", "\\H+", "\\v", "\\V+", "\\R", "a\\z", "a\\Z", "\\Aa",
    "\\Ga", "\\X", "\\b{g}a", "a\\\\b", "\\-lead",
    # Unicode and POSIX classes
    "\\p{Lu}[a-z]+", "\\p{L}+", "\\pL+", "\\PL", "\\p{IsL}", "\\p{IsLatin}+", "\\p{InGreek}+", "\\p{IsGreek}",
    "\\p{Alpha}+", "\\p{IsAlphabetic}+", "\\p{javaLowerCase}+", "\\p{javaUpperCase}\\p{javaLowerCase}+",
    "\\p{Lower}+", "\\p{IsLowercase}+", "\\p{IsLower}", "\\p{Upper}", "\\p{Punct}", "\\p{Alnum}+", "\\P{Alpha}+",
    "\\p{XDigit}+", "\\p{gc=Nd}", "\\p{IsDigit}", "\\p{Nd}+", "\\p{javaDigit}", "\\p{javaLetterOrDigit}+",
    "\\p{javaWhitespace}", "\\p{Lt}", "\\p{sc=Latin}+", "\\p{script=Greek}+", "\\p{block=Greek}+", "\\p{IsPunct}",
    "\\p{IsWhite_Space}", "\\p{Cntrl}", "\\p{Space}", "\\p{javaLetter}+", "\\p{IsIdeographic}+", "\\p{all}+",
    # character classes: Java's union, intersection, nesting
    "[a-z&&[^e]]", "[a-z&&[^e]]+", "[a-c[x-z]]+", "[a-z&&[def]]", "[a-z&&b-d&&c]", "[[a-c]]", "[^[a-c]]",
    "[^a[b]]+", "[a-z&&]", "[&&a]", "[a&b]", "[a|b]", "[\\w&&[^\\d]]+", "[a-]", "[-a]", "[]a]", "[^]a]",
    "[a-z&&[^aeiou]]+", "[\\p{Alpha}&&[^a]]+", "[\\p{L}&&\\P{Lu}]+", "[a-c&&b]", "[^a-z&&[^e]]", "[.]", "[\\d.]+",
    "[a-z&&[^b-y]&&[^z]]", "[\\p{Lu}\\d]+",
    "(?iu)[a-z]+", "(?U)\\b.+", "\\p{IsASCII}+", "[\\P{L}]", "[^\\p{L}\\d]+", "(?i)(a)\\1", "\\p{InBasicLatin}+",
    "\\p{IsHan}+", "\\p{sc=Han}+", "\\p{InCJKUnifiedIdeographs}+", "\\p{InCJK_Unified_Ideographs}+",
    "\\p{IsLatn}", "\\p{javaJavaIdentifierStart}\\p{javaJavaIdentifierPart}*", "\\p{javaSpaceChar}",
    "\\p{L1}+", "\\p{LD}+", "\\p{IsEmoji}", "\\p{IsUppercase}+", "(?i)\\p{IsUppercase}+", "(?i)\\p{Upper}+",
    "(?U)\\p{Upper}", "(?i)[\\p{Lower}]", "\\p{IsHex_Digit}+", "\\p{IsWord}+", "\\p{Zs}", "\\pN+",
    # invalid in Java
    "a{,3}", "{", "a{", "*", "a**", "+a", "a)", "(a", "[a-", "\\", "\\k<x>", "(?<1a>x)", "\\p{Foo}", "\\p{IsFoo}",
    "\\y", "a{3,2}", "(?q)a", "a|*", "[z-a]", "\\x{110000}", "(a)\\2", "\\c", "[a-\\d]", "\\i", "(?c)a",
    "(?<=a+)b", "a+(?<=a{1,})b", "x*(?<=x+)", "(?<n>a)(?<n>b)", "\\N{NO SUCH NAME}", "\\x{", "\\u12", "\\0", "[^]", "[]",
]

# Patterns java.util.regex compiles that zkconsumer does not evaluate (it must reject them: a member registering one
# is assigned nothing, see README "Wildcard subscriptions"). Keep this list short; every entry says why.
UNSUPPORTED = {
    "\\b{g}a": "grapheme-cluster boundaries \\b{g}: no equivalent in the regex package",
    "(?c)a": "canonical equivalence (CANON_EQ) is not emulated",
    "a{1}{2}": "a repetition of a repetition: Java's reading of it is not documented (it matches 'a' here)",
}


def run_oracle(patterns, topics):
    java = shutil.which("java")
    if java is None:
        pytest.fail("java (11+) is not on PATH: the java.util.regex oracle cannot run", pytrace=False)
    lines = ["T %s" % (t.encode("utf-8").hex() or "-") for t in topics]
    lines += ["P %s" % (p.encode("utf-8").hex() or "-") for p in patterns]
    proc = subprocess.run([java, ORACLE], input="\n".join(lines) + "\n", capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert len(out) == len(patterns), proc.stdout + proc.stderr

    def unhex(h):
        return "" if h == "-" else bytes.fromhex(h).decode("utf-8")
    results = {}
    for pattern, line in zip(patterns, out):
        kind, regex, rest = line.split(" ")
        if kind == "OK":
            hits = set() if rest == "-" else {topics[int(i)] for i in rest.split(",")}
            results[pattern] = (unhex(regex), hits, None)
        else:
            results[pattern] = (unhex(regex), None, unhex(rest))
    return results


@pytest.fixture(scope="module")
def java_results():
    return run_oracle(PATTERNS, TOPICS)


def test_corpus_size():
    assert len(set(PATTERNS)) == len(PATTERNS) >= 60 and len(set(TOPICS)) == len(TOPICS) >= 40
    assert set(UNSUPPORTED) <= set(PATTERNS)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_same_as_java(java_results, pattern):
    regex, java_hits, java_error = java_results[pattern]
    assert normalise_regex(pattern) == regex
    if java_error is not None:
        with pytest.raises(ConfigError):
            Whitelist(pattern)
        return
    if pattern in UNSUPPORTED:
        with pytest.raises(ConfigError):
            Whitelist(pattern)
        return
    try:
        w = Whitelist(pattern)
    except ConfigError as e:
        pytest.fail("Java compiles %r (matching %s) but we reject it: %s" % (regex, sorted(java_hits), e))
    ours = {t for t in TOPICS if w.matches(t)}
    assert ours == java_hits, "%r: only we match %s, only Java matches %s" % (
        regex, sorted(ours - java_hits), sorted(java_hits - ours))
