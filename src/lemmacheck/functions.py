"""Function classes a statement quantifies over ("for every activation that is L-Lipschitz and beta-smooth"),
drawn through `ctx.function(role)` (`ctx.activation()`, `ctx.loss()`) from the claim's declared class:

    inputs = { kind = "unit-sphere", n = "n", d = "d",
               activation = { class = "lipschitz-smooth", lipschitz = 1, smooth = 1 } }

A class is a catalogue of members a * phi(b * x + c) + e: named 1-D functions phi (BASES) with their constants
computed exactly, under the shifts and rescalings that keep the class's stated constants. Each member knows its
own constants (sup |phi'|, sup |phi''|, its range, phi(0)) and whether it is analytic (else its kinks) or a
polynomial, and the class admits a member only when they meet the claim's: lipschitz (sup |phi'| <= L), smooth
(sup |phi''| <= beta: phi' is beta-Lipschitz), and the optional bound (sup |phi| <= B) and at_zero (phi(0) equal
to the value); "analytic-non-polynomial" admits analytic members only, never a polynomial. The first admitted
member is the default, the one a run uses; hunts range over every admitted member (stratified: each is probed)
and, where the class bounds neither phi(0) nor sup |phi|, over value shifts phi + s with |s| up to 1e3
(SHIFT_DECADES), and pin the one that breaks the statement as `member` (a {"base", "a", "b", "c", "e"} table),
which the reproduce line carries.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .errors import EstimatorError

ROLES = ("activation", "loss")  # the functions a claim may quantify over, each an `inputs.<role>` table
RTOL = 1e-12  # a member's constant meets the claim's within this relative rounding

_S3 = math.sqrt(3.0)


@dataclass(frozen=True)
class Base:
    """A named function phi with its exact constants: sup |phi'| (lipschitz), sup |phi''| (smooth: the Lipschitz
    constant of phi'; None when phi' jumps), its range [low, high] and convexity."""
    name: str
    description: str
    f: Callable[[torch.Tensor], torch.Tensor]
    d1: Callable[[torch.Tensor], torch.Tensor]
    d2: Callable[[torch.Tensor], torch.Tensor] | None
    lipschitz: float
    smooth: float | None
    low: float
    high: float
    convex: bool = False
    analytic: bool = False  # a power series around every point (the "analytic" classes' condition)
    polynomial: bool = False
    kinks: tuple[float, ...] = ()  # where a non-analytic base's derivative of some order jumps

    def at(self, x: float) -> float:
        return float(self.f(torch.tensor(x, dtype=torch.float64)))


def _sig(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x)


def _huber_relu(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x <= 0, torch.zeros_like(x), torch.where(x < 1, x * x / 2, x - 0.5))


# Smooth bases first (the default member is the first admitted one: tanh when the constants allow it).
BASES: dict[str, Base] = {b.name: b for b in (
    Base("tanh", "tanh x (sup|phi'| = 1 at 0, sup|phi''| = 4/(3 sqrt 3) where tanh = 1/sqrt 3)", torch.tanh,
         lambda x: 1 - torch.tanh(x) ** 2, lambda x: -2 * torch.tanh(x) * (1 - torch.tanh(x) ** 2),
         1.0, 4 / (3 * _S3), -1.0, 1.0, analytic=True),
    Base("sin", "sin x", torch.sin, torch.cos, lambda x: -torch.sin(x), 1.0, 1.0, -1.0, 1.0, analytic=True),
    Base("softplus", "log(1 + e^x) (a smooth ReLU: phi' = sigmoid, sup|phi''| = 1/4)",
         torch.nn.functional.softplus, _sig, lambda x: _sig(x) * (1 - _sig(x)), 1.0, 0.25, 0.0, math.inf, True,
         analytic=True),
    Base("sigmoid", "1 / (1 + e^-x) (sup|phi'| = 1/4, sup|phi''| = 1/(6 sqrt 3))", _sig,
         lambda x: _sig(x) * (1 - _sig(x)), lambda x: _sig(x) * (1 - _sig(x)) * (1 - 2 * _sig(x)),
         0.25, 1 / (6 * _S3), 0.0, 1.0, analytic=True),
    Base("huber-relu", "0 for x <= 0, x^2/2 on [0, 1], x - 1/2 beyond (a Huberised ReLU: phi' = clamp(x, 0, 1))",
         _huber_relu, lambda x: x.clamp(0, 1), lambda x: ((x > 0) & (x < 1)).to(x.dtype), 1.0, 1.0, 0.0, math.inf,
         True, kinks=(0.0, 1.0)),
    Base("linear", "x", lambda x: x, torch.ones_like, torch.zeros_like, 1.0, 0.0, -math.inf, math.inf, True,
         analytic=True, polynomial=True),
    Base("relu", "max(x, 0)", torch.relu, lambda x: (x > 0).to(x.dtype), None, 1.0, None, 0.0, math.inf, True,
         kinks=(0.0,)),
    Base("leaky-relu", "max(x, x/10)", lambda x: torch.where(x > 0, x, x / 10),
         lambda x: torch.where(x > 0, torch.ones_like(x), torch.full_like(x, 0.1)), None, 1.0, None, -math.inf,
         math.inf, True, kinks=(0.0,)),
    Base("abs", "|x|", torch.abs, torch.sign, None, 1.0, None, 0.0, math.inf, True, kinks=(0.0,)),
)}


@dataclass(frozen=True)
class FunctionClass:
    name: str
    description: str
    required: tuple[str, ...]  # constants the claim must state
    smooth_only: bool  # members need a Lipschitz derivative
    convex_only: bool = False
    analytic_only: bool = False
    non_polynomial: bool = False


CONSTANTS = {
    "lipschitz": "sup |phi'| <= L",
    "smooth": "sup |phi''| <= beta (phi' is beta-Lipschitz)",
    "bound": "sup |phi| <= B (optional)",
    "at_zero": "phi(0) equals this value (optional)",
}
CLASSES: dict[str, FunctionClass] = {c.name: c for c in (
    FunctionClass("lipschitz", "every L-Lipschitz function (ReLU-type ones included)", ("lipschitz",), False),
    FunctionClass("lipschitz-smooth", "every L-Lipschitz, beta-smooth function", ("lipschitz", "smooth"), True),
    FunctionClass("convex-lipschitz-smooth", "every convex, L-Lipschitz, beta-smooth function (margin losses "
                  "such as the logistic loss log(1 + e^-z) = softplus(-z))", ("lipschitz", "smooth"), True, True),
    # statements "for every analytic, non-polynomial sigma" (e.g. a Gram's positive definiteness); smooth optional
    FunctionClass("analytic-non-polynomial", "every analytic, non-polynomial, L-Lipschitz function (and "
                  "beta-smooth when smooth is stated): tanh, softplus, sigmoid, sin, never ReLU-type kinks nor "
                  "polynomials", ("lipschitz",), True, analytic_only=True, non_polynomial=True),
)}
_FIELDS = {"class", "member", *CONSTANTS}


class FunctionSpecError(ValueError):
    """A malformed `inputs.<role>` table: `field` names the key (relative to the table) at fault."""

    def __init__(self, field: str, problem: str, fix: str = ""):
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"{field}: {problem}" + (f" ({fix})" if fix else ""))

    def __reduce__(self):  # picklable from a worker process (errors.ClaimError.__reduce__ says why)
        return (type(self), (self.field, self.problem, self.fix))


@dataclass(frozen=True)
class Member:
    """a * base(b * x + c) + e, with its constants computed exactly from the base's."""
    base: str
    a: float = 1.0
    b: float = 1.0
    c: float = 0.0
    e: float = 0.0

    @property
    def phi(self) -> Base:
        return BASES[self.base]

    @property
    def lipschitz(self) -> float:
        return abs(self.a * self.b) * self.phi.lipschitz

    @property
    def smooth(self) -> float | None:
        s = self.phi.smooth
        return None if s is None else abs(self.a) * self.b * self.b * s

    @property
    def range(self) -> tuple[float, float]:
        lo, hi = self.a * self.phi.low + self.e, self.a * self.phi.high + self.e
        return (lo, hi) if lo <= hi else (hi, lo)

    @property
    def bound(self) -> float:
        """sup |phi| (inf when unbounded)."""
        return max(abs(v) for v in self.range)

    @property
    def at_zero(self) -> float:
        return self.a * self.phi.at(self.c) + self.e

    @property
    def convex(self) -> bool:
        return self.phi.convex and self.a > 0

    @property
    def analytic(self) -> bool:
        return self.phi.analytic  # an affine change of argument and value keeps a power series one

    @property
    def polynomial(self) -> bool:
        return self.phi.polynomial

    @property
    def kinks(self) -> tuple[float, ...]:
        """Where the member is not analytic: the base's kinks k moved to b x + c = k."""
        return tuple(sorted((k - self.c) / self.b for k in self.phi.kinks))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.a * self.phi.f(self.b * x + self.c) + self.e

    def d1(self, x: torch.Tensor) -> torch.Tensor:
        """phi'(x)."""
        return self.a * self.b * self.phi.d1(self.b * x + self.c)

    def d2(self, x: torch.Tensor) -> torch.Tensor:
        """phi''(x) (almost everywhere); an EstimatorError for a member whose derivative jumps."""
        if self.phi.d2 is None:
            raise EstimatorError(f"{self.name}: no second derivative (its derivative jumps)")
        return self.a * self.b * self.b * self.phi.d2(self.b * x + self.c)

    def to_json(self) -> dict[str, Any]:
        return {"base": self.base, "a": self.a, "b": self.b, "c": self.c, "e": self.e}

    @property
    def name(self) -> str:
        """The member as a formula: "tanh(x)", "0.5*softplus(2x + 1) - 1"."""
        inner = ("" if self.b == 1 else "-" if self.b == -1 else f"{self.b:.6g}") + "x"
        if self.c:
            inner += f" {'+' if self.c > 0 else '-'} {abs(self.c):.6g}"
        out = ("" if self.a == 1 else "-" if self.a == -1 else f"{self.a:.6g}*") + f"{self.base}({inner})"
        if self.e:
            out += f" {'+' if self.e > 0 else '-'} {abs(self.e):.6g}"
        return out

    def constants(self) -> dict[str, float | None]:
        return {"lipschitz": self.lipschitz, "smooth": self.smooth, "bound": self.bound, "at_zero": self.at_zero}


def _number(spec: Mapping[str, Any], key: str) -> float | None:
    if key not in spec:
        return None
    v = spec[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise FunctionSpecError(key, f"{v!r} is not a finite number")
    if key != "at_zero" and v < 0:
        raise FunctionSpecError(key, f"{v!r} is negative", f"{CONSTANTS[key]}: a constant >= 0")
    return float(v)


def _class(spec: Any) -> FunctionClass:
    if not isinstance(spec, Mapping):
        raise FunctionSpecError("", f"expected a table, got {spec!r}",
                                'e.g. `{ class = "lipschitz-smooth", lipschitz = 1, smooth = 1 }`')
    extra = sorted(set(spec) - _FIELDS)
    if extra:
        raise FunctionSpecError(extra[0], "unknown field", f"allowed: {sorted(_FIELDS)}")
    if "class" not in spec:
        raise FunctionSpecError("class", "missing", f"add `class = ...`, one of {list(CLASSES)}")
    name = spec["class"]
    if name not in CLASSES:
        raise FunctionSpecError("class", f"unknown function class {name!r}", f"one of {list(CLASSES)}")
    cls = CLASSES[name]
    for k in cls.required:
        if k not in spec:
            raise FunctionSpecError(k, f"missing: class '{name}' needs its constant {k} ({CONSTANTS[k]})",
                                    f"add `{k} = ...`")
    if "smooth" in spec and not cls.smooth_only:
        raise FunctionSpecError("smooth", f"class '{name}' has no smoothness constant",
                                "use class 'lipschitz-smooth' for beta-smooth functions")
    for k in CONSTANTS:
        _number(spec, k)
    return cls


def admits(spec: Mapping[str, Any], m: Member) -> str:
    """Why the class `spec` (an `inputs.<role>` table) does not admit the member ("" when it does)."""
    cls = _class(spec)
    L, beta, B, z = (_number(spec, k) for k in ("lipschitz", "smooth", "bound", "at_zero"))

    def over(v: float | None, limit: float | None) -> bool:
        return limit is not None and (v is None or v > limit * (1 + RTOL) + 1e-300)

    if cls.analytic_only and not m.analytic:
        return f"{m.name} is not analytic (kinks at x = {', '.join(f'{k:.6g}' for k in m.kinks)})"
    if cls.non_polynomial and m.polynomial:
        return f"{m.name} is a polynomial"
    if cls.smooth_only and m.smooth is None:
        return f"{m.name} is not smooth (its derivative jumps)"
    if cls.convex_only and not m.convex:
        return f"{m.name} is not convex"
    if over(m.lipschitz, L):
        return f"{m.name} is {m.lipschitz:.6g}-Lipschitz, above lipschitz = {L:g}"
    if over(m.smooth, beta):
        return f"{m.name} is {m.smooth:.6g}-smooth, above smooth = {beta:g}"
    if over(m.bound, B):
        return f"{m.name} has sup |phi| = {m.bound:.6g}, above bound = {B:g}"
    if z is not None and abs(m.at_zero - z) > 1e-12 * max(1.0, abs(z)):
        return f"{m.name} has phi(0) = {m.at_zero:.6g}, not at_zero = {z:g}"
    return ""


def _tight(base: Base, L: float, beta: float | None) -> Member | None:
    """The base rescaled so that it meets the stated constants with equality (both, for a smooth class)."""
    if base.lipschitz == 0 or L == 0:
        return None
    if beta is not None and base.smooth:
        if beta == 0:
            return None
        b = (beta / L) * (base.lipschitz / base.smooth)
        return Member(base.name, L / (b * base.lipschitz), b)
    return Member(base.name, L / base.lipschitz)


def _signature(m: Member) -> tuple[float, ...]:
    x = torch.linspace(-3, 3, 13, dtype=torch.float64)
    return tuple(round(v, 10) for v in m(x).tolist())


def members(spec: Mapping[str, Any]) -> list[Member]:
    """Every member of the class's catalogue it admits, default first (see _members; computed once per class)."""
    try:
        key = json.dumps(dict(spec), sort_keys=True)
    except TypeError:  # not JSON: _class names the field at fault
        return _members(spec)
    return list(_cached_members(key))


@functools.lru_cache(maxsize=256)
def _cached_members(key: str) -> tuple[Member, ...]:
    return tuple(_members(json.loads(key)))


def _members(spec: Mapping[str, Any]) -> list[Member]:
    """Every member of the class's catalogue it admits, default first: for each base (BASES order), the base
    itself when its slope and curvature meet the constants, else rescaled to meet them (m0); the base rescaled
    tight (both constants met with equality); m0 shifted in its value to phi(0) = z (z: the class's at_zero, else
    0); m0 shifted in its argument (x + 1), in its value (+ 1), and shifted in its argument then moved to
    phi(0) = z; for a convex class first m0 mirrored (x -> -x, and -x + 1: the logistic loss softplus(-z) is that
    class's default). Only the members the class admits
    (bound, at_zero) are listed, and a member equal to an earlier one as a function is listed once."""
    cls = _class(spec)
    L = _number(spec, "lipschitz")
    beta = _number(spec, "smooth")
    assert L is not None
    z = _number(spec, "at_zero") or 0.0
    slopes = {k: v for k, v in spec.items() if k in ("class", "lipschitz", "smooth")}  # m0 ignores bound, at_zero
    out: list[Member] = []
    seen: set[tuple[float, ...]] = set()
    for base in BASES.values():
        if cls.smooth_only and base.smooth is None:
            continue
        plain, tight = Member(base.name), _tight(base, L, beta)
        m0 = plain if not admits(slopes, plain) else tight
        if m0 is None:
            continue
        a, b = m0.a, m0.b
        cands = [m0, tight, Member(base.name, a, b, 0.0, z - m0.at_zero), Member(base.name, a, b, 1.0, 0.0),
                 Member(base.name, a, b, 0.0, 1.0), Member(base.name, a, b, 1.0, z - a * base.at(1.0))]
        if cls.convex_only:  # a margin loss decreases: the mirrored members first (logistic loss = softplus(-z))
            cands = [Member(base.name, a, -b), Member(base.name, a, -b, 1.0), *cands]
        for m in cands:
            if m is None or admits(spec, m):
                continue
            sig = _signature(m)
            if sig not in seen:
                seen.add(sig)
                out.append(m)
    return out


def parse_member(raw: Any) -> Member:
    """A member as a claim or pin writes it: a base name (the base itself) or {"base", "a", "b", "c", "e"}."""
    if isinstance(raw, str):
        raw = {"base": raw}
    if not isinstance(raw, Mapping):
        raise FunctionSpecError("member", f"expected a base name or a table, got {raw!r}",
                                '`member = "tanh"` or `member = { base = "tanh", c = 1 }`')
    extra = sorted(set(raw) - {"base", "a", "b", "c", "e"})
    if extra:
        raise FunctionSpecError(f"member.{extra[0]}", "unknown field", "allowed: base, a, b, c, e")
    if raw.get("base") not in BASES:
        raise FunctionSpecError("member.base", f"unknown function {raw.get('base')!r}", f"one of {list(BASES)}")
    vals = {}
    for k in ("a", "b", "c", "e"):
        v = raw.get(k, 1.0 if k in "ab" else 0.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise FunctionSpecError(f"member.{k}", f"{v!r} is not a finite number")
        vals[k] = float(v)
    if vals["a"] == 0 or vals["b"] == 0:
        raise FunctionSpecError("member", "needs a != 0 and b != 0", "a * phi(b x + c) + e")
    return Member(raw["base"], **vals)


def check_function_spec(spec: Any) -> None:
    """Validate an `inputs.<role>` table (FunctionSpecError naming the field): a known class, its constants, a
    pinned member the class admits, and at least one admitted member."""
    _class(spec)
    if "member" in spec:
        why = admits(spec, parse_member(spec["member"]))
        if why:
            raise FunctionSpecError("member", f"not in the class: {why}", "pin a member the class admits")
    elif not members(spec):
        raise FunctionSpecError("", "the class admits no member of the catalogue under these constants",
                                "relax bound/at_zero or raise lipschitz/smooth")


def resolve(spec: Mapping[str, Any]) -> Member:
    """The member a run uses: the pinned `member`, else the class's default (its first admitted member)."""
    if "member" in spec:
        return parse_member(spec["member"])
    found = members(spec)
    if not found:
        raise EstimatorError(f"function class {spec.get('class')!r} admits no member under {dict(spec)}")
    return found[0]


# A class that bounds neither phi(0) (at_zero) nor sup |phi| (bound) admits every value shift phi + s: a hunt searches
# s as a continuous parameter, its magnitude log-uniform over SHIFT_DECADES (0.1 to 1000), either sign, beside the
# catalogue's own shifts of 1, since a statement whose bound ignores phi(0) may fail only from |phi(0)| ~ 20 on.
SHIFT_DECADES = (-1.0, 3.0)


def shifts_value(spec: Mapping[str, Any]) -> bool:
    """Whether the class `spec` admits every value shift of its members (it states neither at_zero nor bound)."""
    return "at_zero" not in spec and "bound" not in spec


def shifted(member: Member | Mapping[str, Any], shift: float) -> dict[str, Any]:
    """The member moved in its value by `shift` (a + shift on e), as a pin."""
    m = member if isinstance(member, Member) else parse_member(member)
    return Member(m.base, m.a, m.b, m.c, m.e + shift).to_json()


def shift_origin(spec: Mapping[str, Any], member: Member | Mapping[str, Any]) -> tuple[Member, float] | None:
    """The catalogue member the pin `member` is a value shift of (the first listed with its base, a, b and c) and
    the shift; None when it is no shift of a listed member."""
    m = member if isinstance(member, Member) else parse_member(member)
    for listed in members(spec):
        if (listed.base, listed.a, listed.b, listed.c) == (m.base, m.a, m.b, m.c):
            return listed, m.e - listed.e
    return None


def smaller_shifts(shift: float) -> list[float]:
    """Round shifts of the same sign and smaller magnitude than `shift` (1, 2, 5, 10, 20, ...), smallest first:
    the steps a greedy shrink tries."""
    out, k = [], 0
    while True:
        for mant in (1.0, 2.0, 5.0):
            v = mant * 10.0 ** k
            if v >= abs(shift) * (1 - 1e-12):
                return [math.copysign(x, shift) for x in out]
            out.append(v)
        k += 1


def member_key(m: Member | Mapping[str, Any]) -> str:
    """A canonical string for a member (its JSON form), for hunt case keys and strata."""
    d = m.to_json() if isinstance(m, Member) else parse_member(m).to_json()
    return json.dumps(d, sort_keys=True)


def describe_classes() -> dict[str, dict[str, str]]:
    """Function classes, their constants and the catalogue's bases (for listings and reports)."""
    return {"classes": {c.name: f"{c.description}; needs {', '.join(c.required)}" for c in CLASSES.values()},
            "constants": dict(CONSTANTS), "bases": {b.name: b.description for b in BASES.values()}}
