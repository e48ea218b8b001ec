"""The regular expressions semantic types accept: a subset of syntax that means the same in Python's ``re`` and in
Java's ``java.util.regex`` (what Spark's ``RLIKE`` runs), parsed into a small tree for
:mod:`schema_registry.regex_safety`.

Accepted: literal characters; ``\\`` before ASCII punctuation; ``\\t \\n \\r \\f \\a``, ``\\xhh``, ``\\uhhhh``;
``\\d \\D \\w \\W \\s \\S``; ``.``; classes ``[...]`` and ``[^...]`` of those with ranges; groups ``(...)``,
``(?:...)``, ``(?>...)``; ``|``; quantifiers ``* + ? {n} {n,} {n,m}``, lazy (``*?``) or possessive (``*+``); the
anchors ``^ $ \\b \\B \\A``; ``(?s)`` at the start and ``(?s:...)``.

Refused, with the reason: backreferences and lookaround (not regular: no engine can match them in linear time, and
RE2 refuses them), named groups and comments, other inline flags (``(?i)`` folds case by Unicode in Python and by
ASCII in Java; ``(?m)`` and ``(?x)`` differ too), escapes whose meaning differs or that only one side knows
(``\\v \\Z \\z \\0 \\N \\p \\Q \\h \\R`` ...), a ``[`` or ``&&`` inside a class (Java nests and intersects classes,
Python does not), and a ``{`` ``}`` or ``]`` that is not part of a quantifier or class (write ``\\{``).

Each character set is kept as each engine reads it (``\\d`` is ASCII in Java and any Unicode digit in Python; ``.``
stops at every line terminator in Java and at ``\\n`` only in Python), and the safety analysis runs once for each.
"""

from __future__ import annotations

import array
import re
from dataclasses import dataclass
from functools import cache

MAX_CODE_POINT = 0x10FFFF
MAX_DEPTH = 100
"""Deepest nesting of groups accepted."""

CharSet = tuple[tuple[int, int], ...]
"""Sorted, disjoint, non-adjacent closed intervals of code points."""


def char_set(*intervals: tuple[int, int]) -> CharSet:
    """The normalized union of ``intervals``."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(i for i in intervals if i[0] <= i[1]):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def union(*sets: CharSet) -> CharSet:
    """The union of character sets."""
    return char_set(*(i for s in sets for i in s))


def complement(s: CharSet) -> CharSet:
    """Every code point not in ``s``."""
    out, start = [], 0
    for lo, hi in s:
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CODE_POINT:
        out.append((start, MAX_CODE_POINT))
    return tuple(out)


def intersect(a: CharSet, b: CharSet) -> CharSet:
    """The characters in both sets."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


ANY: CharSet = ((0, MAX_CODE_POINT),)
_JAVA_CLASSES: dict[str, CharSet] = {
    "d": char_set((0x30, 0x39)),
    "w": char_set((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)),
    "s": char_set((0x09, 0x0D), (0x20, 0x20)),
}
# '.' without (?s): Java stops at every line terminator, Python at '\n' only
_JAVA_DOT = complement(char_set((0x0A, 0x0A), (0x0D, 0x0D), (0x85, 0x85), (0x2028, 0x2029)))
_PYTHON_DOT = complement(char_set((0x0A, 0x0A)))


@cache
def _python_classes() -> dict[str, CharSet]:
    """Python's ``\\d``, ``\\w`` and ``\\s`` on str patterns (Unicode), read off the engine itself (~0.3 s, once)."""
    everything = array.array("I", range(MAX_CODE_POINT + 1)).tobytes().decode("utf-32-le", "surrogatepass")
    return {letter: char_set(*((m.start(), m.end() - 1) for m in re.finditer(f"\\{letter}+", everything)))
            for letter in "dws"}


def class_sets(letter: str) -> tuple[CharSet, CharSet]:
    """``\\d \\w \\s \\D \\W \\S`` as (Java's set, Python's set): ASCII in Java, Unicode in Python."""
    java, python = _JAVA_CLASSES[letter.lower()], _python_classes()[letter.lower()]
    return (complement(java), complement(python)) if letter.isupper() else (java, python)


_LITERAL_ESCAPES = {"t": 0x09, "n": 0x0A, "r": 0x0D, "f": 0x0C, "a": 0x07}
_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ ")


@dataclass(frozen=True)
class Chars:
    """One character: from ``java`` in Java's engine, from ``python`` in Python's; ``start``: its pattern offset."""

    java: CharSet
    python: CharSet
    start: int


@dataclass(frozen=True)
class Empty:
    """Matches the empty string (also what an anchor or word boundary is taken as)."""


@dataclass(frozen=True)
class Seq:
    """The items one after the other."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Alt:
    """One of the items."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Repeat:
    """``item`` between ``low`` and ``high`` times (None: no upper bound); ``span`` is its text in the pattern."""

    item: Node
    low: int
    high: int | None
    span: tuple[int, int]


Node = Chars | Empty | Seq | Alt | Repeat


class UnsupportedSyntaxError(ValueError):
    """The pattern uses syntax outside the accepted subset (the message says what and why)."""


def parse(pattern: str) -> Node:
    """The tree of ``pattern``.

    Raises:
        UnsupportedSyntaxError: syntax outside the accepted subset, or malformed.
    """
    return _Parser(pattern).parse()


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.dotall = False
        self.depth = 0

    def fail(self, what: str, why: str, at: int | None = None) -> UnsupportedSyntaxError:
        at = self.i if at is None else at
        return UnsupportedSyntaxError(f"{what} at offset {at} is not accepted: {why}")

    def peek(self, offset: int = 0) -> str:
        j = self.i + offset
        return self.p[j] if j < len(self.p) else ""

    def parse(self) -> Node:
        if self.p.startswith("(?s)"):
            self.i = 4
            self.dotall = True
        node = self.alternation()
        if self.i < len(self.p):
            raise self.fail("')'", "it closes no group")
        return node

    def alternation(self) -> Node:
        items = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            items.append(self.sequence())
        return items[0] if len(items) == 1 else Alt(tuple(items))

    def sequence(self) -> Node:
        items: list[Node] = []
        while self.i < len(self.p) and self.peek() not in "|)":
            start = self.i
            atom, quantifiable = self.atom()
            items.append(self.quantified(atom, start, quantifiable))
        if not items:
            return Empty()
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def atom(self) -> tuple[Node, bool]:
        c = self.peek()
        if c == "(":
            return self.group(), True
        if c == "[":
            return self.char_class(), True
        if c == ".":
            self.i += 1
            if self.dotall:
                return Chars(ANY, ANY, self.i - 1), True
            return Chars(_JAVA_DOT, _PYTHON_DOT, self.i - 1), True
        if c in "^$":
            self.i += 1
            return Empty(), False
        if c == "\\":
            return self.escape()
        if c in "*+?":
            raise self.fail(f"'{c}'", "it repeats nothing")
        if c in "{}]":
            raise self.fail(f"'{c}'", f"outside a quantifier or class write it as '\\{c}' (Java and Python read a "
                                      "bare one differently)")
        self.i += 1
        literal = char_set((ord(c), ord(c)))
        return Chars(literal, literal, self.i - 1), True

    def group(self) -> Node:
        start = self.i
        self.i += 1
        dotall = self.dotall
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail("'('", f"groups nest more than {MAX_DEPTH} deep", start)
        if self.peek() == "?":
            head = self.p[self.i:self.i + 3]
            if head.startswith(("?:", "?>")):
                self.i += 2
            elif head == "?s:":
                self.i += 3
                self.dotall = True
            elif head.startswith(("?=", "?!", "?<=", "?<!")):
                raise self.fail("lookaround", "it is not a regular expression: no engine matches it in linear time "
                                              "(RE2 refuses it)", start)
            elif head.startswith(("?P", "?<", "?#", "?(")):
                raise self.fail(f"'({head}'", "named groups, comments and conditionals differ between Python and "
                                              "Java (use (...) or (?:...))", start)
            else:
                raise self.fail(f"'({head}'", "inline flags other than (?s) at the start mean different things in "
                                              "Python and Java (write the cases out: [Aa])", start)
        node = self.alternation()
        if self.peek() != ")":
            raise self.fail("'('", "it is never closed", start)
        self.i += 1
        self.dotall = dotall
        self.depth -= 1
        return node

    def quantified(self, atom: Node, start: int, quantifiable: bool) -> Node:
        c = self.peek()
        if c in ("*", "+", "?"):
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            self.i += 1
        elif c == "{":
            low, high = self.counts()
        else:
            return atom
        if not quantifiable:
            raise self.fail("a quantifier", "it repeats an anchor")
        if self.peek() in ("?", "+"):
            self.i += 1  # lazy or possessive: fewer ways to match, never more
        if self.peek() in ("*", "+", "?", "{"):
            raise self.fail(f"'{self.peek()}'", "it repeats a quantifier (group the first: (?:a*)*)")
        return Repeat(atom, low, high, (start, self.i))

    def counts(self) -> tuple[int, int | None]:
        start = self.i
        end = self.p.find("}", start)
        body = self.p[start + 1:end] if end > 0 else ""
        low_text, comma, high_text = body.partition(",")
        if end < 0 or not low_text.isdigit() or not (high_text.isdigit() or not high_text):
            raise self.fail("'{'", "a repetition count is {n}, {n,} or {n,m} (write a literal '{' as '\\{')", start)
        if len(low_text) > 6 or len(high_text) > 6:
            raise self.fail("a repetition count", "counts above 999999 are not accepted", start)
        low = int(low_text)
        high: int | None = int(high_text) if high_text else (None if comma else low)
        if high is not None and high < low:
            raise self.fail("a repetition count", f"{{{body}}} has its bounds the wrong way round", start)
        self.i = end + 1
        return low, high

    def escape(self) -> tuple[Node, bool]:
        start = self.i
        c = self.peek(1)
        if c in ("b", "B", "A"):
            self.i += 2
            return Empty(), False
        sets = self.class_escape()
        if sets is not None:
            return Chars(*sets, start), True
        literal = char_set((self.literal_escape(),) * 2)
        return Chars(literal, literal, start), True

    def class_escape(self) -> tuple[CharSet, CharSet] | None:
        """A ``\\d``-style class as (Java's set, Python's set), or None for other escapes (nothing consumed)."""
        c = self.peek(1)
        if c and c in "dDwWsS":
            self.i += 2
            return class_sets(c)
        return None

    def literal_escape(self) -> int:
        """The code point of an escaped literal at ``self.i`` (the backslash), consumed."""
        start = self.i
        c = self.peek(1)
        if not c:
            raise self.fail("'\\'", "it escapes nothing")
        if c in _LITERAL_ESCAPES:
            self.i += 2
            return _LITERAL_ESCAPES[c]
        if c in _PUNCTUATION:
            self.i += 2
            return ord(c)
        if c in ("x", "u"):
            digits = 2 if c == "x" else 4
            text = self.p[start + 2:start + 2 + digits]
            if len(text) != digits or any(d not in "0123456789abcdefABCDEF" for d in text):
                raise self.fail(f"'\\{c}'", f"write \\{c} with exactly {digits} hexadecimal digits", start)
            self.i += 2 + digits
            return int(text, 16)
        if c.isdigit():
            raise self.fail(f"'\\{c}'", "backreferences and octal escapes are not accepted (a backreference is not a "
                                       "regular expression; write a character as \\xhh)", start)
        raise self.fail(f"'\\{c}'", "this escape is unknown to one of Python and Java or means different things in "
                                   "them (e.g. \\v, \\Z, \\p{...}, \\Q...\\E, \\h)", start)

    def char_class(self) -> Chars:
        start = self.i
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        if self.peek() == "]":
            raise self.fail("']'", "write a ']' in a class as '\\]'")
        java: list[CharSet] = []
        python: list[CharSet] = []
        while True:
            c = self.peek()
            if not c:
                raise self.fail("'['", "the class is never closed", start)
            if c == "]":
                self.i += 1
                break
            if c == "[":
                raise self.fail("'[' inside a class", "Java reads it as a nested class, Python as a literal (write "
                                                      "'\\[')")
            if self.p.startswith(("&&", "||", "--", "~~"), self.i):
                raise self.fail(f"'{self.p[self.i:self.i + 2]}' inside a class",
                                "Java reads '&&' as an intersection and Python reserves these pairs for set "
                                "operations (escape one of them)")
            if c == "\\":
                found = self.class_escape()
                if found is not None:
                    java.append(found[0])
                    python.append(found[1])
                    if self.peek() == "-" and self.peek(1) not in ("]", ""):
                        raise self.fail("'-'", "a range cannot start or end at a class like \\d (escape the '-')")
                    continue
                if self.peek(1) == "b":
                    raise self.fail("'\\b' inside a class", "it is a backspace in Python and an error in Java")
                low = self.literal_escape()
            else:
                self.i += 1
                low = ord(c)
            high = low
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                if self.peek() == "\\":
                    if self.class_escape() is not None:
                        raise self.fail("'-'", "a range cannot start or end at a class like \\d (escape the '-')")
                    high = self.literal_escape()
                elif self.peek() == "[":
                    raise self.fail("'[' inside a class", "Java reads it as a nested class (write '\\[')")
                else:
                    high = ord(self.peek())
                    self.i += 1
            exact = char_set((low, high))
            java.append(exact)
            python.append(exact)
        if negated:
            return Chars(complement(union(*java)), complement(union(*python)), start)
        return Chars(union(*java), union(*python), start)
