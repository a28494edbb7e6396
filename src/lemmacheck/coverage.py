"""Which cells of a claim's domain a run reached, and why the others were not run.

Computed only from the claim (as the store snapshotted it) and the configurations the store recorded for it (their
parameters and, for a hunted or corpus configuration, its pinned dataset and labels), so a report regenerated from
an existing store shows the same table.

Parts:
- **datasets**, for a claim whose input generator takes n points (and a geometry): one row per admitted geometry
  (the claim's `inputs.geometry`, or each of a list of them; the generator's default when it names none), one column
  per admitted n (every n of a short integer range, else its three smallest, its middle and its two largest, plus
  every n that ran). A cell is "ran" (with how many configurations), "refused" (the geometry cannot place n points
  there: its `admits` reason at every d of the domain), "premise" (every dataset the geometry gives there breaks a
  declared premise), "error" (configurations there recorded only errors), "probed" (only the hunt's probes reached
  it: a few draws each, evidence of reach, not part of the verdict; store.probes) or "not run" (admitted, but no
  recorded configuration or probe is there). A configuration counts for the
  geometry its pinned record names, else, with a pinned dataset, as a hunted dataset (closed under x -> -x or not),
  else for the claim's first geometry. The n summary says which n ran (smallest, odd, even) and at which even n a set closed under x -> -x
  (the only n where such sets exist) ran.
- **edges**: every declared parameter's min and max: "reached", "skipped" (the claim's `edges_skipped` reason) or
  "not run".
- **labels** / **coefficients** / **functions**: the declared family (or function class and member) and the hunted
  patterns or members that ran (where the claim declares or a configuration pinned them).

cells = {ran, admitted}: the dataset grid's admitted cells (a hunted row's cells where they ran) and the edges;
refused and premise-excluded cells are not admitted (no dataset of the statement lives there).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from .claims import Claim, edges
from .expressions import parse
from .inputs import GEOMETRIES, check_premises, closed_under_negation, meets_premises
from .registry import INPUTS

INTEGER_RANGE_WHOLE = 8  # an integer n range with at most this many values is listed whole
HUNTED = "hunted dataset"
HUNTED_SYMMETRIC = "hunted dataset (closed under x -> -x)"
# Geometries whose sets are closed under x -> -x at even n (polygon: a regular 2k-gon contains each antipode).
SYMMETRIC_GEOMETRIES = frozenset({"cross-polytope", "hypercube", "antipodal-pairs", "polygon"})
SHAPE_VALUES = 6  # values per shape parameter (d, separation) tried before a cell is called refused


def _cfg_view(c: Any) -> dict[str, Any]:
    """params, pinned, errored, in_regime of a stored configuration: a ConfigResult or a store.configs row."""
    if isinstance(c, Mapping):
        return {"params": dict(c.get("params") or {}), "pinned": c.get("pinned"),
                "errored": bool(c.get("errors")) and not c.get("replicates"),
                "in_regime": bool(c.get("in_regime", True))}
    return {"params": dict(c.params), "pinned": getattr(c, "pinned", None),
            "errored": bool(getattr(c, "errors", None)) and not getattr(c, "replicates", 0),
            "in_regime": bool(getattr(c, "in_regime", True))}


@lru_cache(maxsize=512)
def _expr(text: str, names: frozenset[str]):
    return parse(text, names)


def _value(spec: Any, values: Mapping[str, float]) -> float | None:
    """An inputs field (a number, a parameter name or an expression) at `values`; None when it cannot be."""
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return float(spec)
    if not isinstance(spec, str):
        return None
    if spec in values:
        return float(values[spec])
    try:
        return _expr(spec, frozenset(values)).evaluate(values)
    except Exception:  # noqa: BLE001 - a field this table cannot evaluate is left out, never fatal
        return None


def _values(claim: Claim, params: Mapping[str, float]) -> dict[str, float]:
    consts = claim.check.regime_constants if claim.check is not None else {}
    return {**consts, **{p.name: float(p.default) for p in claim.params.values()}, **params}


def _generator(claim: Claim) -> tuple[str, dict[str, Any]] | None:
    kind = (claim.inputs or {}).get("kind")
    if not kind or kind not in INPUTS:
        return None
    return kind, INPUTS.get(kind).extra.get("fields", {})


def declared_geometries(claim: Claim) -> list[str]:
    """The geometries the claim's inputs admit: `inputs.geometries` or `inputs.geometry` (a name or a list), else the
    generator's default geometry; [] when its generator has no geometry option."""
    gen = _generator(claim)
    if gen is None or "geometry" not in gen[1]:
        return []
    raw = claim.inputs.get("geometries", claim.inputs.get("geometry"))
    if raw is None:
        try:
            raw = inspect.signature(INPUTS.get(gen[0]).obj).parameters["geometry"].default
        except (KeyError, TypeError, ValueError):
            raw = inspect.Parameter.empty
        if raw is inspect.Parameter.empty or not isinstance(raw, str):
            raw = "random"
    return [raw] if isinstance(raw, str) else [str(g) for g in raw]


def _domain_n(claim: Claim, name: str) -> list[int]:
    p = claim.params[name]
    if p.values is not None:
        return sorted({round(v) for v in p.values})
    assert p.low is not None and p.high is not None
    lo, hi = math.ceil(p.low), math.floor(p.high)
    if hi - lo + 1 <= INTEGER_RANGE_WHOLE:
        return list(range(lo, hi + 1))
    mid = round(math.sqrt(lo * hi)) if p.log and lo > 0 else round((lo + hi) / 2)
    return sorted({lo, lo + 1, lo + 2, mid, hi - 1, hi})


def _shape_values(claim: Claim, name: str) -> list[float]:
    """A few values of a shape parameter (d, separation) spanning its domain, largest last."""
    p = claim.params[name]
    if p.values is not None:
        vals = sorted(p.values)
    else:
        assert p.low is not None and p.high is not None
        if p.integer and p.high - p.low + 1 <= SHAPE_VALUES:
            vals = list(range(int(p.low), int(p.high) + 1))
        else:
            vals = sorted({p.low, p.high, (p.low + p.high) / 2})
    if len(vals) > SHAPE_VALUES:
        vals = vals[:SHAPE_VALUES // 2] + vals[-(SHAPE_VALUES - SHAPE_VALUES // 2):]
    return [float(v) for v in vals]


@lru_cache(maxsize=4096)
def _admits(geometry: str, n: int, d: int, sep: float) -> str | None:
    if geometry not in GEOMETRIES:
        return None
    try:
        return GEOMETRIES[geometry].admits(n, d, sep)
    except Exception as exc:  # noqa: BLE001 - an admits predicate that fails says so in the cell
        return f"{type(exc).__name__}: {exc}"


@lru_cache(maxsize=1024)
def _premise_excludes(geometry: str, n: int, d: int, sep: float, premises: tuple[str, ...]) -> str | None:
    """The premises that every one of 8 datasets of `geometry` at (n, d, separation), drawn from a fixed seed, breaks
    (the geometry cannot meet them there); None when one of them meets every premise."""
    import torch

    from .inputs import broken_premises, unit_sphere

    try:
        X = unit_sphere(torch.Generator().manual_seed(0), 8, n=n, d=d, separation=sep, geometry=geometry)
    except Exception:  # noqa: BLE001 - placement failures are the admits reason's business
        return None
    if bool(meets_premises(X, premises).any()):
        return None
    return ", ".join(broken_premises(X[0], premises)) or None


def _probed(claim: Claim, probes: list[dict[str, Any]], n_spec: Any, first: str) -> dict[tuple[str, int], int]:
    """(row, n) -> how many hunt probes landed there: a probe's dataset geometry (symmetric hunted sets as such),
    else the claim's first geometry at the probe's n."""
    out: dict[tuple[str, int], int] = {}
    for pr in probes:
        if "n" in pr:
            n, row = int(pr["n"]), str(pr.get("geometry") or HUNTED)
            row = HUNTED_SYMMETRIC if row == "hunted" and pr.get("symmetric") else row
        else:
            v = _value(n_spec, _values(claim, pr.get("params") or {}))
            if v is None:
                continue
            n, row = round(v), first
        out[(row, n)] = out.get((row, n), 0) + 1
    return out


def _dataset_grid(claim: Claim, cfgs: list[dict[str, Any]], profile: str | None,
                  probes: list[dict[str, Any]] = ()) -> dict[str, Any] | None:
    gen = _generator(claim)
    if gen is None or "n" not in gen[1]:
        return None
    kind = gen[0]
    spec = claim.inputs
    n_spec = spec.get("n", "n" if "n" in claim.params else 1)  # as ctx.inputs() defaults it
    n_param = n_spec if isinstance(n_spec, str) and n_spec in claim.params else None
    geometries = declared_geometries(claim) or [kind]  # a generator without geometries: one row, its draws
    premises = tuple(check_premises(spec.get("premises", ()))) if spec.get("premises") else ()
    sphere = kind == "unit-sphere"

    ran: dict[tuple[str, int], dict[str, int]] = {}
    extra_rows: list[str] = []
    for c in cfgs:
        pinned = c["pinned"] or {}
        points = pinned.get("points")
        if points:
            n = len(points)
            row = str(pinned.get("geometry") or (HUNTED_SYMMETRIC if closed_under_negation(points) else HUNTED))
        else:
            v = _value(n_spec, _values(claim, c["params"]))
            if v is None:
                continue
            n = round(v)
            row = str(pinned.get("geometry") or geometries[0])
        if row not in geometries and row not in extra_rows:
            extra_rows.append(row)
        cell = ran.setdefault((row, n), {"configs": 0, "errored": 0, "out_of_regime": 0})
        cell["configs"] += 1
        cell["errored"] += c["errored"]
        cell["out_of_regime"] += not c["in_regime"]

    probed = _probed(claim, list(probes), n_spec, geometries[0])
    extra_rows += [row for row in dict.fromkeys(r for r, _ in sorted(probed))
                   if row not in geometries and row not in extra_rows]
    ns_ran = sorted({n for (_, n) in ran})
    domain = _domain_n(claim, n_param) if n_param else []
    # bounded by the domain's few values, the configurations' and the probes' (a hunt stays within affordable sizes)
    columns = sorted(set(domain) | set(ns_ran) | {n for (_, n) in probed})
    not_run = f"not in the {profile} profile" if profile else "not in the profile"
    not_run += " (no configuration or hunt probe recorded there)"

    # the shape parameters other than n, for the geometry's admits predicate
    shape_params = []
    for key in ("d", "separation"):
        s = spec.get(key)
        if isinstance(s, str):
            try:
                names = _expr(s, frozenset(_values(claim, {}))).names
            except Exception:  # noqa: BLE001
                names = frozenset()
            shape_params += [k for k in names if k in claim.params and k != n_param and k not in shape_params]

    def shapes(n: int) -> list[tuple[int, float]]:
        combos: list[dict[str, float]] = [{}]
        for k in shape_params:
            combos = [{**c, k: v} for c in combos for v in _shape_values(claim, k)][:64]
        out = []
        for combo in combos:
            vals = _values(claim, {**combo, **({n_param: n} if n_param else {})})
            d = _value(spec.get("d", "d"), vals)
            sep = _value(spec.get("separation", 0.0), vals) or 0.0
            if d is not None:
                out.append((round(d), float(sep)))
        return sorted(set(out))

    rows = []
    for g in geometries + extra_rows:
        cells = []
        for n in columns:
            hit = ran.get((g, n))
            if hit is not None:
                state = "error" if hit["errored"] == hit["configs"] else "ran"
                cells.append({"n": n, "state": state, **hit})
                continue
            if probed.get((g, n)):  # reached only by the hunt's probes (a few draws each): reach, not a verdict
                cells.append({"n": n, "state": "probed", "probes": probed[(g, n)]})
                continue
            if g not in geometries:  # a hunted row lists what the hunt reached, nothing else
                cells.append({"n": n, "state": "-"})
                continue
            why, state = "", "not run"
            if sphere:
                sh = shapes(n)
                reasons = [_admits(g, n, d, sep) for d, sep in sh]
                if sh and all(reasons):
                    d, _ = sh[-1]
                    why, state = (f"{reasons[-1]}" + (f" (at every d in the domain; shown at d = {d})"
                                                      if len({s[0] for s in sh}) > 1 else "")), "refused"
                elif premises:
                    broken = [_premise_excludes(g, n, d, sep, premises) for (d, sep), r in zip(sh, reasons)
                              if r is None]
                    if broken and all(broken):
                        why, state = f"every {g} set of {n} points breaks the premise(s) {broken[-1]}", "premise"
            cells.append({"n": n, "state": state, "why": why or not_run})
        rows.append({"geometry": g, "declared": g in geometries, "cells": cells})

    symmetric_rows = {g for g in geometries + extra_rows if g in SYMMETRIC_GEOMETRIES or g == HUNTED_SYMMETRIC}
    evens = [n for n in columns if n % 2 == 0 and n >= 2]
    n_summary = {
        "ran": ns_ran,
        "smallest": ({"n": min(domain), "ran": min(domain) in ns_ran} if domain else None),
        "odd": [n for n in ns_ran if n % 2],
        "even": [n for n in ns_ran if n % 2 == 0],
        "symmetric": {"exist_at": evens,
                      "ran_at": sorted({n for (g, n) in ran if n in evens and g in symmetric_rows}),
                      "probed_at": sorted({n for (g, n) in probed if n in evens and g in symmetric_rows})},
    }
    return {"generator": kind, "n_param": n_param, "n_values": columns, "rows": rows, "n": n_summary,
            "premises": list(premises)}


def _at(params: Mapping[str, float], name: str, v: float) -> bool:
    return name in params and math.isclose(params[name], v, rel_tol=1e-9, abs_tol=1e-12)


def _edges(claim: Claim, cfgs: list[dict[str, Any]], profile: str | None,
           probes: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    skipped = claim.raw.get("edges_skipped", {}) or {}
    out = []
    for name, end, v in edges(claim):
        k = sum(1 for c in cfgs if _at(c["params"], name, v))
        hunt = sum(1 for pr in probes if _at(pr.get("params") or {}, name, v))
        if k:
            out.append({"param": name, "end": end, "value": v, "state": "reached", "configs": k})
        elif hunt:
            out.append({"param": name, "end": end, "value": v, "state": "probed", "probes": hunt,
                        "why": f"{hunt} hunt probe(s) there, in no configuration"})
        elif name in skipped:
            out.append({"param": name, "end": end, "value": v, "state": "skipped", "why": skipped[name]})
        else:
            out.append({"param": name, "end": end, "value": v, "state": "not run",
                        "why": f"not in the {profile} profile" if profile else "not in the profile"})
    return out


def _families(claim: Claim, cfgs: list[dict[str, Any]], key: str, default: str) -> dict[str, Any] | None:
    """The declared family of `key` (labels, coefficients) and what the configurations ran: the declared one, or the
    patterns/families pinned by hunted configurations."""
    spec = claim.inputs or {}
    pinned = [c["pinned"][key] for c in cfgs if c["pinned"] and key in c["pinned"]]
    if key not in spec and not pinned:
        return None
    declared = spec.get(key, default)
    declared = declared if isinstance(declared, str) else "explicit"
    own = sum(1 for c in cfgs if not (c["pinned"] and key in c["pinned"]))
    hunted: dict[str, int] = {}
    for p in pinned:
        name = p if isinstance(p, str) and (set(p) - {"+", "-"}) else "explicit pattern" if key == "labels" \
            else "explicit vector"
        hunted[name] = hunted.get(name, 0) + 1
    return {"declared": declared, "declared_configs": own, "hunted": hunted}


def _member_text(m: Any) -> str:
    """A function-class member as a pin records it (a base name, or {base, a, b, c, e}), in one short line."""
    if not isinstance(m, Mapping):
        return str(m)
    shifts = ", ".join(f"{k}={m[k]:g}" for k in ("a", "b", "c", "e")
                       if isinstance(m.get(k), (int, float)) and m[k] != (1.0 if k in "ab" else 0.0))
    return f"{m.get('base', '?')}" + (f"({shifts})" if shifts else "")


def _functions(claim: Claim, cfgs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per function role the claim quantifies over (an `inputs.<role>` table naming a class): the class, the member
    its own configurations use (the table's `member`, else the class's default) and the members hunts pinned."""
    out = {}
    for role, spec in (claim.inputs or {}).items():
        if not isinstance(spec, Mapping) or "class" not in spec:
            continue
        hunted: dict[str, int] = {}
        own = 0
        for c in cfgs:
            m = (c["pinned"] or {}).get(role)
            if m is None:
                own += 1
            else:
                hunted[_member_text(m)] = hunted.get(_member_text(m), 0) + 1
        out[role] = {"declared": f"class {spec['class']}, member "
                                 + (_member_text(spec["member"]) if "member" in spec else "its default"),
                     "declared_configs": own, "hunted": hunted}
    return out


def coverage(claim: Claim, configs: Iterable[Any], profile: str | None = None,
             probes: Iterable[dict[str, Any]] = ()) -> dict[str, Any] | None:
    """The coverage of `claim` by its stored configurations (ConfigResults or store.configs rows) and its hunt's
    probes (store.probes: cells "probed", a few draws each, kept apart from "ran"); None for a claim that is not
    checked (infeasible)."""
    if claim.check is None:
        return None
    cfgs = [_cfg_view(c) for c in configs]
    probes = list(probes)
    out: dict[str, Any] = {"configs": len(cfgs), "probes": len(probes)}
    grid = _dataset_grid(claim, cfgs, profile, probes)
    if grid is not None:
        out["datasets"] = grid
    out["edges"] = _edges(claim, cfgs, profile, probes)
    for key, default in (("labels", "rademacher"), ("coefficients", "gaussian")):
        fam = _families(claim, cfgs, key, default)
        if fam is not None:
            out[key] = fam
    fns = _functions(claim, cfgs)
    if fns:
        out["functions"] = fns
    ran = probed = admitted = 0
    for row in (grid or {}).get("rows", []):
        for cell in row["cells"]:  # a hunted row's cells count where they ran or were probed
            if cell["state"] in (("ran", "error", "not run", "probed") if row["declared"] else ("ran", "probed")):
                admitted += 1
                ran += cell["state"] == "ran"
                probed += cell["state"] == "probed"
    admitted += len(out["edges"])
    ran += sum(1 for e in out["edges"] if e["state"] == "reached")
    probed += sum(1 for e in out["edges"] if e["state"] == "probed")
    out["cells"] = {"ran": ran, "probed": probed, "admitted": admitted}
    return out


def skipped_reasons(cov: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(where, why) for every cell and edge not run, cells with the same geometry and reason grouped by their n."""
    out: list[tuple[str, str]] = []
    grid = cov.get("datasets")
    for row in (grid or {}).get("rows", []):
        groups: dict[tuple[str, str], list[int]] = {}
        for cell in row["cells"]:
            if cell["state"] in ("not run", "refused", "premise"):
                groups.setdefault((cell["state"], cell["why"]), []).append(cell["n"])
        for (state, why), ns in groups.items():
            out.append((f"{row['geometry']} at n = {', '.join(map(str, ns))}", f"{state}: {why}"))
    for e in cov.get("edges", []):
        if e["state"] != "reached":
            out.append((f"{e['param']} = {e['value']:g} ({e['end']})", f"{e['state']}: {e['why']}"))
    return out


def text(cov: Mapping[str, Any] | None) -> str:
    """A one-line summary: cells ran / admitted, the n that ran, the edges not reached."""
    if not cov:
        return "coverage: not checked"
    c = cov["cells"]
    parts = [f"coverage: {c['ran']} of {c['admitted']} admitted cells ran"
             + (f", {c['probed']} more probed by the hunt" if c.get("probed") else "")]
    grid = cov.get("datasets")
    if grid:
        n = grid["n"]
        parts.append("n ran " + (", ".join(map(str, n["ran"])) or "none"))
        if n["symmetric"]["exist_at"]:
            parts.append("sets closed under x -> -x at n = " + (", ".join(map(str, n["symmetric"]["ran_at"]))
                                                                or "none"))
    missed = [f"{e['param']} = {e['value']:g}" for e in cov.get("edges", []) if e["state"] != "reached"]
    if missed:
        parts.append("edges not reached: " + ", ".join(missed))
    return "; ".join(parts)
