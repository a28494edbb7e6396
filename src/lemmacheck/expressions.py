"""Bounds, probabilities and preconditions are sympy expressions over a claim's parameters.

Parsing is restricted: every identifier must be a declared parameter, a declared hidden constant or a
whitelisted function, so a typo in a claim file is an error naming the field, never a silent new symbol.

sympy loads on first use (~0.4 s of a process's start-up). An expression made only of numbers, parameters,
+ - * / ** and log/ln/exp/sqrt, with comparisons joined by `and`, is checked at load by Python's own parser and
evaluated without sympy where the result is provably sympy's (`_fast_value`, `_fast_truth`); anything else, and
any value those decline, goes through sympy exactly as before.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from functools import cached_property, lru_cache
from typing import Any

from .errors import LemmacheckError

# Functions a bound may use. Anything else is rejected at load time.
FUNCTION_NAMES = ("log", "ln", "exp", "sqrt", "min", "max", "abs", "floor", "ceil", "acos", "asin", "atan", "cos",
                  "sin", "erf", "erfc", "erfinv", "normal_cdf", "normal_quantile", "binomial", "pi", "e", "inf")


@lru_cache(maxsize=1)
def _functions() -> dict[str, object]:
    """FUNCTION_NAMES as sympy objects."""
    import sympy

    t = sympy.Dummy("t")
    return {
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
        "normal_cdf": sympy.Lambda(t, (1 + sympy.erf(t / sympy.sqrt(2))) / 2),
        "normal_quantile": sympy.Lambda(t, sympy.sqrt(2) * sympy.erfinv(2 * t - 1)),
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


class Expr:
    """A parsed expression and the text it came from (kept verbatim for reports). `sym`, its sympy form, is built
    on first use; `names` are its free symbols."""

    def __init__(self, text: str, sym: Any = None, names: frozenset[str] | None = None, *,
                 allowed: frozenset[str] = frozenset(), parts: tuple[ast.expr, ...] | None = None):
        self.text = text
        self._allowed = allowed  # what `sym` is parsed against when it was not given
        self._parts = parts  # the syntax trees of a simple expression (_simple_parts), else None
        if sym is not None:
            self.__dict__["sym"] = sym
            self.__dict__["names"] = frozenset(str(s) for s in sym.free_symbols) if names is None else names

    @cached_property
    def sym(self) -> Any:
        return _sympy_parse(self.text, self._allowed)

    @cached_property
    def names(self) -> frozenset[str]:
        return frozenset(str(s) for s in self.sym.free_symbols)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Expr):
            return NotImplemented
        if self.text != other.text:
            return False
        if "sym" not in self.__dict__ and "sym" not in other.__dict__ and self._allowed == other._allowed:
            return True  # the same text against the same names: the same parse
        return (self.sym, self.names) == (other.sym, other.names)

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"

    def evaluate(self, values: Mapping[str, float]) -> float:
        if self._parts is not None:
            fast = _fast_evaluate(self._parts, values)
            if fast is not None:
                return fast
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
        import sympy

        return sympy.latex(self.sym)

    @cached_property
    def mathml(self) -> str:
        import sympy

        return sympy.mathml(self.sym, printer="presentation")

    def with_constants(self, constants: Mapping[str, float]) -> Expr:
        """The same expression with hidden constants replaced by numbers (e.g. the bound's shape, C=1)."""
        import sympy

        sym = self.sym.subs({sympy.Symbol(k): v for k, v in constants.items()})
        return Expr(self.text, sym, frozenset(n for n in self.names if n not in constants))

    def log_elasticity(self, name: str, values: Mapping[str, float]) -> float:
        """d log(expr) / d log(name) at `values`: the exponent a power law would have locally."""
        import sympy

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
def _evaluate(sym: Any, values: tuple[tuple[str, type, float], ...]) -> float:
    """The expression's value at `values`, 30 digits then rounded to a float. Cached: a run evaluates the same
    bound at the same configuration many times (each shard of an early-stopping configuration, then the
    verdicts), and sympy's substitution costs milliseconds."""
    import sympy

    out = sym.subs({sympy.Symbol(n): v for n, _, v in values})
    if isinstance(out, sympy.logic.boolalg.BooleanAtom) or out in (sympy.true, sympy.false):
        return float(bool(out))
    if isinstance(out, (sympy.Rel, sympy.logic.boolalg.Boolean)):
        return float(bool(out.simplify()))
    return float(sympy.N(out, 30))


def parse(text: str | float, allowed: set[str] | frozenset[str]) -> Expr:
    """Parse `text` allowing only `allowed` symbol names plus FUNCTION_NAMES; raise ExpressionError otherwise."""
    if isinstance(text, bool):
        raise ExpressionError(f"expected an expression, got boolean {text!r}")
    if isinstance(text, (int, float)):
        if isinstance(text, float) and not math.isfinite(text):
            raise ExpressionError(f"{text!r} is not a finite number")
        text = repr(text)
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("expected a non-empty expression string")
    names = set(_IDENT.findall(re.sub(r"\d+\.?\d*[eE][+-]?\d+", "0", text)))
    unknown = sorted(n for n in names if n not in allowed and n not in FUNCTION_NAMES and n not in _LOGIC)
    if unknown:
        raise ExpressionError(
            f"unknown name(s) {unknown} in '{text}'; allowed: parameters {sorted(allowed)} "
            f"and functions {sorted(FUNCTION_NAMES)}"
        )
    allowed = frozenset(allowed)
    parts = _simple_parts(text, allowed)
    if parts is None:  # sympy parses it now, so that a claim file's error is reported at load
        return Expr(text, _sympy_parse(text, allowed))
    return Expr(text, allowed=allowed, parts=parts)


def _sympy_parse(text: str, allowed: frozenset[str]) -> Any:
    import sympy
    from sympy.parsing.sympy_parser import convert_xor, parse_expr, standard_transformations

    local: dict[str, object] = {n: sympy.Symbol(n) for n in allowed}
    local.update(_functions())
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
    return syms[0] if len(syms) == 1 else sympy.And(*syms)


# --------------------------------------------------------------------------- evaluation without sympy
#
# A simple expression's parts are Python syntax trees of numbers, names, + - * / ** (unary -, +), log/ln/exp/sqrt
# of one argument, and, at the top of a part, one comparison < <= > >=. Two evaluations decline (None: sympy
# decides) whatever they cannot prove equal to sympy's:
#
# * a value (`_fast_value`): a number, a parameter, or one + - * between two of them, or int / int: one IEEE
#   operation, as sympy's Integer/Float arithmetic rounds it (and its 30 digits then add nothing);
# * a truth value (`_fast_truth`): each side in floats with a bound on its distance from the exact value
#   (`_bounded`: every operation's rounding and the propagated error), decided only where the two sides are
#   16 such bounds apart and 1e-9 relative, so that sympy, rounding in its own order, is on the same side.

_CALLS = {"log": math.log, "ln": math.log, "exp": math.exp, "sqrt": math.sqrt}
_COMPARE = {ast.Lt: float.__lt__, ast.LtE: float.__le__, ast.Gt: float.__gt__, ast.GtE: float.__ge__}
_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_NUMBER = re.compile(r"(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_SYMPY_GLOBALS = {"Integer", "Float", "Rational", "Symbol"}
_U = 2.0 ** -53  # one IEEE operation's relative rounding
_LIBM = 2.0 ** -51  # log, exp, pow: within an ulp, counted twice
_ETA = 2.0 ** -1074  # one operation's absolute error on underflow
_EXACT_INT = 2 ** 53


def _simple_parts(text: str, allowed: frozenset[str]) -> tuple[ast.expr, ...] | None:
    """The parts of `text` (split at 'and' as sympy's parse is) as syntax trees when simple (above), else None.
    A part whose name-free subexpressions do not all evaluate (log(0), 1/0, sqrt(-1)) is not simple: sympy
    reports it at load. (One that sympy refuses only after cancelling names, `m >= log(m - m)`, is refused where
    sympy first parses it, at an evaluation the fast path declines.)"""
    parts = []
    for p in re.split(r"\s+and\s+", text.strip()):
        src = p.replace("^", "**").strip()  # sympy's convert_xor
        try:
            tree = ast.parse(src, mode="eval").body
        except SyntaxError:
            return None
        body = tree
        if isinstance(tree, ast.Compare):
            if len(tree.ops) != 1 or type(tree.ops[0]) not in _COMPARE:
                return None
            body = ast.Tuple([tree.left, tree.comparators[0]], ast.Load())
        for node in ast.walk(body):
            if isinstance(node, ast.Constant):
                number = _NUMBER.fullmatch(ast.get_source_segment(src, node) or "")
                # sympy keeps a float literal's digits beyond 15 (a Float finer than the double): not simple
                if (type(node.value) not in (int, float) or not number
                        or type(node.value) is float and len(number[1].replace(".", "").lstrip("0")) > 15):
                    return None
            elif isinstance(node, ast.Name):
                if node.id not in _CALLS and (node.id not in allowed or node.id in FUNCTION_NAMES
                                              or node.id in _SYMPY_GLOBALS):
                    return None
            elif isinstance(node, ast.Call):
                if (not isinstance(node.func, ast.Name) or node.func.id not in _CALLS or len(node.args) != 1
                        or node.keywords or isinstance(node.args[0], ast.Starred)):
                    return None
            elif isinstance(node, ast.BinOp):
                if not isinstance(node.op, _ARITH):
                    return None
            elif isinstance(node, ast.UnaryOp):
                if not isinstance(node.op, (ast.USub, ast.UAdd)):
                    return None
            elif not isinstance(node, (ast.Tuple, ast.Load, *_ARITH, ast.USub, ast.UAdd)):
                return None
            if isinstance(node, (ast.Call, ast.BinOp)) and not _has_names(node) and _bounded(node, {}) is None:
                return None
        if any(isinstance(n, ast.Name) and n.id in _CALLS and not _is_callee(n, body) for n in ast.walk(body)):
            return None  # a function's name used as a value
        parts.append(tree)
    if len(parts) > 1 and not all(isinstance(t, ast.Compare) for t in parts):
        return None
    return tuple(parts)


def _has_names(node: ast.expr) -> bool:
    return any(isinstance(n, ast.Name) and n.id not in _CALLS for n in ast.walk(node))


def _is_callee(name: ast.Name, body: ast.expr) -> bool:
    return any(isinstance(n, ast.Call) and n.func is name for n in ast.walk(body))


def _fast_evaluate(parts: tuple[ast.expr, ...], values: Mapping[str, Any]) -> float | None:
    if len(parts) == 1 and not isinstance(parts[0], ast.Compare):
        return _fast_value(parts[0], values)
    truths = [_fast_truth(t, values) for t in parts]
    return None if None in truths else float(all(truths))


def _leaf(node: ast.expr, values: Mapping[str, Any]) -> tuple[int | float, bool] | None:
    """A number or a parameter's value as (value, exact int), or None: a value sympy might hold otherwise (an
    int beyond 2**53, a numpy integer, a boolean)."""
    if isinstance(node, ast.UnaryOp):
        inner = _leaf(node.operand, values)
        return None if inner is None else (-inner[0] if isinstance(node.op, ast.USub) else inner[0], inner[1])
    if isinstance(node, ast.Constant):
        v = node.value
    elif isinstance(node, ast.Name):
        v = values.get(node.id)
    else:
        return None
    if type(v) is int and abs(v) <= _EXACT_INT:
        return v, True
    if isinstance(v, float) and math.isfinite(v):
        return float(v), False
    return None


def _fast_value(node: ast.expr, values: Mapping[str, Any]) -> float | None:
    leaf = _leaf(node, values)
    if leaf is not None:
        return float(leaf[0])
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        return None
    a, b = _leaf(node.left, values), _leaf(node.right, values)
    if a is None or b is None:
        return None
    (x, x_int), (y, y_int) = a, b
    if isinstance(node.op, ast.Div):
        return x / y if x_int and y_int and y != 0 else None  # int / int: sympy's Rational, correctly rounded
    out = x + y if isinstance(node.op, ast.Add) else x - y if isinstance(node.op, ast.Sub) else x * y
    if x_int and y_int:
        return float(out) if abs(out) <= _EXACT_INT else None
    return out if math.isfinite(out) else None


def _fast_truth(tree: ast.expr, values: Mapping[str, Any]) -> bool | None:
    if not isinstance(tree, ast.Compare):
        return None
    left, right = _bounded(tree.left, values), _bounded(tree.comparators[0], values)
    if left is None or right is None:
        return None
    (a, ea), (b, eb) = left, right
    if ea + eb and abs(a - b) <= 16 * (ea + eb) + 1e-9 * max(abs(a), abs(b)):
        return None  # too close to call in floats
    return _COMPARE[type(tree.ops[0])](a, b)


def _bounded(node: ast.expr, values: Mapping[str, Any]) -> tuple[float, float] | None:
    """(v, e): the value in floats and a bound on its distance from the exact value of the expression at these
    inputs; None where a float cannot follow sympy (a domain edge, an overflow, a value sympy holds otherwise)."""
    try:
        out = _bounded_op(node, values)
    except (OverflowError, ZeroDivisionError, ValueError):
        return None
    if out is None or not (math.isfinite(out[0]) and math.isfinite(out[1])):
        return None
    return out


def _bounded_op(node: ast.expr, values: Mapping[str, Any]) -> tuple[float, float] | None:
    if isinstance(node, (ast.Constant, ast.Name)):
        leaf = _leaf(node, values)
        if leaf is None:
            return None
        v = float(leaf[0])
        return v, (abs(v) * _U if isinstance(node, ast.Constant) and not leaf[1] else 0.0)
    if isinstance(node, ast.UnaryOp):
        inner = _bounded(node.operand, values)
        return None if inner is None else ((-inner[0], inner[1]) if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.Call):
        arg = _bounded(node.args[0], values)
        if arg is None:
            return None
        x, ex = arg
        name = node.func.id
        if name == "exp":
            v = math.exp(x)
            return v, v * math.expm1(ex) + v * _LIBM + _ETA
        if name == "sqrt":
            if x == 0 and ex == 0:
                return 0.0, 0.0
            if not ex < x / 2:
                return None
            v = math.sqrt(x)
            return v, ex / v + v * _U + _ETA
        if not (x > 0 and ex < x / 2):  # log, ln
            return None
        v = math.log(x)
        return v, -math.log1p(-ex / x) + abs(v) * _LIBM + _ETA
    if not isinstance(node, ast.BinOp):
        return None
    left, right = _bounded(node.left, values), _bounded(node.right, values)
    if left is None or right is None:
        return None
    (a, ea), (b, eb) = left, right
    op = node.op
    if isinstance(op, (ast.Add, ast.Sub)):
        v = a + b if isinstance(op, ast.Add) else a - b
        # the rounding counted on both terms: a bound whatever the order sympy adds a sum's terms in
        return v, ea + eb + 2 * _U * (abs(a) + abs(b)) + _ETA
    if isinstance(op, ast.Mult):
        v = a * b
        return v, abs(a) * eb + abs(b) * ea + ea * eb + 2 * _U * abs(v) + _ETA
    if isinstance(op, ast.Div):
        if not abs(b) > 2 * eb:
            return None
        v = a / b
        return v, (abs(a) * eb + abs(b) * ea) / (abs(b) * (abs(b) - eb)) + 2 * _U * abs(v) + _ETA
    # a ** b
    if a == 0 or not ea < abs(a) / 2:
        return None
    r = -math.log1p(-ea / abs(a))  # bounds |log|A| - log|a|| for the exact base A
    if eb == 0 and b.is_integer() and abs(b) <= 1024:
        v = a ** int(b)
        return v, abs(v) * math.expm1(abs(b) * r) + abs(v) * _LIBM + _ETA
    if a < 0:
        return None
    v = a ** b
    return v, abs(v) * math.expm1(eb * (abs(math.log(a)) + r) + abs(b) * r) + abs(v) * _LIBM + _ETA
