"""Catastrophic backtracking, decided on a pattern's automaton instead of guessed from its text.

Spark's ``RLIKE`` runs Java's regex engine and Python's ``re`` is of the same kind: both backtrack, trying the ways a
pattern can match one after the other. When some text can be matched in exponentially many ways (``(a+)+``,
``(a|a)*``, ``(\\w|\\d)+``) a failing value of a few dozen characters takes ages; when it can be matched in
polynomially many (``.*a.*a.*``, Cloudflare's 2019 ``.*(?:.*=.*)``) long values take n² or n³ steps. How many ways
there are is the *ambiguity* of the pattern's automaton, which can be decided exactly (Weber and Seidl, 1991;
applied to backtracking matchers by Weideman, van der Merwe, Berglund and Watson, CIAA 2016)::

    pattern ─► tree (regex_syntax: the subset both engines read alike) ─► position automaton, keeping apart the
    ways a backtracking engine keeps apart (``(a+)+`` has two edges a→a: the inner and the outer loop)
       │
       ├─ exponential: a state q with two different paths q → q reading the same text; found as a strongly connected
       │  component of the automaton squared holding a pair (q, q) and a pair (p, p'), p ≠ p'
       └─ polynomial of degree d: d chained pairs of loops p ≠ q with paths p → p, p → q, q → q all reading one
          text (a search in the automaton cubed); matching then takes up to n^(d+1) steps

It runs once with Java's character sets and once with Python's. Every state counts as accepting (a failing match
tries every prefix), anchors and word boundaries are taken as always true, and lazy, possessive and atomic forms as
plain ones, so the analysis sees at least the ways an engine has: it may refuse a harmless pattern, never accept a
catastrophic one. Bounded repetitions ``x{m,n}`` are taken as loops for
the exponential check (``(a|a){30}`` has 2^30 ways) and expanded into copies for the polynomial one (``\\d{3}\\d{4}``
is fine), unless the copies would be too many.

Refused: exponential ambiguity, and polynomial of degree above :data:`MAX_DEGREE` (1: at worst quadratic, as
``[a-z]+[a-z0-9]*`` or ``.*@.*``, which costs milliseconds on values of thousands of characters).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, TypeVar

from schema_registry.regex_syntax import (
    Alt,
    Chars,
    CharSet,
    Empty,
    Node,
    Repeat,
    Seq,
    UnsupportedSyntaxError,
    intersect,
    parse,
)

logger = logging.getLogger(__name__)

MAX_PATTERN_LENGTH = 1000
"""Longest pattern accepted, in characters."""
MAX_DEGREE = 1
"""Highest polynomial degree of ambiguity accepted (1: matching takes at worst quadratic time)."""
EXPAND_LIMIT = 200
"""A bounded repetition is expanded into copies for the polynomial check while they hold at most this many
characters; beyond, it is taken as a loop (which can only find more ways to match)."""
WORK_LIMIT = 200_000
"""Steps of analysis a pattern may take; a pattern that needs more is refused as too complex to check."""

Span = tuple[int, int]
_N = TypeVar("_N", bound=Hashable)


class _TooComplex(Exception):
    """The analysis ran out of its step budget."""


@lru_cache(maxsize=4096)
def pattern_problem(pattern: str) -> str | None:
    """Why a semantic type's ``pattern`` is refused, or None when it is accepted.

    The pattern must be in the syntax subset of :mod:`schema_registry.regex_syntax` and free of catastrophic
    backtracking (exponential, or polynomial above :data:`MAX_DEGREE`) on backtracking engines (Java's, which Spark
    runs, and Python's ``re``). The answer names the pattern and the part of it at fault.
    """
    if len(pattern) > MAX_PATTERN_LENGTH:
        return f"pattern of {len(pattern)} characters is longer than the {MAX_PATTERN_LENGTH} accepted"
    try:
        tree = parse(pattern)
        engines: tuple[tuple[Literal["java", "python"], str], ...] = (
            ("java", "Java's regex engine, which Spark runs"), ("python", "Python's re"))
        for engine, name in engines:
            span = _Automaton(tree, expand=False, engine=engine).exponential()
            if span is not None:
                return (f"pattern {pattern!r} can take exponential time on a backtracking regex engine ({name}): "
                        f"{_quote(pattern, span)} can match the same text in more than one way, repeatedly; write it "
                        r"so that each character can be matched one way only (e.g. '(a+)+' as 'a+', '(\w|\d)+' as "
                        r"'\w+')")
            degree, spans = _Automaton(tree, expand=True, engine=engine).polynomial_degree()
            if degree > MAX_DEGREE:
                parts = ", ".join(_quote(pattern, s) for s in spans)
                return (f"pattern {pattern!r} can take time growing as the length of the value to the power "
                        f"{degree + 1} on a backtracking regex engine ({name}): the repetitions {parts} can split "
                        f"the same text between them in many ways; at most power {MAX_DEGREE + 1} (as '.*a.*') is "
                        "accepted")
    except UnsupportedSyntaxError as e:
        return f"pattern {pattern!r}: {e}"
    except (_TooComplex, RecursionError):
        return f"pattern {pattern!r} is too complex to check for catastrophic backtracking"
    return None


def _quote(pattern: str, span: Span) -> str:
    return repr(pattern[span[0]:span[1]])


def _size(node: Node) -> int:
    if isinstance(node, Chars):
        return 1
    if isinstance(node, Seq | Alt):
        return sum(_size(item) for item in node.items)
    if isinstance(node, Repeat):
        return _size(node.item)
    return 0


# --- the automaton ---------------------------------------------------------------------------------------------------

def _cap(n: int) -> int:
    # only "one way" or "more than one" matters
    return min(n, 2)


@dataclass
class _Fragment:
    """Glushkov's sets of a sub-pattern, as multisets (position -> number of ways)."""

    first: dict[int, int]
    last: dict[int, int]
    empty: int  # ways to match the empty text


class _Automaton:
    """The position automaton of a pattern (state 0: the start; state i > 0: the i-th character position), whose
    edges count the distinct ways a backtracking engine can go from one position to the next."""

    def __init__(self, tree: Node, *, expand: bool, engine: Literal["java", "python"]) -> None:
        self.expand = expand
        self.java = engine == "java"
        self.sets: list[CharSet] = [()]
        self.edges: list[dict[int, int]] = [{}]
        self.loop_spans: dict[tuple[int, int], set[Span]] = {}
        self.work = 0
        root = self._fragment(tree)
        for q, n in root.first.items():
            self._link(0, q, n)
        self._meets: dict[tuple[int, int], CharSet] = {}

    # construction

    def _step(self, n: int = 1) -> None:
        self.work += n
        if self.work > WORK_LIMIT:
            raise _TooComplex

    def _position(self, chars: CharSet) -> int:
        self._step()
        self.sets.append(chars)
        self.edges.append({})
        return len(self.sets) - 1

    def _link(self, p: int, q: int, n: int, loop: Span | None = None) -> None:
        self._step()
        if n == 0:
            return
        out = self.edges[p]
        out[q] = _cap(out.get(q, 0) + n)
        if loop is not None:
            self.loop_spans.setdefault((p, q), set()).add(loop)

    def _concat(self, a: _Fragment, b: _Fragment) -> _Fragment:
        for p, m in a.last.items():
            for q, n in b.first.items():
                self._link(p, q, m * n)
        first = dict(a.first)
        if a.empty:
            for q, n in b.first.items():
                first[q] = _cap(first.get(q, 0) + a.empty * n)
        last = dict(b.last)
        if b.empty:
            for p, m in a.last.items():
                last[p] = _cap(last.get(p, 0) + b.empty * m)
        return _Fragment(first, last, _cap(a.empty * b.empty))

    def _fragment(self, node: Node) -> _Fragment:
        if isinstance(node, Chars):
            pos = self._position(node.java if self.java else node.python)
            return _Fragment({pos: 1}, {pos: 1}, 0)
        if isinstance(node, Empty):
            return _Fragment({}, {}, 1)
        if isinstance(node, Seq):
            out = _Fragment({}, {}, 1)
            for item in node.items:
                out = self._concat(out, self._fragment(item))
            return out
        if isinstance(node, Alt):
            out = _Fragment({}, {}, 0)
            for item in node.items:
                f = self._fragment(item)
                for q, n in f.first.items():
                    out.first[q] = _cap(out.first.get(q, 0) + n)
                for p, n in f.last.items():
                    out.last[p] = _cap(out.last.get(p, 0) + n)
                out.empty = _cap(out.empty + f.empty)
            return out
        return self._repeat(node)

    def _repeat(self, node: Repeat) -> _Fragment:
        item, low, high = node.item, node.low, node.high
        if high == 0:
            return _Fragment({}, {}, 1)
        if high == 1:
            f = self._fragment(item)
            if low == 0:
                f.empty = _cap(f.empty + 1)
            return f
        copies = max(low, high or 0)
        if self.expand and (high is not None or low >= 2) and _size(item) * copies <= EXPAND_LIMIT:
            out = _Fragment({}, {}, 1)
            for _ in range(low - (1 if high is None else 0)):
                out = self._concat(out, self._fragment(item))
            if high is None:  # x{m,} = x^(m-1) x+
                return self._concat(out, self._loop(item, 1, node.span))
            tail = _Fragment({}, {}, 1)  # x{0,k} = (x(x(...)?)?)?: one path per count, as an engine tries them
            for _ in range(high - low):
                inner = self._concat(self._fragment(item), tail)
                tail = _Fragment(inner.first, inner.last, _cap(inner.empty + 1))
            return self._concat(out, tail)
        return self._loop(item, min(low, 1), node.span)

    def _loop(self, item: Node, low: int, span: Span) -> _Fragment:
        """``item*`` (``low`` 0) or ``item+`` (``low`` 1)."""
        f = self._fragment(item)
        for p, m in f.last.items():
            for q, n in f.first.items():
                self._link(p, q, m * n, loop=span)
        return _Fragment(f.first, f.last, _cap(1 + f.empty) if low == 0 else f.empty)

    # analysis

    def _meet(self, p: int, q: int) -> CharSet:
        key = (p, q) if p <= q else (q, p)
        found = self._meets.get(key)
        if found is None:
            self._step()
            found = self._meets[key] = intersect(self.sets[p], self.sets[q])
        return found

    def _components(self) -> tuple[list[list[int]], list[int]]:
        """The strongly connected components that hold a cycle, and each state's component index (-1: none)."""
        comps = _strongly_connected(range(len(self.sets)), lambda p: self.edges[p], self._step)
        index = [-1] * len(self.sets)
        out: list[list[int]] = []
        for comp in comps:
            if len(comp) > 1 or comp[0] in self.edges[comp[0]]:
                for p in comp:
                    index[p] = len(out)
                out.append(comp)
        return out, index

    def _widest_loop(self, comp: Iterable[int]) -> Span:
        members = set(comp)
        spans = [s for (p, q), found in self.loop_spans.items() if p in members and q in members for s in found]
        return max(spans, key=lambda s: (s[1] - s[0], -s[0]))

    def exponential(self) -> Span | None:
        """The span of a repetition with exponential ambiguity, or None when there is none."""
        comps, index = self._components()
        for c, comp in enumerate(comps):
            inside = {p: [q for q in self.edges[p] if index[q] == c] for p in comp}
            if any(self.edges[p][q] > 1 for p in comp for q in inside[p]):
                return self._widest_loop(comp)

            def pairs(node: tuple[int, int], inside: dict[int, list[int]] = inside) -> Iterator[tuple[int, int]]:
                p1, p2 = node
                for q1 in inside[p1]:
                    for q2 in inside[p2]:
                        self._step()
                        if self._meet(q1, q2):
                            yield q1, q2

            for pair_comp in _strongly_connected([(p, p) for p in comp], pairs, self._step):
                if len(pair_comp) > 1 and any(a != b for a, b in pair_comp) and any(a == b for a, b in pair_comp):
                    return self._widest_loop(comp)
        return None

    def polynomial_degree(self) -> tuple[int, list[Span]]:
        """The polynomial degree of ambiguity (the automaton must have no exponential one) and the spans of the
        repetitions along a longest chain."""
        comps, _ = self._components()
        reach = [self._reachable(comp[0]) for comp in comps]
        later = [[d for d in range(len(comps)) if d != c and comps[d][0] in reach[c]] for c in range(len(comps))]
        best: dict[int, tuple[int, list[int]]] = {}

        def chain(c: int) -> tuple[int, list[int]]:
            """The longest chain of IDA pairs from component ``c`` on: its length and its components."""
            if c not in best:
                found: tuple[int, list[int]] = (0, [])
                for d in later[c]:
                    if found[0] < 1 + len(comps) and self._ida(comps[c], comps[d], reach[c]):
                        tail = max((chain(e) for e in [d, *later[d]]), key=lambda t: t[0])
                        if tail[0] + 1 > found[0]:
                            found = (tail[0] + 1, [c, d, *tail[1]])
                best[c] = found
            return best[c]

        degree, path = max((chain(c) for c in range(len(comps))), key=lambda t: t[0], default=(0, []))
        return degree, [self._widest_loop(comps[c]) for c in dict.fromkeys(path)]

    def _reachable(self, start: int) -> set[int]:
        seen, todo = {start}, [start]
        while todo:
            for q in self.edges[todo.pop()]:
                self._step()
                if q not in seen:
                    seen.add(q)
                    todo.append(q)
        return seen

    def _ida(self, cp: list[int], cq: list[int], from_p: set[int]) -> bool:
        """Whether some p in ``cp`` and q in ``cq`` have paths p → p, p → q and q → q reading one text."""
        in_p, in_q = set(cp), set(cq)
        for p in cp:
            for q in cq:
                start, goal = (p, p, q), (p, q, q)
                seen = {start}
                todo = deque([start])
                while todo:
                    x, y, z = todo.popleft()
                    for x2 in self.edges[x]:
                        if x2 not in in_p:
                            continue
                        for y2 in self.edges[y]:
                            if y2 not in from_p:
                                continue
                            xy = self._meet(x2, y2)
                            if not xy:
                                continue
                            for z2 in self.edges[z]:
                                self._step()
                                if z2 not in in_q or not intersect(xy, self.sets[z2]):
                                    continue
                                node = (x2, y2, z2)
                                if node == goal:
                                    return True
                                if node not in seen:
                                    seen.add(node)
                                    todo.append(node)
        return False


def _strongly_connected(nodes: Iterable[_N], successors: Callable[[_N], Iterable[_N]],
                        step: Callable[[], None]) -> list[list[_N]]:
    """Tarjan's strongly connected components of the part of a graph reachable from ``nodes`` (iterative)."""
    index: dict[_N, int] = {}
    low: dict[_N, int] = {}
    on_stack: set[_N] = set()
    stack: list[_N] = []
    out: list[list[_N]] = []
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work: list[tuple[_N, Iterator[_N]]] = [(root, iter(successors(root)))]
        while work:
            node, it = work[-1]
            pushed = False
            for nxt in it:
                step()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(successors(nxt))))
                    pushed = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if pushed:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                out.append(comp)
    return out
