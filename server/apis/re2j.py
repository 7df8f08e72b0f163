"""Kafka's regular expressions (RE2J syntax) run with Python's ``re``.

Kafka compiles client-supplied patterns (ListTransactions v2's transactional id pattern, KIP-1152;
KIP-848's subscribed-topic regex) with RE2J, whose syntax differs from Python's: RE2J rejects
backreferences, lookaround, atomic groups, possessive quantifiers, ``\\Z``, conditionals and comments
(Python accepts them), and knows ``\\z``, ``\\Q...\\E``, ``\\x{...}``, ``(?<name>...)``, POSIX classes
(``[[:alpha:]]``) and ``\\pL``/``\\p{L}`` (Python does not). ``translate`` rewrites an RE2J pattern
into an equivalent Python one, or raises ``Re2jSyntaxError`` where RE2J's ``Pattern.compile``
throws (PatternSyntaxException), so callers answer INVALID_REGULAR_EXPRESSION as Kafka does.
Unicode classes beyond letters and digits (``\\p{Greek}``) are not translated (they raise too).
"""

from __future__ import annotations

import re

__all__ = ["Re2jSyntaxError", "compile_re2j", "translate"]

# RE2's repeat limit ({n,m} with n or m above it is a syntax error).
MAX_REPEAT = 1000

_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ", "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
# \p classes with an exact Python equivalent (outside a character class / inside one).
_UNICODE_CLASSES = {"L": ("[^\\W\\d_]", None), "Nd": ("\\d", "\\d"), "N": ("\\d", "\\d")}
_REJECTED_GROUPS = ("?=", "?!", "?<=", "?<!", "?>", "?(", "?#", "?P=", "?P>")
_FLAGS = re.compile(r"\(\?([imsU]*)(?:-([imsU]*))?([:)])")


class Re2jSyntaxError(ValueError):
    """The pattern is not valid RE2J syntax (Kafka: PatternSyntaxException)."""


def _unicode_class(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """``\\pX`` / ``\\p{Name}`` starting at ``pattern[i]`` (the ``p``): (Python text, next index)."""
    if pattern[i] == "P":
        raise Re2jSyntaxError(f"negated unicode class at {i}")
    if i + 1 < len(pattern) and pattern[i + 1] == "{":
        end = pattern.find("}", i + 2)
        if end < 0:
            raise Re2jSyntaxError(f"unterminated \\p{{ at {i}")
        name, nxt = pattern[i + 2:end], end + 1
    elif i + 1 < len(pattern):
        name, nxt = pattern[i + 1], i + 2
    else:
        raise Re2jSyntaxError("trailing \\p")
    if name.startswith("^"):
        raise Re2jSyntaxError(f"negated unicode class {name}")
    outside, inside = _UNICODE_CLASSES.get(name, (None, None))
    text = inside if in_class else outside
    if text is None:
        raise Re2jSyntaxError(f"unicode class {name} is not supported here")
    return text, nxt


def _escape(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """The escape whose backslash is at ``pattern[i]``: (Python text, next index)."""
    if i + 1 >= len(pattern):
        raise Re2jSyntaxError("trailing backslash")
    c = pattern[i + 1]
    if c == "Q":
        end = pattern.find("\\E", i + 2)
        literal = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
        return re.escape(literal), (len(pattern) if end < 0 else end + 2)
    if c in "123456789":
        raise Re2jSyntaxError(f"backreference \\{c}")
    if c in "ZGC" or (c in "zAbB" and in_class):
        raise Re2jSyntaxError(f"invalid escape \\{c}")
    if c == "z":
        return "\\Z", i + 2
    if c in "pP":
        return _unicode_class(pattern, i + 1, in_class)
    if c == "x" and i + 2 < len(pattern) and pattern[i + 2] == "{":
        end = pattern.find("}", i + 3)
        try:
            code = int(pattern[i + 3:end], 16) if end > i + 3 else -1
        except ValueError:
            code = -1
        if not 0 <= code <= 0x10FFFF:
            raise Re2jSyntaxError(f"invalid \\x{{...}} at {i}")
        return f"\\U{code:08x}", end + 1
    return "\\" + c, i + 2


def _char_class(pattern: str, i: int) -> tuple[str, int]:
    """The character class opening at ``pattern[i]`` (``[``): (Python text, next index)."""
    out: list[str] = []
    negated_parts: list[str] = []  # [:^name:] items: Python has no complement inside a class
    j = i + 1
    negated = j < len(pattern) and pattern[j] == "^"
    if negated:
        j += 1
    if j < len(pattern) and pattern[j] == "]":  # a leading ] is literal
        out.append("\\]")
        j += 1
    while j < len(pattern):
        c = pattern[j]
        if c == "]":
            if not negated_parts:
                return "[" + ("^" if negated else "") + "".join(out) + "]", j + 1
            if negated:
                raise Re2jSyntaxError("a negated POSIX class inside a negated class is not supported")
            items = ([f"[{''.join(out)}]"] if out else []) + [f"[^{part}]" for part in negated_parts]
            return "(?:" + "|".join(items) + ")", j + 1
        if c == "\\":
            text, j = _escape(pattern, j, True)
            out.append(text)
        elif pattern.startswith("[:", j):
            end = pattern.find(":]", j + 2)
            name = pattern[j + 2:end] if end > 0 else ""
            if name.removeprefix("^") not in _POSIX_CLASSES:
                raise Re2jSyntaxError(f"invalid character class range [:{name}:]")
            if name.startswith("^"):
                negated_parts.append(_POSIX_CLASSES[name[1:]])
            else:
                out.append(_POSIX_CLASSES[name])
            j = end + 2
        elif c == "[":
            out.append("\\[")  # literal in RE2; Python warns about possible set operations
            j += 1
        else:
            out.append(c)
            j += 1
    raise Re2jSyntaxError("missing closing ]")


def translate(pattern: str) -> str:
    """An RE2J pattern as a Python ``re`` pattern with the same meaning; raises Re2jSyntaxError.

    RE2J lets a flags group appear anywhere (``a(?i)b``: the flags hold to the end of the enclosing
    group); Python only at the start, so such a group becomes a scoped ``(?i:...)``, closed and
    reopened around each ``|`` of its level. ``(?U)`` (ungreedy) is supported at the start only.
    """
    out: list[str] = []
    i = 0
    quantified = False  # the last token was a quantifier (a following + would make it possessive)
    scoped: list[list[str]] = [[]]  # per group depth: the flag groups opened mid-pattern
    ungreedy = False
    while i < len(pattern):
        c = pattern[i]
        was_quantified, quantified = quantified, False
        if was_quantified and ungreedy and c not in "*+{":
            # (?U): a bare quantifier is lazy and a ?-suffixed one greedy.
            if c == "?":
                i += 1
                continue
            out.append("?")
        if c == "|":
            out.append(")" * len(scoped[-1]) + "|" + "".join(scoped[-1]))
            i += 1
            continue
        if c == ")":
            out.append(")" * len(scoped.pop()) + ")") if len(scoped) > 1 else out.append(")")
            i += 1
            continue
        if c == "(" and not pattern.startswith("(?", i):
            scoped.append([])
            out.append("(")
            i += 1
            continue
        if c == "\\":
            text, i = _escape(pattern, i, False)
            out.append(text)
        elif c == "[":
            text, i = _char_class(pattern, i)
            out.append(text)
        elif c == "(" and pattern.startswith("(?", i):
            if pattern.startswith(_REJECTED_GROUPS, i + 1):
                raise Re2jSyntaxError(f"unsupported group syntax at {i}")
            if pattern.startswith("(?P<", i):
                scoped.append([])
                out.append("(?P<")
                i += 4
            elif pattern.startswith("(?<", i):
                scoped.append([])
                out.append("(?P<")
                i += 3
            else:
                # RE2J's parsePerlFlags: flags may be empty ("(?:" is a plain non-capturing
                # group, "(?)" does nothing), but a "-" must be followed by at least one flag.
                m = _FLAGS.match(pattern, i)
                if m is None or m.group(2) == "":
                    raise Re2jSyntaxError(f"invalid or unsupported Perl syntax at {i}")
                on, off = m.group(1), m.group(2) or ""
                if "U" in on and i == 0 and m.group(3) == ")" and not off:
                    ungreedy = True
                    on = on.replace("U", "")
                elif "U" in on + off:
                    raise Re2jSyntaxError(f"the U flag is supported only at the start, at {i}")
                flags = f"(?{on}" + (f"-{off}" if off else "")
                if m.group(3) == ")" and not on and not off:
                    pass  # "(?)": no flags to set
                elif m.group(3) == ":":
                    scoped.append([])
                    out.append(flags + ":")
                elif i == 0 and not off:
                    out.append(flags + ")" if on else "")
                else:
                    scoped[-1].append(flags + ":")
                    out.append(flags + ":")
                i = m.end()
        elif c in "*+?":
            if was_quantified and c == "+":
                raise Re2jSyntaxError(f"possessive quantifier at {i}")
            if was_quantified and c != "?":
                raise Re2jSyntaxError(f"bad repetition operator at {i}")
            out.append(c)
            i += 1
            quantified = c != "?" or not was_quantified
        elif c == "{" and (m := re.compile(r"\{(\d+)(,(\d*))?\}").match(pattern, i)):
            low, high = int(m.group(1)), m.group(3)
            if low > MAX_REPEAT or (high and (int(high) > MAX_REPEAT or int(high) < low)):
                raise Re2jSyntaxError(f"bad repetition operator {m.group(0)}")
            if was_quantified:
                raise Re2jSyntaxError(f"bad repetition operator at {i}")
            out.append(m.group(0))
            i = m.end()
            quantified = True
        else:
            out.append(c)
            i += 1
    if quantified and ungreedy:
        out.append("?")
    if len(scoped) > 1:
        raise Re2jSyntaxError("missing closing )")
    return "".join(out) + ")" * len(scoped[0])


def compile_re2j(pattern: str) -> re.Pattern[str]:
    """Compile an RE2J pattern (use ``fullmatch`` for RE2J's ``matches()``)."""
    try:
        return re.compile(translate(pattern))
    except re.error as e:
        raise Re2jSyntaxError(str(e)) from None
