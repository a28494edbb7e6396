"""Bounds, probabilities and preconditions are sympy expressions over a claim's parameters.

Parsing is restricted: every identifier must be a declared parameter, a declared hidden constant or a
whitelisted function, so a typo in a claim file is an error naming the field, never a silent new symbol.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache

import sympy
from sympy.parsing.sympy_parser import convert_xor, parse_expr, standard_transformations

from .errors import LemmacheckError

# Functions a bound may use. Anything else is rejected at load time.
FUNCTIONS: dict[str, object] = {
    "log": sympy.log,
    "ln": sympy.log,
    "exp": sympy.exp,
    "sqrt": sympy.sqrt,
    "min": sympy.Min,
    "max": sympy.Max,
    "abs": sympy.Abs,
    "floor": sympy.floor,
    "ceil": sympy.ceiling,
    "acos": sympy.acos,
    "asin": sympy.asin,
    "atan": sympy.atan,
    "cos": sympy.cos,
    "sin": sympy.sin,
    "erf": sympy.erf,
    "erfc": sympy.erfc,
    "erfinv": sympy.erfinv,
    # the standard normal's distribution function and quantile (z_{1-delta} = normal_quantile(1 - delta))
    "normal_cdf": sympy.Lambda(_t := sympy.Dummy("t"), (1 + sympy.erf(_t / sympy.sqrt(2))) / 2),
    "normal_quantile": sympy.Lambda(_t, sympy.sqrt(2) * sympy.erfinv(2 * _t - 1)),
    "binomial": sympy.binomial,
    "pi": sympy.pi,
    "e": sympy.E,
    "inf": sympy.oo,
}
_LOGIC = {"and"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


class ExpressionError(LemmacheckError, ValueError):
    """Raised with a message that the claim loader prefixes with the file and field."""


_PAIRS = {")": "(", "]": "["}


def syntax_problem(text: str) -> str | None:
    """What is wrong with an expression's syntax, in its own terms and 1-based columns (not the tokenizer's):
    an unbalanced parenthesis, a dangling operator, or Python's own pointer into the text."""
    stack: list[tuple[str, int]] = []
    for col, ch in enumerate(text, 1):
        if ch in "([":
            stack.append((ch, col))
        elif ch in ")]":
            if not stack:
                return f"unbalanced '{ch}' at column {col}: nothing to close (remove it or add its opening '{_PAIRS[ch]}')"
            opened, at = stack.pop()
            if opened != _PAIRS[ch]:
                return f"'{ch}' at column {col} closes the '{opened}' opened at column {at}"
    if stack:
        ch, col = stack[-1]
        return f"unbalanced '{ch}' at column {col}: it is never closed (add '{')' if ch == '(' else ']'}')"
    stripped = text.rstrip()
    if stripped and stripped[-1] in "+-*/^,<>=":
        return f"the expression ends with the operator '{stripped[-1]}' at column {len(stripped)}: an operand is missing"
    try:
        compile(text.replace("^", "**").strip(), "<bound>", "eval")
    except SyntaxError as exc:
        col = exc.offset or 1
        near = text.strip()[max(0, col - 1):col + 9]
        return f"invalid syntax at column {col} (near '{near}')" if near else f"invalid syntax at column {col}"
    return None


@dataclass(frozen=True)
class Expr:
    """A parsed expression and the text it came from (kept verbatim for reports)."""

    text: str
    sym: sympy.Basic
    names: frozenset[str]

    def evaluate(self, values: Mapping[str, float]) -> float:
        missing = [n for n in self.names if n not in values]
        if missing:
            raise ExpressionError(f"'{self.text}' needs values for {sorted(missing)}")
        # the type travels with each value: sympy substitutes an int exactly and a float as a Float
        key = tuple((n, type(values[n]), values[n]) for n in sorted(self.names))
        try:
            hash(key)
        except TypeError:  # an unhashable value (an array): evaluated uncached
            return _evaluate.__wrapped__(self.sym, key)
        return _evaluate(self.sym, key)

    def holds(self, values: Mapping[str, float]) -> bool:
        """Truth value of a relational/boolean expression (a `requires`)."""
        return self.evaluate(values) != 0.0

    @cached_property
    def latex(self) -> str:
        return sympy.latex(self.sym)

    @cached_property
    def mathml(self) -> str:
        return sympy.mathml(self.sym, printer="presentation")

    def with_constants(self, constants: Mapping[str, float]) -> Expr:
        """The same expression with hidden constants replaced by numbers (e.g. the bound's shape, C=1)."""
        sym = self.sym.subs({sympy.Symbol(k): v for k, v in constants.items()})
        return Expr(self.text, sym, frozenset(n for n in self.names if n not in constants))

    def log_elasticity(self, name: str, values: Mapping[str, float]) -> float:
        """d log(expr) / d log(name) at `values`: the exponent a power law would have locally."""
        x = sympy.Symbol(name)
        if name not in self.names:
            return 0.0
        try:
            d = sympy.diff(sympy.log(self.sym), x) * x
            subs = {sympy.Symbol(n): values[n] for n in self.names}
            out = float(sympy.N(d.subs(subs)))
            if math.isfinite(out) and not self.sym.has(sympy.floor, sympy.ceiling):
                return out
        except (TypeError, ValueError, RecursionError):  # sympy cannot differentiate max/min/floor at a point
            pass
        # A central difference over +-5% in log(name): wide enough that floor/ceil steps average out into the
        # exponent a power law would have there, narrow enough to stay local.
        h = 0.05
        hi = self.evaluate({**values, name: values[name] * math.exp(h)})
        lo = self.evaluate({**values, name: values[name] * math.exp(-h)})
        if hi <= 0 or lo <= 0:
            raise ExpressionError(f"'{self.text}' is not positive near {name} = {values[name]}: no log-elasticity")
        return (math.log(hi) - math.log(lo)) / (2 * h)


@lru_cache(maxsize=1 << 16)
def _evaluate(sym: sympy.Basic, values: tuple[tuple[str, type, float], ...]) -> float:
    """The expression's value at `values`, 30 digits then rounded to a float. Cached: a run evaluates the same
    bound at the same configuration many times (each shard of an early-stopping configuration, then the
    verdicts), and sympy's substitution costs milliseconds."""
    out = sym.subs({sympy.Symbol(n): v for n, _, v in values})
    if isinstance(out, sympy.logic.boolalg.BooleanAtom) or out in (sympy.true, sympy.false):
        return float(bool(out))
    if isinstance(out, (sympy.Rel, sympy.logic.boolalg.Boolean)):
        return float(bool(out.simplify()))
    return float(sympy.N(out, 30))


def parse(text: str | float, allowed: set[str] | frozenset[str]) -> Expr:
    """Parse `text` allowing only `allowed` symbol names plus FUNCTIONS; raise ExpressionError otherwise."""
    if isinstance(text, bool):
        raise ExpressionError(f"expected an expression, got boolean {text!r}")
    if isinstance(text, (int, float)):
        if isinstance(text, float) and not math.isfinite(text):
            raise ExpressionError(f"{text!r} is not a finite number")
        text = repr(text)
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("expected a non-empty expression string")
    names = set(_IDENT.findall(re.sub(r"\d+\.?\d*[eE][+-]?\d+", "0", text)))
    unknown = sorted(n for n in names if n not in allowed and n not in FUNCTIONS and n not in _LOGIC)
    if unknown:
        raise ExpressionError(
            f"unknown name(s) {unknown} in '{text}'; allowed: parameters {sorted(allowed)} "
            f"and functions {sorted(k for k in FUNCTIONS)}"
        )
    local: dict[str, object] = {n: sympy.Symbol(n) for n in allowed}
    local.update(FUNCTIONS)
    glob = {"Integer": sympy.Integer, "Float": sympy.Float, "Rational": sympy.Rational, "Symbol": sympy.Symbol}
    # 'and' joins preconditions; parse each part alone because '&' binds tighter than '>='.
    parts = re.split(r"\s+and\s+", text.strip())
    try:
        syms = [parse_expr(p, local_dict=local, global_dict=dict(glob),
                           transformations=standard_transformations + (convert_xor,)) for p in parts]
    except Exception as exc:  # noqa: BLE001  (sympy raises a zoo of types for syntax errors)
        # say what is wrong in the expression's own terms; sympy's message only when we cannot tell
        problem = syntax_problem(text) or f"{type(exc).__name__}: {exc}"
        raise ExpressionError(f"cannot parse '{text}': {problem}") from None
    sym = syms[0] if len(syms) == 1 else sympy.And(*syms)
    used = frozenset(str(s) for s in sym.free_symbols)
    return Expr(text, sym, used)
