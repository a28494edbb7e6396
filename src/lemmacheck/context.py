"""What a quantity estimator receives (Context) and returns (Observation).

An estimator draws R independent replicates (networks, inputs, perturbations) from `ctx.generator` and
returns one value per replicate. It never seeds anything itself: the runner owns the randomness, so a shard
is reproducible from its seed alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from .errors import EstimatorError
from .expressions import parse
from .functions import ROLES, Member, resolve
from .inputs import (
    ball_radius,
    broken_premises,
    draw_coefficients,
    draw_labels,
    draw_perturbation,
    draw_weights,
    meets_premises,
    pinned_dataset,
)
from .registry import INPUTS

DTYPES = {"float64": torch.float64, "float32": torch.float32}
PREMISE_TRIES = 20  # redraws of the datasets that break a declared premise before the shard fails


@dataclass
class Observation:
    """Per-replicate results of one shard.

    value:   the quantity, shape (R,); the claim compares it with its bound.
    valid:   replicates on which the statement's hypotheses held (e.g. Theorem 5.1(i) verified on the draw);
             others are reported as conditioning failures, never counted as violations.
    extras:  diagnostics per replicate (e.g. which search found the worst case), stored with the shard.
    method:  how the value was computed when it matters for honesty (e.g. "exact SVD", "lanczos").
    """

    value: torch.Tensor
    valid: torch.Tensor | None = None
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
    method: str = ""


@dataclass
class Context:
    claim_id: str
    params: dict[str, float]
    replicates: int
    generator: torch.Generator
    dtype: torch.dtype = torch.float64
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    args: dict[str, Any] = field(default_factory=dict)
    inputs_spec: dict[str, Any] = field(default_factory=dict)
    search: str = "none"
    network: str = ""  # the claim's setting, so one estimator can serve several architectures of a paper
    # A hunt's fixed dataset (n, d) or (R, n, d): ctx.inputs() returns it instead of drawing one.
    dataset: torch.Tensor | None = None
    # "for all W": what ctx.weights / ctx.perturbation returned last (where a search starts), the balls they
    # declared (norm, radii per layer, the weights a relative radius is measured on) and a search's iterate, which
    # they return instead of drawing (search.search_quantified).
    quantified: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    balls: dict[str, dict[str, Any]] = field(default_factory=dict)
    overrides: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    _last_inputs: torch.Tensor | None = field(default=None, repr=False)

    def p(self, name: str, default: float | None = None) -> float:
        if name in self.params:
            return self.params[name]
        if default is None:
            raise KeyError(f"{self.claim_id}: estimator needs parameter '{name}', which the claim does not declare")
        return default

    def i(self, name: str, default: int | None = None) -> int:
        return round(self.p(name, default))

    def arg(self, name: str, default: Any = None) -> Any:
        return self.args.get(name, default)

    def inputs(self) -> torch.Tensor:
        """Draw the claim's datasets: (R, n, d); a pinned dataset (ctx.dataset, or `inputs.points`) is the same
        for every replicate."""
        spec = dict(self.inputs_spec)
        spec.pop("labels", None)  # drawn by ctx.labels
        spec.pop("coefficients", None)  # drawn by ctx.coefficients
        for role in ROLES:
            spec.pop(role, None)  # functions: ctx.function
        spec.pop("weights", None)  # ctx.weights
        spec.pop("perturbation", None)  # ctx.perturbation
        spec.pop("nonzero", None)  # what hunts never set to zero (inputs.NONZERO)
        premises = spec.pop("premises", ())  # hypotheses on the data every dataset must meet (inputs.PREMISES)
        points = spec.pop("points", None)
        kind = spec.pop("kind", "unit-sphere")
        entry = INPUTS.get(kind)
        fields = entry.extra.get("fields", {})
        kwargs: dict[str, Any] = {}
        for k, v in spec.items():
            kwargs[k] = parse(v, set(self.params)).evaluate(self.params) if fields.get(k) == "expr" else v
        # Conventional defaults only for generators that declare the option: in some settings `d` is the
        # output dimension, and silently feeding it to a generator as the input dimension would be wrong.
        if "n" in fields and "n" not in kwargs:
            kwargs["n"] = self.i("n", 1)
        if "d" in fields and "d" not in kwargs and (points is None and self.dataset is None or "d" in self.params):
            kwargs["d"] = self.i("d")
        if self.dataset is None and points is not None:
            self.dataset = pinned_dataset(points, {k: kwargs[k] for k in ("n", "d") if k in kwargs})
        if self.dataset is not None:
            X = self.dataset.to(self.dtype)
            X = (X if X.dim() == 3 else X.unsqueeze(0)).expand(self.replicates, -1, -1).clone().to(self.device)
            if premises and not bool(meets_premises(X, premises).all()):
                broken = broken_premises(X[int((~meets_premises(X, premises)).nonzero()[0])], premises)
                raise EstimatorError(f"the pinned dataset breaks the claim's premise(s) {broken}")
        else:
            X = entry.obj(self.generator, self.replicates, dtype=self.dtype, **kwargs).to(self.device)
            # Datasets that break a declared premise are redrawn whole (the others keep their draws), as the
            # separation is: a statement's hypotheses on the data are never counted against it.
            bad = ~meets_premises(X, premises) if premises else None
            tries = 0
            while bad is not None and bool(bad.any()):
                if tries == PREMISE_TRIES:
                    raise EstimatorError(f"{self.claim_id}: {int(bad.sum())} of {self.replicates} datasets still break "
                                         f"the premise(s) {list(premises)} after {tries} redraws ({kwargs}): the "
                                         "generator or geometry cannot meet them")
                X[bad.to(X.device)] = entry.obj(self.generator, int(bad.sum()), dtype=self.dtype,
                                                **kwargs).to(self.device)
                bad = ~meets_premises(X, premises)
                tries += 1
        self._last_inputs = X
        return X

    def labels(self, n: int, X: torch.Tensor | None = None) -> torch.Tensor:
        """Labels (R, n) in {-1, +1} of the claim's `inputs.labels` (a family, default Rademacher, or an explicit
        pattern). Families that depend on the data use X (R, n, d), else the datasets ctx.inputs() last drew."""
        if X is None and self._last_inputs is not None and self._last_inputs.shape[-2] == n:
            X = self._last_inputs
        spec = self.inputs_spec.get("labels", "rademacher")
        return draw_labels(self.generator, spec, self.replicates, n, X, self.dtype).to(self.device)

    def coefficients(self, n: int, X: torch.Tensor | None = None) -> torch.Tensor:
        """Coefficient vectors (R, n) a statement quantifies over ("for any a", "q != 0") from the claim's
        `inputs.coefficients` (inputs.COEFFICIENTS: gaussian by default, ones, parity, first, null-vector, or an
        explicit list), so runs and hunts can move them. Data-dependent families use X (R, n, d), else the
        datasets ctx.inputs() last drew."""
        if X is None and self._last_inputs is not None and self._last_inputs.shape[-2] == n:
            X = self._last_inputs
        spec = self.inputs_spec.get("coefficients", "gaussian")
        return draw_coefficients(self.generator, spec, self.replicates, n, X, self.dtype).to(self.device)

    def function(self, role: str = "activation") -> Member:
        """The function the statement quantifies over in `role` ("activation", "loss"): a member of the claim's
        declared class (`inputs.<role>`, functions.CLASSES): the pinned `member`, else the class's default. It
        is callable on tensors and knows its derivatives (.d1, .d2) and constants (.lipschitz, .smooth, .bound,
        .at_zero); estimators never build such a function privately, so runs and hunts can move it."""
        spec = self.inputs_spec.get(role)
        if role not in ROLES or not isinstance(spec, Mapping):
            raise EstimatorError(f"{self.claim_id}: the quantity quantifies over a function '{role}' the claim does "
                                 f"not declare (add inputs.{role} = {{ class = \"lipschitz-smooth\", lipschitz = "
                                 "..., smooth = ... }; roles: " + ", ".join(ROLES) + ")")
        return resolve(spec)

    def activation(self) -> Member:
        """ctx.function("activation")."""
        return self.function("activation")

    def loss(self) -> Member:
        """ctx.function("loss")."""
        return self.function("loss")

    def _radii(self, role: str, spec: Mapping[str, Any], layers: int) -> list[float] | None:
        r = spec.get("radius")
        if r is None:
            return None
        rs = r if isinstance(r, list) else [r] * layers
        if len(rs) != layers:
            raise EstimatorError(f"{self.claim_id}: inputs.{role}.radius lists {len(rs)} radii for {layers} layers")
        return [float(parse(str(x), set(self.params)).evaluate(self.params)) for x in rs]

    def weights(self, layers: list[Any], layout: str = "in-out") -> list[torch.Tensor]:
        """The weights a statement quantifies over ("for all W with ||W_l|| <= r_l"), declared as
        `inputs.weights = { radius = ..., norm = "spectral" | "frobenius" }` (no radius: unconstrained, drawn at norm
        1). `layers` is the layers' shapes [(a_l, b_l)] (drawn here, R per layer) or a network's own draw
        [(R, a_l, b_l)] (a protocol network's initialisation: returned unchanged unless the claim declares the
        weights). `layout` says which side of W_l reads W_{l-1}'s output ("in-out": z = x W). A search moves what
        this returns (search.search_quantified); estimators never search it themselves."""
        spec = self.inputs_spec.get("weights")
        given = list(layers) if layers and isinstance(layers[0], torch.Tensor) else None
        if not isinstance(spec, Mapping):
            if given is not None:
                return given
            raise EstimatorError(f"{self.claim_id}: the quantity quantifies over weights the claim does not declare "
                                 '(add inputs.weights = { radius = "1", norm = "spectral" })')
        shapes = [tuple(W.shape[-2:]) for W in given] if given is not None else [tuple(s) for s in layers]
        norm, radii = spec.get("norm", "spectral"), self._radii("weights", spec, len(shapes))
        self.balls["weights"] = {"norm": norm, "radii": radii}
        if "weights" in self.overrides:
            Ws = self.overrides["weights"]
        else:
            family = spec.get("family", "given" if given is not None else "gaussian")
            Ws = [W.to(self.device) for W in draw_weights(self.generator, family, shapes, radii, norm, layout,
                                                          self.replicates, self.dtype, given)]
        self.quantified["weights"] = Ws
        return Ws

    def perturbation(self, Ws: list[torch.Tensor]) -> list[torch.Tensor]:
        """A perturbation U_l of each layer W_l (R, a_l, b_l) in the ball the claim declares: `inputs.perturbation
        = { radius = "tau" (or one per layer), relative = false, norm = "spectral" | "frobenius" }`, ||U_l|| <= r_l, or
        ||U_l|| <= r_l ||W_l|| when relative. Drawn on the ball's sphere; a search moves it."""
        spec = self.inputs_spec.get("perturbation")
        if not isinstance(spec, Mapping):
            raise EstimatorError(f"{self.claim_id}: the quantity draws a perturbation the claim does not declare "
                                 '(add inputs.perturbation = { radius = "tau", relative = false, norm = "spectral" })')
        norm, relative = spec.get("norm", "spectral"), bool(spec.get("relative", False))
        rs = self._radii("perturbation", spec, len(Ws))
        assert rs is not None
        base = [W.detach() for W in Ws]
        radii = [ball_radius(W, r, norm, relative) for W, r in zip(base, rs)]
        self.balls["perturbation"] = {"norm": norm, "radii": rs, "relative": relative, "base": base}
        if "perturbation" in self.overrides:
            Us = self.overrides["perturbation"]
        else:
            Us = draw_perturbation(self.generator, spec.get("family", "random"), base, radii, norm)
        self.quantified["perturbation"] = Us
        return Us

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=self.generator, dtype=self.dtype).to(self.device)


def evaluate_all(values: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in values.items()}
