"""Kafka's ``sasl.jaas.config`` syntax (``JaasConfig``, a clients class the broker uses too).

Built on Java's ``StreamTokenizer``: ``<LoginModule> <flag> (key=value)* ;`` repeated, values
quoted (``"..."`` or ``'...'`` with Java escapes) or bare words, ``//`` and ``/* */`` comments.
A client takes its user and password from it; the broker its PLAIN users
(``server.security.credentials.jaas_users``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class JaasError(ValueError):
    """A JAAS config Kafka would refuse; the message is Kafka's (never the config's text)."""


_EOF = object()
_WORD = "word"
_QUOTED = "quoted"
_NUMBER = "number"
_CHAR = "char"


def _is_word_start(c: str) -> bool:
    # StreamTokenizer defaults (a-z, A-Z, 160-255, everything >= 256) plus JaasConfig's - _ $
    # ('-' is also numeric: a word never starts with it, see _tokens).
    return c.isascii() and c.isalpha() or c in "_$" or ord(c) >= 160


def _is_word_part(c: str) -> bool:
    return _is_word_start(c) or c.isdigit() and c.isascii() or c in ".-"


_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


def _tokens(text: str):
    """Java's StreamTokenizer as JaasConfig sets it up: yields (kind, value)."""
    i, n = 0, len(text)
    while True:
        while i < n and ord(text[i]) <= 32:
            i += 1
        if i >= n:
            yield _EOF, None
            return
        c = text[i]
        if c == "/":  # '/' is a comment character; '//' and '/*' comments are on
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                if end < 0:
                    yield _EOF, None
                    return
                i = end + 2
            else:
                while i < n and text[i] not in "\r\n":
                    i += 1
            continue
        if c.isdigit() and c.isascii() or c == "." or c == "-":
            # parseNumbers(): a number (no string value); a lone '-' is an ordinary character
            j = i + 1
            if c == "-" and not (j < n and (text[j] == "." or text[j].isdigit() and text[j].isascii())):
                yield _CHAR, "-"
                i = j
                continue
            while j < n and (text[j].isdigit() and text[j].isascii() or text[j] == "."):
                j += 1
            yield _NUMBER, text[i:j]
            i = j
            continue
        if _is_word_start(c):
            j = i + 1
            while j < n and _is_word_part(text[j]):
                j += 1
            yield _WORD, text[i:j]
            i = j
            continue
        if c in "\"'":
            quote, j, out = c, i + 1, []
            while j < n and text[j] != quote and text[j] not in "\r\n":
                ch = text[j]
                if ch == "\\" and j + 1 < n:
                    j += 1
                    ch = text[j]
                    if "0" <= ch <= "7":
                        digits = ch
                        limit = 3 if ch <= "3" else 2
                        while len(digits) < limit and j + 1 < n and "0" <= text[j + 1] <= "7":
                            j += 1
                            digits += text[j]
                        ch = chr(int(digits, 8))
                    else:
                        ch = _ESCAPES.get(ch, ch)
                out.append(ch)
                j += 1
            yield _QUOTED, "".join(out)
            i = j + 1 if j < n and text[j] == quote else j
            continue
        yield _CHAR, c
        i += 1


_FLAGS = {"REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL"}


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas(text: str) -> list[JaasEntry]:
    """Kafka's JaasConfig: every entry of a ``sasl.jaas.config`` value; JaasError if Kafka would refuse it."""
    toks = _tokens(text)
    entries: list[JaasEntry] = []

    def sval(tok: tuple[Any, Any]) -> str | None:
        return tok[1] if tok[0] in (_WORD, _QUOTED) else None

    tok = next(toks)
    while tok[0] is not _EOF:
        module = sval(tok)
        tok = next(toks)
        if tok[0] is _EOF:
            raise JaasError("Login module control flag not specified in JAAS config")
        flag = sval(tok)
        if flag is None:
            raise JaasError("Login module control flag is not available in the JAAS config")
        if flag.upper() not in _FLAGS:
            raise JaasError(f"Invalid login module control flag '{flag}' in JAAS config")
        options: dict[str, str] = {}
        tok = next(toks)
        while tok[0] is not _EOF and tok != (_CHAR, ";"):
            key = sval(tok)
            eq = next(toks)
            value = next(toks) if eq == (_CHAR, "=") else (_EOF, None)
            if eq != (_CHAR, "=") or value[0] is _EOF or sval(value) is None:
                raise JaasError(f"Value not specified for key '{key}' in JAAS config")
            options[str(key)] = str(sval(value))
            tok = next(toks)
        if tok != (_CHAR, ";"):
            raise JaasError("JAAS config entry not terminated by semi-colon")
        entries.append(JaasEntry(str(module), flag.upper(), options))
        tok = next(toks)
    if not entries:
        raise JaasError("Login module not specified in JAAS config")
    return entries
