"""Test-only reference evaluator of rocprofiler-sdk derived-counter expressions.

Written from rocprofiler-sdk's ``counters/parser/parser.y`` (grammar) and ``counters/evaluate_ast.cpp``
(semantics), independently of perfonto's importer: values are vectors over a counter's instances;
``+ - * /`` combine equal-length vectors element-wise and broadcast a one-element side; ``/`` gives 0
where the divisor is 0; ``reduce(e, sum|avr|min|max)`` reduces all dimensions to one value;
``accumulate(C, MODE)`` is counter C read in accumulate mode (its own input); lower-case names are agent
properties; other names are base counters (inputs) or derived counters (evaluated recursively).
"""

from __future__ import annotations

import re

import numpy as np


def _divide(v, w):
    """``/`` as evaluate_ast.cpp computes it: 0 where the divisor is 0."""
    a, b = np.broadcast_arrays(v, w)
    return np.where(b == 0, 0.0, a / np.where(b == 0, 1.0, b))


class RocprofEval:
    """``derived``: name → expression; ``counters``: name (or ``accumulate(C,MODE)``) → vector;
    ``properties``: agent property → value."""

    def __init__(self, derived: dict[str, str], counters: dict[str, np.ndarray], properties: dict[str, float]):
        self.derived, self.counters, self.properties = derived, counters, properties
        self.cache: dict[str, np.ndarray] = {}

    def counter(self, name: str) -> np.ndarray:
        if name not in self.cache:
            self.cache[name] = self.eval(self.derived[name])
        return self.cache[name]

    def eval(self, text: str) -> np.ndarray:
        saved = getattr(self, "toks", None), getattr(self, "i", 0)  # a derived counter evaluates mid-parse
        self.toks = re.findall(r"\d+|[A-Za-z_][A-Za-z0-9_]*|[-+*/(),\[\]=]", text)
        self.i = 0
        try:
            v = self._sum()
            assert self.i == len(self.toks), text
            return v
        finally:
            self.toks, self.i = saved

    def _peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else ""

    def _take(self):
        self.i += 1
        return self.toks[self.i - 1]

    def _level(self, ops, operand, apply):
        """One left-associative precedence level: ``operand (op operand)*``."""
        v = operand()
        while self._peek() in ops:
            op = self._take()
            w = operand()
            v, w = self._order(v, w)
            v = apply(op, v, w)
        return v

    def _sum(self):
        return self._level(("+", "-"), self._prod, lambda op, v, w: v + w if op == "+" else v - w)

    @staticmethod
    def _order(v, w):
        """evaluate_ast.cpp swaps the operands when the left one is shorter (also for - and /)."""
        return (w, v) if v.size < w.size else (v, w)

    def _prod(self):
        return self._level(("*", "/"), self._atom, lambda op, v, w: v * w if op == "*" else _divide(v, w))

    def _atom(self):
        t = self._take()
        if t.isdigit():
            return np.array([float(t)])
        if t == "(":
            v = self._sum()
            assert self._take() == ")"
            return v
        if t == "reduce":
            assert self._take() == "("
            v = self._sum()
            assert self._take() == ","
            op = self._take()
            assert self._take() == ")", "reduce over some dimensions is not used by the test files"
            return np.array([{"sum": np.sum, "avr": np.mean, "min": np.min, "max": np.max}[op](v)])
        if t == "accumulate":
            assert self._take() == "("
            name = self._take()
            assert self._take() == ","
            mode = self._take()
            assert self._take() == ")"
            return np.asarray(self.counters[f"accumulate({name},{mode})"], dtype=float)
        if t in self.derived:
            return self.counter(t)
        if t in self.counters:
            return np.asarray(self.counters[t], dtype=float)
        return np.array([float(self.properties[t])])
