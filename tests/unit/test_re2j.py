"""server/apis/re2j.py: RE2J patterns (Kafka's regex syntax) under Python's re.

Each case's outcome (error, or which ids match) is what Apache Kafka 4.3.1's ListTransactions v2
answered for the same pattern over the same transactional ids (INVALID_REGULAR_EXPRESSION where
RE2J's Pattern.compile throws); tests/conformance/test_api_versions.py compares a few live.
"""

from __future__ import annotations

import pytest
from kafka_sidecar.server.apis.re2j import Re2jSyntaxError, compile_re2j, translate

IDS = ["txn-abc", "txn-abcd", "other", "Txn-ABC", "txn\nabc"]

MATCHES = {
    "txn-abc\\z": ["txn-abc"],
    "[[:alpha:]]+-abc": ["txn-abc"],
    "[[:^alpha:]]+": [],
    "\\p{L}+-abc": ["txn-abc"],
    "\\pL+-abc": ["txn-abc"],
    "(?P<n>txn)-abc": ["txn-abc"],
    "(?<n>txn)-abc": ["txn-abc"],
    "txn-abc$": ["txn-abc"],
    "x{1000}": [],
    "(?s).*": IDS,
    "\\d+": [],
    "\\Qtxn-abc\\E": ["txn-abc"],
    "\\Qtxn.abc": [],
    "(?i)txn-abc": ["txn-abc", "Txn-ABC"],
    "txn(?i)-ABC": ["txn-abc"],
    "(?U)t.*": ["txn-abc", "txn-abcd"],
    "\\x{74}xn-abc": ["txn-abc"],
    "txn.abc": ["txn-abc"],
    "(?s)txn.abc": ["txn-abc", "txn\nabc"],
    "[]a]": [],
    "(?i:TXN)-abc": ["txn-abc"],
    "txn-abc|other": ["txn-abc", "other"],
    "\\btxn-abc\\b": ["txn-abc"],
    "\\Atxn-abc": ["txn-abc"],
    "[\\w-]+": ["txn-abc", "txn-abcd", "other", "Txn-ABC"],
    "txn-[[:lower:]]{3}": ["txn-abc"],
    "[^[:space:]]+": ["txn-abc", "txn-abcd", "other", "Txn-ABC"],
    # Non-capturing groups, as franz-go's KIP-848 regex consumer sends them: .*(?:(?:a)|(?:b)).*
    "(?:txn)-abc": ["txn-abc"],
    ".*(?:(?:-abcd)|(?:other)).*": ["txn-abcd", "other"],
    "(?:)txn-abc": ["txn-abc"],
    "txn(?)-abc": ["txn-abc"],
}

INVALID = ["(?=t).*", "(t)\\1.*", "(?<!x)txn.*", "a++", "a*+", "(?>a)", "\\Z", "x{2,1}", "x{1001}", "(?x)txn",
           "(?#c)txn.*", "(?a)txn.*", "a**", "[a-", "\\C", "[[:nope:]]", "(a", "a)",
           "(?-)txn", "(?-:t)xn", "(?i-:t)xn", "(?ii-)txn"]


@pytest.mark.parametrize("pattern", sorted(MATCHES))
def test_matches_as_kafka(pattern: str) -> None:
    regex = compile_re2j(pattern)
    assert [i for i in IDS if regex.fullmatch(i)] == MATCHES[pattern]


@pytest.mark.parametrize("pattern", INVALID)
def test_rejected_as_kafka(pattern: str) -> None:
    with pytest.raises(Re2jSyntaxError):
        compile_re2j(pattern)


def test_translations() -> None:
    assert translate("a(?i)b|c") == "a(?i:b)|(?i:c)"  # the flags hold to the end of the group, across |
    assert translate("(a(?i)b|c)d") == "(a(?i:b)|(?i:c))d"
    assert translate("(?U)a+?b*") == "a+b*?"
    assert translate("x[a[:^digit:]]") == "x(?:[a]|[^0-9])"
    assert translate("\\Qa.b\\E+") == "a\\.b+"
    assert translate("(?:a)|(?:b)") == "(?:a)|(?:b)"
    assert translate("a(?)b") == "ab"
