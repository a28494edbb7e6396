"""Quantities of the zou2018 setting (deep ReLU FNN, fan-out He init, fixed ±1 output).

Parameter names follow the paper: m (min hidden width), L (depth), n, d, phi (separation), tau
(perturbation radius), s (sparsity); `alternate = 1` uses widths m, 2m, m, … (A3.7's extreme, M = 2m).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import torch

from lemmacheck.boundary import on_host, to_numpy
from lemmacheck.context import Context, Observation
from lemmacheck.linalg import (
    EXACT_SVD_MAX,
    SYRK_MIN_ENTRIES,
    TOP_EIG_MIN_N,
    BallTracker,
    _scipy_blas_threads,
    _syevx_one,
    _sym_gram,
    canonical_eigh,
    gaussian_spectral_norm,
    gram,
    gram_rounding_bound,
    low_rank_spectral_norm,
    spectral_norm,
    spectral_norm_at_most,
    top_eigenvalue,
    top_s_norm,
)
from lemmacheck.registry import QUANTITIES
from lemmacheck.search import BALLS, maximise, random_perturbation

from . import network as net

NET = (net.NAME,)


def _dims(ctx: Context) -> list[int]:
    """[d, m_1, ..., m_L]; d may be declared directly or as dm = d/m (claims that tie d to the width)."""
    d = ctx.i("d") if "d" in ctx.params else round(ctx.p("dm") * ctx.p("m"))
    return net.widths(d, ctx.i("m"), ctx.i("L"), bool(ctx.i("alternate", 0)))


def _init(ctx: Context) -> tuple[list[torch.Tensor], torch.Tensor]:
    X = ctx.inputs()
    return net.init(ctx.generator, ctx.replicates, _dims(ctx), ctx.dtype), X


def _theorem_5_1_i(Ws: list[torch.Tensor], fwd: net.Forward) -> torch.Tensor:
    """Per replicate: did Theorem 5.1(i) hold at this initialisation (all ||x_{l,i}|| <= 3/2, ||W_l|| <= 7/2)?
    The weight half is a certified Cholesky decision (no norm needed; borderline draws are decided exactly)."""
    xn = torch.stack([x.norm(dim=-1).amax(-1) for x in fwd.x[1:]], -1).amax(-1)
    wn_ok = torch.stack([spectral_norm_at_most(W, 3.5) for W in Ws], -1).all(-1)
    return (xn <= 1.5) & wn_ok


@QUANTITIES.register("max-layer-output-norm", "max over l in [L], i in [n] of ||x_{l,i}||_2 at Gaussian "
                     "initialisation (exact Gaussian-conditioning sampler unless args.sampler = 'full')",
                     networks=NET)
def max_layer_output_norm(ctx: Context) -> Observation:
    X = ctx.inputs()
    dims = _dims(ctx)
    if ctx.arg("sampler", "conditional") == "full":
        Ws = net.init(ctx.generator, ctx.replicates, dims, ctx.dtype)
        norms = [x.norm(dim=-1) for x in net.forward(Ws, X).x]
        method = "full forward pass"
    else:
        norms = net.conditional_layer_norms(ctx.generator, X, dims)
        method = "Gaussian-conditioning sampler (exact in distribution)"
    value = torch.stack([nm.amax(-1) for nm in norms[1:]], -1).amax(-1)
    return Observation(value, method=method)


@QUANTITIES.register("max-weight-spectral-norm", "max over l in [L] of ||W_l||_2 at Gaussian initialisation "
                     "(exact-in-law Gaussian bidiagonal sampler; args.sampler = 'full': the drawn matrices' norms, "
                     "Gram eigvalsh up to 2048, certified block Krylov above)", networks=NET)
def max_weight_spectral_norm(ctx: Context) -> Observation:
    dims = _dims(ctx)
    if ctx.arg("sampler", "bidiagonal") == "full":
        Ws = net.init(ctx.generator, ctx.replicates, dims, ctx.dtype)
        norms, methods = zip(*(spectral_norm(W) for W in Ws))
        return Observation(torch.stack(norms, -1).amax(-1), method=",".join(sorted(set(methods))))
    # The layers are independent and the claim sees each W_l only through ||W_l||_2: draw the norms directly.
    norms = [gaussian_spectral_norm(ctx.generator, (ctx.replicates,), a, b, math.sqrt(2.0 / b))[0]
             for a, b in itertools.pairwise(dims)]
    return Observation(torch.stack(norms, -1).amax(-1).to(ctx.dtype),
                       method="Gaussian bidiagonal model (exact in distribution), bisection rounded up")


@QUANTITIES.register("forward-perturbation", "sup over ||W~_l - W_l||_2 <= tau of max_{l,i} ||x~_{l,i} - x_{l,i}||"
                     " (lower estimate by the claim's search), conditional on Theorem 5.1(i) at W",
                     networks=NET)
def forward_perturbation(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    fwd = net.forward(Ws, X)
    valid = _theorem_5_1_i(Ws, fwd)
    base = [x.detach() for x in fwd.x[1:]]

    def target(Wt: list[torch.Tensor]) -> torch.Tensor:
        xt = net.forward(Wt, X).x[1:]
        return torch.stack([(a - b).norm(dim=-1).amax(-1) for a, b in zip(xt, base)], -1).amax(-1)

    value, found = maximise_tracked(target, Ws, ctx.p("tau"), ctx.search, ctx.generator,
                                    steps=int(ctx.arg("steps", 20)))
    return Observation(value, valid=valid, extras={"found_by": found}, method=f"search={ctx.search}")


# Matrices with both sides at least this project through linalg.BallTracker in the ascent, smaller ones densely
# (clip_spectral): one Lemma B.2 shard took 5.0 CPU s tracked vs 1.3 dense at m = 128 (L = 5), 7.5 vs 5.5 at m = 256;
# about equal at 512, the tracker 1.5x faster at 1024 (L = 2, one replicate)
TRACK_MIN = 512


def _rank_one(S: torch.Tensor, tol: float = 1e-13) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(a, b) with S = a bᵀ to within tol ||S||_F (the residual is computed), or None."""
    rows = torch.linalg.vector_norm(S, dim=-1)
    j = int(rows.argmax())
    b = S[j]
    bb = float(b @ b)
    if bb == 0:
        return None
    a = (S @ b) / bb
    if not bool(torch.linalg.vector_norm(torch.addr(S, a, b, alpha=-1)) <= tol * torch.linalg.vector_norm(rows)):
        return None
    return a, b


def maximise_tracked(target, Ws: list[torch.Tensor], tau: float, method: str, gen: torch.Generator, *,
                     steps: int = 30, lr: float = 0.3) -> tuple[torch.Tensor, torch.Tensor]:
    """`search.maximise` over spectral balls (one restart: the same iteration and the same draws) with the
    adversarial ascent's projections of large matrices done by `linalg.BallTracker`: the target's gradient with
    respect to each layer is rank one (a maximum over l, i of one input's trajectory), so every step is D + a bᵀ and
    the projection needs no O(m³) eigensolver. Each start (the random one, and the gradient-aligned one, which at
    W is the sign-breaking noise alone: the target's gradient vanishes there) is scaled onto the sphere by the
    eigendecomposition of its Gram that its tracker then starts from (`_scale_structured`: one O(m³) eigensolver per
    start, layer and replicate where the dense path took the norm and then the tracker's own). Equal to `maximise`
    to rounding (tests/test_fast_paths.py)."""
    eigs: dict[int, tuple[torch.Tensor, list]] = {}  # id(scaled start) -> (it, per-replicate Gram eigendecomposition)
    return maximise(target, Ws, tau, method, gen, steps=steps, lr=lr,
                    scale=lambda G, radius: _scale_structured(G, radius, eigs),
                    stepper=lambda: _tracked_stepper(tau, eigs))


def _scale_structured(G: torch.Tensor, tau: float, eigs: dict) -> torch.Tensor:
    """G * tau / ||G||_2 per replicate, as search's spectral `_scale_to` (`linalg.spectral_norm`: the Gram's top
    eigenvalue rounded up by `gram_rounding_bound`), for matrices the ascent tracks from the full eigendecomposition
    of the Gram (BLAS syrk, LAPACK syevd through scipy: about 1.4x faster than torch's eigh on one thread at
    m = 2048), which is kept in `eigs` for the tracker of the start it makes. Above `linalg.EXACT_SVD_MAX` too:
    the tracker needs this eigensolve anyway.
    On a GPU the engine's scaling and the trackers' own eigensolves (torch, on the device) stay."""
    if min(G.shape[-2:]) < TRACK_MIN or G.shape[-2] < G.shape[-1] or not on_host(G):
        return BALLS["spectral"][0](G, tau)
    import scipy.linalg  # as linalg.clip_spectral: only where a search projects
    from scipy.linalg.blas import dsyrk

    _scipy_blas_threads(torch.get_num_threads())
    norms, eig = [], []
    for Gr in G:
        # GᵀG's upper triangle by syrk (half gram's flops; both float64 BLAS, equal to rounding)
        gtg = dsyrk(1.0, Gr.to(torch.float64).numpy().T)
        lam, V = scipy.linalg.eigh(gtg, lower=False, driver="evd", check_finite=False, overwrite_a=True)
        norm = math.sqrt(max(float(lam[-1]), 0.0) + float(gram_rounding_bound(Gr)))
        norms.append(norm)
        eig.append((torch.from_numpy(lam * (tau / norm) ** 2), torch.from_numpy(V)))
    out = G * (tau / torch.tensor(norms, dtype=G.dtype).clamp_min(1e-300)).reshape(-1, 1, 1)
    eigs[id(out)] = (out, eig)
    return out


def _tracked_stepper(tau: float, eigs: dict | None = None):
    """One ascent start's projection: a step that is not rank one (to 1e-13, computed), or that the tracker cannot
    vouch for, is projected densely by `clip_spectral` and that replicate's tracker restarts from there."""
    project = BALLS["spectral"][1]
    trackers: dict[tuple[int, int], BallTracker] = {}
    returned: dict[int, torch.Tensor] = {}  # layer -> the iterate this stepper returned last (its rows: trackers' D)

    def start(D: torch.Tensor, r: int) -> BallTracker:
        known = (eigs or {}).get(id(D))
        if known is not None and known[0] is D and known[1][r] is not None:
            eig, known[1][r] = known[1][r], None  # the tracker holds it now (an m×m matrix: not kept twice)
            return BallTracker(D[r], tau, eig=eig)
        return BallTracker(D[r], tau)

    def step(Ds: list[torch.Tensor], moves: list[torch.Tensor]) -> list[torch.Tensor]:
        new = []
        for li, (D, move) in enumerate(zip(Ds, moves)):
            if min(D.shape[-2:]) < TRACK_MIN or D.shape[-2] < D.shape[-1]:
                new.append(project(D + move, tau))
                continue
            mine = returned.get(li) is D  # the iterate handed back unchanged: row r is trackers[(li, r)].D
            rows = []
            for r in range(D.shape[0]):
                res = None
                ab = _rank_one(move[r])
                if ab is not None:
                    tr = trackers.get((li, r))
                    if tr is None:
                        tr = trackers[(li, r)] = start(D, r)
                    elif not mine and not torch.equal(tr.D, D[r]):
                        tr = trackers[(li, r)] = BallTracker(D[r], tau)
                    res = tr.step(*ab)
                if res is None:
                    res = project((D[r] + move[r]).unsqueeze(0), tau)[0]
                    trackers.pop((li, r), None)
                rows.append(res)
            # one replicate: the tracker's own iterate, not a copy (nothing writes into an iterate in place)
            out = (rows[0].unsqueeze(0) if len(rows) == 1 else torch.stack(rows)).to(D.dtype)
            returned[li] = out
            new.append(out)
        return new

    return step


@QUANTITIES.register("sparse-backward-sup", "max over l, i of sup_{unit s-sparse a} v^T (prod_{r=l}^L "
                     "Sigma_{r,i} W_r^T) a, computed exactly as the top-s norm of u_{l,i} = dŷ_i/dx_{l-1,i}",
                     networks=NET)
def sparse_backward_sup(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    return Observation(_top_s_backward(Ws, X, ctx.i("s")), method="exact top-s norm")


# =========================================================================================================
# The full zou2018 claim set. Conventions shared by the estimators below:
#   * float64 throughout; all randomness from ctx.generator.
#   * Forward-only statements at initialisation use the exact Gaussian-conditioning sampler
#     (net.conditional_forward): exact in distribution, no W materialised.
#   * Statements that hold "given Theorem 5.1" (Appendix B/C) verify the verifiable events exactly on every
#     draw (item (i), and item (iv) at the beta in use) and return them as `valid`; the rest (items (ii),
#     (iii), (v)-(vii), hidden constants) cannot be verified and are reported as unverified in the notes.
#   * Bounds that involve per-replicate random quantities (sums of l') are folded into the quantity as a
#     ratio, so a claim's bound is a function of the parameters only.
# =========================================================================================================


def _cond(ctx: Context) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    X = ctx.inputs()
    xs, zs = net.conditional_forward(ctx.generator, X, _dims(ctx))
    return X, xs, zs


def _M(dims: list[int]) -> int:
    return max(dims[1:])


def _phi(ctx: Context) -> float:
    """The separation phi, declared either directly or (scaling claims, whose swept parameters are oriented so the
    statement's asymptotic regime is parameter -> infinity) as iphi = 1/phi."""
    return ctx.p("phi") if "phi" in ctx.params else 1.0 / ctx.p("iphi")


def _pair_distances(h: torch.Tensor) -> torch.Tensor:
    """||h_i - h_j|| for i < j, (R, n(n-1)/2), from the Gram matrix (float64: the cancellation costs at most
    ~1e-8 relative accuracy at distances 1e-4, far below any bound's resolution)."""
    G = h @ h.transpose(-1, -2)
    sq = G.diagonal(dim1=-2, dim2=-1)
    iu = torch.triu_indices(h.shape[-2], h.shape[-2], 1)
    d2 = sq[..., iu[0]] + sq[..., iu[1]] - 2 * G[..., iu[0], iu[1]]
    return d2.clamp_min(0).sqrt()


@QUANTITIES.register("min-layer-separation", "min over l in [L], i < i' of ||x_{l,i} - x_{l,i'}|| (args.normalized:"
                     " of the unit-normalised features; args.decay: divided by [1 - log(2)/(2L)]^l), exact sampler",
                     networks=NET)
def min_layer_separation(ctx: Context) -> Observation:
    _, xs, _ = _cond(ctx)
    L = len(xs) - 1
    normalized = bool(ctx.arg("normalized", False))
    decay = 1 - math.log(2) / (2 * L) if ctx.arg("decay", False) else 1.0
    vals = []
    for l in range(1, L + 1):
        h = xs[l]
        if normalized:
            h = h / h.norm(dim=-1, keepdim=True).clamp_min(1e-300)
        vals.append(_pair_distances(h).amin(-1) / decay ** l)
    v = torch.stack(vals, -1)
    return Observation(v.amin(-1), extras={"worst_layer": v.argmin(-1).to(torch.float64) + 1},
                       method="Gaussian-conditioning sampler (exact in distribution)")


@QUANTITIES.register("max-output-magnitude", "max over i of |ŷ_i| = |v^T x_{L,i}| at Gaussian initialisation "
                     "(exact sampler); args.quantile_draws = K: per replicate (one dataset), the empirical (1 - delta) "
                     "quantile of that max over K fresh initialisations", networks=NET)
def max_output_magnitude(ctx: Context) -> Observation:
    K = int(ctx.arg("quantile_draws", 0))
    if not K:
        _, xs, _ = _cond(ctx)
        v = net.output_vector(xs[-1].shape[-1], xs[-1].dtype)
        return Observation((xs[-1] @ v).abs().amax(-1),
                           method="Gaussian-conditioning sampler (exact in distribution)")
    X = ctx.inputs()
    dims = _dims(ctx)
    v = net.output_vector(dims[-1], X.dtype)
    per_init = torch.empty(ctx.replicates, K, dtype=X.dtype)
    chunk = max(1, int(2e6 // (X.shape[-2] * max(dims[1:]))))  # draws per pass: bounds memory at any K, m, L
    for r in range(ctx.replicates):
        for k0 in range(0, K, chunk):
            k1 = min(K, k0 + chunk)
            xL = net.conditional_last_layer(ctx.generator, X[r:r + 1].expand(k1 - k0, -1, -1), dims)
            per_init[r, k0:k1] = (xL @ v).abs().amax(-1)
    q = torch.quantile(per_init, 1 - ctx.p("delta"), dim=-1)
    return Observation(q, method=f"empirical (1 - delta) quantile over {K} initialisations per dataset, exact sampler")


def _near_zero_ratio(zs: list[torch.Tensor], beta: float) -> torch.Tensor:
    """max over l, i of |{j : |z_{l,i,j}| <= beta}| / (2 m_l^{3/2} beta), (R,)."""
    out = []
    for z in zs:
        m_l = z.shape[-1]
        out.append(((z.abs() <= beta).sum(-1).to(z.dtype) / (2 * m_l ** 1.5 * beta)).amax(-1))
    return torch.stack(out, -1).amax(-1)


@QUANTITIES.register("near-zero-preactivation-ratio", "max over l, i of |S_{l,i}(beta)| / (2 m_l^{3/2} beta), "
                     "S_{l,i}(beta) = {j : |<w_{l,j}, x_{l-1,i}>| <= beta} (Theorem 5.1(iv)), exact sampler",
                     networks=NET)
def near_zero_preactivation_ratio(ctx: Context) -> Observation:
    _, _, zs = _cond(ctx)
    return Observation(_near_zero_ratio(zs, ctx.p("beta")),
                       method="exact count, Gaussian-conditioning sampler (exact in distribution)")


@QUANTITIES.register("masked-product-norm", "max over i, 1 <= l1 < l2 <= L of Lambda = ||W_{l2}^T Sigma_{l2-1,i} "
                     "W_{l2-1}^T ... Sigma_{l1,i} W_{l1}^T||_2 (Lemma A.8), the Gram's top eigenvalue rounded up", networks=NET)
def masked_product_norm(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    fwd = net.forward(Ws, X)
    L, n = len(Ws), X.shape[-2]
    if L < 2:
        raise ValueError("Lemma A.8 needs L >= 2 (pairs l1 < l2)")
    best = torch.zeros(ctx.replicates, dtype=X.dtype)
    where = torch.zeros(ctx.replicates, 2, dtype=X.dtype)
    methods = set()
    wnorm: dict[int, torch.Tensor] = {}  # ||W_l||_2 rounded up: the recursion carries rounding errors through W_l
    # per replicate the largest value computed exactly so far: a later candidate certified below it is not
    # computed (-inf below), which leaves the max and its (l1, l2) as they were (`_certified_below`)
    top = [-math.inf] * ctx.replicates
    for l1 in range(1, L):
        # The Gram recursion where its Grams are no larger than P's smaller Gram (m_{l1-1} >= m_{l1} and every later
        # width: with m_{l1} > m_{l1-1}, as alternate widths at odd L, gram(A_S) was the other Gram once |S| > m_{l1-1},
        # and the recursion's product failed) and it saves more than the norms of W_l it needs cost: unless
        # d = m_{l1} with a single input
        wide = Ws[l1 - 1].shape[-2]
        if wide >= max(W.shape[-1] for W in Ws[l1 - 1:]) and (wide > Ws[l1 - 1].shape[-1] or n > 1):
            for l2 in range(l1 + 1, L + 1):
                if l2 not in wnorm:
                    wnorm[l2] = spectral_norm(Ws[l2 - 1])[0]
            norms = _masked_gram_norms(Ws, fwd, l1, wnorm, top)
            methods.add("masked Gram recursion, top eigenvalue (rounded up)")
        else:
            norms, pending = [], []
            P = Ws[l1 - 1].transpose(-1, -2).unsqueeze(1).expand(-1, n, -1, -1)  # W_{l1}^T: m_{l1} x m_{l1-1}
            for l2 in range(l1 + 1, L + 1):
                # W_{l2}^T Sigma P over the active units S only (W_{l2}[S]^T P[S]): half the product's flops
                W, mask = Ws[l2 - 1], fwd.mask(l2 - 1) > 0
                P = torch.stack([torch.stack([W[r][mask[r, i]].transpose(0, 1) @ P[r, i][mask[r, i]]
                                              for i in range(n)]) for r in range(W.shape[0])])
                k = min(P.shape[-2:])
                held = sum(len(g) * len(g[0]) * g[0][0].shape[-1] ** 2 * 8 for g, _ in pending)
                grams = (_product_grams(P) if n * (L - l1) > 1 and held + P.shape[0] * n * k * k * 8 <= PRUNE_MAX_BYTES
                         else None)
                if grams is None:
                    s, meth = spectral_norm(P)
                    methods.add(meth)
                    norms.append(s)
                else:  # spectral_norm's values where computed, once the block's Grams are all formed
                    methods.add("gram-eigvalsh (rounded up)")
                    pending.append((grams, gram_rounding_bound(P)))
                    norms.append(None)
            if pending:
                pruned = iter(_pruned_product_norms(pending, top))
                norms = [next(pruned) if s is None else s for s in norms]
        for l2, s in zip(range(l1 + 1, L + 1), norms):
            s = s.amax(-1)
            for r, v in enumerate(s.tolist()):
                top[r] = max(top[r], v)
            better = s > best
            best = torch.where(better, s, best)
            where[better] = torch.tensor([float(l1), float(l2)], dtype=X.dtype)
    return Observation(best, extras={"l1": where[:, 0], "l2": where[:, 1]}, method=",".join(sorted(methods)))


PRUNE_MIN_N = 64  # below, the eigenvalues come from torch's batched eigvalsh, cheaper than a certificate each
PRUNE_MAX_BYTES = 1 << 28  # the Grams held at once to be met in order; beyond, solved as they come (as before)


def _top_estimate(G: torch.Tensor, steps: int = 8) -> float:
    """A Rayleigh quotient of the symmetric G (its upper triangle read: BLAS symv) after a few power steps from the
    all-ones vector: which candidate looks largest (the order in which `_certified_below` meets them; it decides
    nothing)."""
    from scipy.linalg.blas import dsymv

    A = to_numpy(G)
    A = A if A.flags.f_contiguous else A.T  # C-ordered: its transpose, the same symmetric matrix, Fortran-ordered
    v = np.ones(A.shape[-1])
    for _ in range(steps):
        w = dsymv(1.0, A, v, lower=0)
        nv = float(np.linalg.norm(w))
        if not nv > 0:
            return 0.0
        v = w / nv
    return float(v @ dsymv(1.0, A, v, lower=0))


def _certified_below(G: torch.Tensor, best: float, add: float, fro: float) -> bool:
    """True proves that sqrt(max(lam, 0) + add), lam G's top eigenvalue as a backward-stable eigensolver computes
    it (|lam - lambda_max(G)| <= 100 k u ||G||_F, 25x the allowance the norms add for it), is below `best`, by at
    least 5e-9 relative: Cholesky of s I - G succeeds, c = best^2 (1 - 1e-8) - add - 100 k u ||G||_F and s = c
    less the rounding of s I - G's diagonal and Cholesky's backward error, bounded without assuming anything of
    the factor (|dM| <= gamma_{k+1} |R^T| |R|, whose norm is <= k (1 + u) max_j M_jj <= k (s + ||G||_F)): so
    lambda_max(G) <= c. False decides nothing (the caller computes the value). G: symmetric, its upper triangle
    read."""
    if not 0 < best < math.inf:  # nothing computed yet (-inf)
        return False
    k = G.shape[-1]
    u = torch.finfo(torch.float64).eps / 2
    c = best * best * (1 - 1e-8) - add - 100 * k * u * fro
    if not 0 < c < math.inf:
        return False
    from scipy.linalg import lapack

    _scipy_blas_threads(torch.get_num_threads())
    M = np.negative(to_numpy(G), order="F")  # LAPACK's dpotrf: 2x torch's cholesky_ex at 512 here
    idx = np.arange(k)
    M[idx, idx] += c - 4 * (k + 2) ** 2 * u * (c + fro)
    return lapack.dpotrf(M, lower=0, clean=0, overwrite_a=1)[1] == 0


def _met_in_order(cands: list[tuple[Any, torch.Tensor, float, float]], top: list[float], r: int):
    """Replicate r's candidates (tag, G, allowance, ||G||_F or a bound on it) in the order of their estimates (one
    alone needs none), each yielded as (tag, whether `_certified_below` shows it below top[r]): top[r] is read as
    the caller left it, the largest value computed so far, which the caller raises as it solves the others."""
    if len(cands) > 1:
        cands = sorted(cands, key=lambda c: -_top_estimate(c[1]))
    for tag, G, add, fro in cands:
        yield tag, _certified_below(G, top[r], add, fro)


def _product_grams(P: torch.Tensor) -> list[list[torch.Tensor]] | None:
    """Per (replicate, input) of P (R, n, a, b) the Gram that `spectral_norm` takes its top eigenvalue of (syrk's
    upper triangle, Fortran-ordered: what every reader here reads), where it takes that LAPACK path; None
    elsewhere."""
    a, b = P.shape[-2:]
    if not on_host(P) or P.requires_grad or a * b < SYRK_MIN_ENTRIES or min(a, b) < max(TOP_EIG_MIN_N, PRUNE_MIN_N) \
            or min(a, b) > EXACT_SVD_MAX:
        return None
    out = []
    for Pr in P.to(torch.float64):
        row = []
        for M in Pr:
            row.append(torch.from_numpy(_sym_gram(to_numpy(M), mirror=False)))
        out.append(row)
    return out


def _pruned_product_norms(pending: list, top: list[float]) -> list[torch.Tensor]:
    """spectral_norm's values (R, n) of one l1's products, one per l2 in `pending` ((Grams, gram_rounding_bound)),
    -inf where `_certified_below` shows a value below the replicate's largest (`top`, updated): the candidates
    met in the order of their estimates, so the largest is usually computed first and the others certified."""
    R, n = len(pending[0][0]), len(pending[0][0][0])
    lam = [torch.zeros(R, n, dtype=torch.float64) for _ in pending]
    skip = [torch.zeros(R, n, dtype=torch.bool) for _ in pending]
    for r in range(R):
        # ||G||_F <= sqrt2 ||triu(G)||_F: syrk wrote the upper triangle only
        cands = [((k, i), g[r][i], float(gb[r, i]), math.sqrt(2) * float(g[r][i].norm()))
                 for k, (g, gb) in enumerate(pending) for i in range(n)]
        for (k, i), below in _met_in_order(cands, top, r):
            if below:
                skip[k][r, i] = True
                continue
            # the upper triangle syrk wrote: _top_gram_eigenvalue's call on the same matrix
            lam[k][r, i] = _syevx_one(to_numpy(pending[k][0][r][i]), vectors=False, overwrite=True)[0]
            top[r] = max(top[r], float((lam[k][r, i].clamp_min(0) + pending[k][1][r, i]).sqrt()))
    out = []
    for (_, gb), lk, sk in zip(pending, lam, skip):
        s = (lk.clamp_min(0) + gb).sqrt()
        out.append(s.masked_fill(sk, -math.inf))
    return out


def _gamma(k: int) -> float:
    u = torch.finfo(torch.float64).eps / 2
    return k * u / (1 - k * u)


def _masked_gram_norms(Ws: list[torch.Tensor], fwd: net.Forward, l1: int,
                       wnorm: dict[int, torch.Tensor], top: list[float] | None = None) -> list[torch.Tensor]:
    """||P_{l1,l2}||_2 for l2 = l1+1..L, (R, n) each, P = W_{l2}^T Sigma_{l2-1} ... Sigma_{l1} W_{l1}^T, from the
    Grams G_{l2} = P P^T = W_{l2}^T Sigma G_{l2-1} Sigma W_{l2} with G_{l1} = W_{l1}^T W_{l1}, on the active units
    S of each mask only: G_{l2} = W_{l2}[S]^T G_{l2-1}[S, S] W_{l2}[S]. That needs |S|^2 m_{l1-1} + 2 |S| m (|S| + m)
    flops per step instead of P's product and Gram (3 m^2 m_{l1-1}): 5x fewer at m = 1024, d = 4096. Each top
    eigenvalue is rounded up by a bound on the recursion's rounding (products |fl(AB) - AB| <= gamma_k |A||B|, so
    ||.||_2 <= gamma_k ||A||_F ||B||_F, carried through W_S^T E W_S by ||W_S||_2^2 <= wnorm[l2]^2) plus the
    eigensolver's backward error (4 m u ||G||_F): never below the exact product's norm, above it by about 1e-10
    relative (as `spectral_norm`'s allowance). With `top` (per replicate the largest value computed so far,
    updated) a replicate's Grams from order PRUNE_MIN_N on are met in the order of their estimates and each one
    `_certified_below` top is not solved: -inf there (the eigensolves were 25-60% of a shard's time)."""
    L = len(Ws)
    R, n = fwd.out.shape
    u = torch.finfo(torch.float64).eps / 2
    out = [torch.empty(R, n, dtype=torch.float64) for _ in range(l1 + 1, L + 1)]
    for r in range(R):
        A = Ws[l1 - 1][r].to(torch.float64)
        cands = []
        for i in range(n):
            S = fwd.mask(l1)[r, i].nonzero().squeeze(-1)
            AS = A[:, S]
            G = gram(AS)  # |S| x |S| (|S| <= m_{l1} <= m_{l1-1}): A_S^T A_S
            err = _gamma(A.shape[0]) * float(AS.pow(2).sum())
            for k, l2 in enumerate(range(l1 + 1, L + 1)):
                WS = Ws[l2 - 1][r].to(torch.float64)[S]  # rows S of W_{l2}: (|S|, m_{l2})
                T = G @ WS
                Gn = WS.transpose(0, 1) @ T
                Gn = 0.5 * (Gn + Gn.transpose(0, 1))
                w2, wf = float(wnorm[l2][r]) ** 2, float(WS.norm())
                err = w2 * err + _gamma(len(S)) * wf * (math.sqrt(w2) * float(G.norm()) + float(T.norm()))
                fro = float(Gn.norm())
                eig_err = 4 * Gn.shape[-1] * u * fro
                if top is not None and Gn.shape[-1] >= PRUNE_MIN_N and on_host(Gn) and \
                        (len(cands) + 1) * Gn.numel() * 8 <= PRUNE_MAX_BYTES:
                    cands.append(((k, i, Gn, err, eig_err), Gn, err + eig_err, fro))
                else:
                    lam = float(top_eigenvalue(Gn)) if Gn.numel() else 0.0
                    out[k][r, i] = math.sqrt(max(lam, 0.0) + err + eig_err)
                    if top is not None:
                        top[r] = max(top[r], float(out[k][r, i]))
                if l2 < L:
                    S = fwd.mask(l2)[r, i].nonzero().squeeze(-1)
                    G = Gn[S][:, S]
        for (k, i, Gn, err, eig_err), below in (_met_in_order(cands, top, r) if top is not None else ()):
            if below:
                out[k][r, i] = -math.inf
                continue
            lam = float(top_eigenvalue(Gn))
            out[k][r, i] = math.sqrt(max(lam, 0.0) + err + eig_err)
            top[r] = max(top[r], float(out[k][r, i]))
    return out


def _node_norms2(a: torch.Tensor, S: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """||(1/n) sum_i a_i S_ij x_i||^2 for every node j: a (R, K, n), S (R, n, m), G (R, n, n) -> (R, K, m)."""
    n = S.shape[-2]
    Q = a.unsqueeze(-1) * S.unsqueeze(1)  # (R, K, n, m)
    GQ = G.unsqueeze(1) @ Q
    return (Q * GQ).sum(-2) / n ** 2


def _candidate_coefficients(gen: torch.Generator, R: int, n: int, H: torch.Tensor | None,
                            n_random: int = 16) -> torch.Tensor:
    """Structured search set for "for any a in R^n": e_i, e_i +- e_j, random signs, Gaussian directions and
    (when H is given) the eigenvectors of H with the smallest eigenvalues. (R, K, n)."""
    eye = torch.eye(n, dtype=torch.float64)
    rows = [eye]
    if n >= 2:
        iu = torch.triu_indices(n, n, 1)
        rows += [eye[iu[0]] - eye[iu[1]], eye[iu[0]] + eye[iu[1]]]
    rows.append(torch.randint(0, 2, (n_random, n), generator=gen).to(torch.float64) * 2 - 1)
    rows.append(torch.randn(n_random, n, generator=gen, dtype=torch.float64))
    A = torch.cat(rows).unsqueeze(0).expand(R, -1, -1)
    if H is not None:
        # canonical: H is often rank-deficient (a Gram of points in few dimensions), and LAPACK's basis of its null
        # space differs between machines; the minimum over a then did too
        _, vecs = canonical_eigh(H)
        A = torch.cat([A, vecs[..., : min(n, 4)].transpose(-1, -2)], 1)
    return A


@QUANTITIES.register("gradient-carrying-node-count", "min over a (structured search) of #{j : ||(1/n) sum_i a_i "
                     "sigma'(<w_{L,j}, x_{L-1,i}>) x_{L-1,i}|| >= t ||a||_inf phi / n^2} (Lemma A.10; the search "
                     "includes ctx.coefficients), exact sampler",
                     networks=NET)
def gradient_carrying_node_count(ctx: Context) -> Observation:
    X, xs, zs = _cond(ctx)
    n, phi, t = X.shape[-2], _phi(ctx), ctx.p("t")
    xL1 = xs[-2]
    S = (zs[-1] > 0).to(X.dtype)
    G = xL1 @ xL1.transpose(-1, -2)
    H = G * (S @ S.transpose(-1, -2))
    A = _candidate_coefficients(ctx.generator, ctx.replicates, n, H)
    # "for every a": the claim's coefficient vector (ctx.coefficients, moved by runs and hunts) joins the search;
    # its data-built family (null-vector) reads the vectors the lemma sums, x_{L-1,i}
    A = torch.cat([A, ctx.coefficients(n, xL1).to(A.dtype).unsqueeze(1)], 1)
    thr = t * phi / n ** 2 * A.abs().amax(-1)  # (R, K)
    counts = []
    chunk = max(1, int(4e6 // (ctx.replicates * n * S.shape[-1])))  # bounds the (R, chunk, n, m) work tensor
    for k0 in range(0, A.shape[1], chunk):
        nrm2 = _node_norms2(A[:, k0:k0 + chunk], S, G)
        counts.append((nrm2 >= thr[:, k0:k0 + chunk, None] ** 2).sum(-1))
    counts = torch.cat(counts, 1).to(X.dtype)
    return Observation(counts.amin(-1), extras={"candidate": counts.argmin(-1).to(X.dtype)},
                       method="structured search over a (e_i, e_i+-e_j, signs, Gaussian, eigvecs of G∘SS^T); exact counts")


@QUANTITIES.register("norm-increment", "max over l, i of (||x_{l,i}||^2 - ||x_{l-1,i}||^2)/||x_{l-1,i}||^2 * "
                     "sqrt(m_l/m) (args.two_sided: absolute value) (Lemma A.1), exact sampler", networks=NET)
def norm_increment(ctx: Context) -> Observation:
    X = ctx.inputs()
    dims = _dims(ctx)
    norms = net.conditional_layer_norms(ctx.generator, X, dims)
    m = min(dims[1:])
    vals = []
    for l in range(1, len(dims)):
        rel = (norms[l] ** 2 - norms[l - 1] ** 2) / norms[l - 1] ** 2 * math.sqrt(dims[l] / m)
        vals.append(rel.abs() if ctx.arg("two_sided", False) else rel)
    return Observation(torch.stack(vals, -1).amax(-1).amax(-1),
                       method="Gaussian-conditioning sampler (exact in distribution)")


@QUANTITIES.register("norm-drift", "max over l, i of | ||x_{l,i}|| - 1 | / l (Corollary A.2), exact sampler",
                     networks=NET)
def norm_drift(ctx: Context) -> Observation:
    X = ctx.inputs()
    norms = net.conditional_layer_norms(ctx.generator, X, _dims(ctx))
    vals = [((norms[l] - 1).abs() / l).amax(-1) for l in range(1, len(norms))]
    return Observation(torch.stack(vals, -1).amax(-1), method="Gaussian-conditioning sampler (exact in distribution)")


# ------------------------------------------------------------------------------ perturbation region (App. B)


def _valid_iv(zs: list[torch.Tensor], betas: list[float]) -> torch.Tensor:
    """Theorem 5.1(iv) at layer-specific beta_l, verified exactly: |S_{l,i}(beta_l)| <= 2 m_l^{3/2} beta_l."""
    ok = torch.ones(zs[0].shape[0], dtype=torch.bool)
    for z, b in zip(zs, betas):
        m_l = z.shape[-1]
        ok &= ((z.abs() <= b).sum(-1) <= 2 * m_l ** 1.5 * b).all(-1)
    return ok


@QUANTITIES.register("perturbed-weight-norm", "sup over ||W~_l - W_l||_2 <= tau of max_l ||W~_l||_2, attained "
                     "exactly by the aligned rank-one perturbation (= max_l ||W_l||_2 + tau), given Theorem 5.1(i)",
                     networks=NET)
def perturbed_weight_norm(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    fwd = net.forward(Ws, X)
    tau = ctx.p("tau")
    # The maximiser W + tau u_1 v_1^T has singular values s_1 + tau, s_2, ...: its norm is ||W||_2 + tau exactly,
    # so the largest (rounded-up) layer norm gives both the value and Theorem 5.1(i)'s weight condition.
    wn = _max_layer_norm(Ws)
    xn = torch.stack([x.norm(dim=-1).amax(-1) for x in fwd.x[1:]], -1).amax(-1)
    return Observation(wn + tau, valid=(xn <= 1.5) & (wn <= 3.5),
                       method="exact: W + tau u1 v1^T attains the sup (triangle inequality is tight), "
                              "||W||_2 by Gram eigvalsh rounded up")


def _max_layer_norm(Ws: list[torch.Tensor]) -> torch.Tensor:
    """max_l ||W_l||_2 per replicate, as the max of `spectral_norm`'s rounded-up norms, with one eigensolver per
    replicate where the layers' norms are apart: the layer that looks largest (||W||_F (a^-1/2 + b^-1/2), a Gaussian
    a x b matrix's norm) first, then each other layer certified below the running max by Cholesky
    (`spectral_norm_at_most`, a third of syevx's flops), its exact norm only where that fails. Equal to the max of
    all exact norms unless two layers' norms lie within rounding (~1e-10 relative) of each other."""
    guess = torch.stack([W.flatten(1).norm(dim=-1) * (W.shape[-2] ** -0.5 + W.shape[-1] ** -0.5) for W in Ws], -1)
    order = guess.argsort(-1, descending=True).tolist()
    out = torch.empty(guess.shape[0], dtype=Ws[0].dtype)
    for r, layers in enumerate(order):
        best = spectral_norm(Ws[layers[0]][r])[0]
        for l in layers[1:]:
            W = Ws[l][r]
            if not bool(spectral_norm_at_most(W, float(best))):
                best = torch.maximum(best, spectral_norm(W)[0])
        out[r] = best
    return out


def greedy_flip_perturbation(Ws: list[torch.Tensor], X: torch.Tensor, tau: float, fwd: net.Forward,
                             target: int) -> list[torch.Tensor]:
    """A perturbation {Delta_l}, ||Delta_l||_2 <= tau, that flips as many activations of sample `target` as the
    rank-one budget allows, layer by layer (catalogue P1, greedy).

    At layer l, with x~ = x~_{l-1,target} the perturbed input, Delta_l = x~ delta^T / ||x~||^2 moves the
    pre-activation W_l^T x~ by exactly delta, with ||Delta_l||_2 = ||delta|| / ||x~|| <= tau iff ||delta|| <=
    tau ||x~||. A neuron whose sign (w.r.t. the unperturbed pattern Sigma_{l,target}) is not yet flipped costs
    ~z_j^2 to flip, so taking the cheapest first maximises the count at that layer: for l = 1 this is the exact
    supremum of ||Sigma~_1 - Sigma_1||_0 over the spectral ball. Returns Delta_1..Delta_L, (R, m_{l-1}, m_l)."""
    h = X[:, target]
    Ds = []
    for l, W in enumerate(Ws, 1):
        z0 = fwd.z[l - 1][:, target]
        zc = (h.unsqueeze(-2) @ W).squeeze(-2)  # W_l^T x~
        already = (zc > 0) != (z0 > 0)
        cost = torch.where(already, torch.zeros_like(zc), (zc * (1 + 1e-9)) ** 2)
        cost = torch.where((zc == 0) & ~already, torch.full_like(zc, math.inf), cost)
        order = cost.argsort(-1)
        csum = cost.gather(-1, order).cumsum(-1)
        budget = (tau * h.norm(dim=-1, keepdim=True)) ** 2
        chosen = torch.zeros_like(already)
        chosen.scatter_(-1, order, csum <= budget)
        delta = torch.where(chosen & ~already, -zc * (1 + 1e-9), torch.zeros_like(zc))
        hn2 = (h * h).sum(-1, keepdim=True).clamp_min(1e-300)
        D = h.unsqueeze(-1) * (delta / hn2).unsqueeze(-2)
        Ds.append(D)
        h = torch.relu(zc + delta)
    return Ds


def _flip_counts(Ws: list[torch.Tensor], X: torch.Tensor, fwd: net.Forward) -> list[torch.Tensor]:
    """||Sigma~_{l,i} - Sigma_{l,i}||_0 for every l, i under weights Ws (pattern of fwd is the unperturbed one)."""
    pert = net.forward(Ws, X)
    return [((zt > 0) != (z > 0)).sum(-1).to(X.dtype) for zt, z in zip(pert.z, fwd.z)]


@QUANTITIES.register("activation-flip-ratio", "sup over ||W~_l - W_l||_2 <= tau of max_{l,i} ||Sigma~_{l,i} - "
                     "Sigma_{l,i}||_0 / (3 4^L m_l tau^{2/3}) (lower estimate: greedy rank-one flips per sample + "
                     "random), given Theorem 5.1(i) and (iv) at beta_l = 4^L tau^{2/3} m_l^{-1/2}", networks=NET)
def activation_flip_ratio(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    fwd = net.forward(Ws, X)
    tau, L, n = ctx.p("tau"), len(Ws), X.shape[-2]
    dims = [W.shape[-1] for W in Ws]
    scale = [3 * 4 ** L * m_l * tau ** (2 / 3) for m_l in dims]
    betas = [4 ** L * tau ** (2 / 3) / math.sqrt(m_l) for m_l in dims]
    valid = _theorem_5_1_i(Ws, fwd) & _valid_iv(fwd.z, betas)
    best = torch.zeros(ctx.replicates, dtype=X.dtype)
    found = torch.zeros_like(best)
    # random perturbations (P0), a few draws
    for _ in range(int(ctx.arg("random_draws", 2))):
        Wt = [W + D for W, D in zip(Ws, random_perturbation(ctx.generator, Ws, tau))]
        r = torch.stack([(c / s).amax(-1) for c, s in zip(_flip_counts(Wt, X, fwd), scale)], -1).amax(-1)
        best = torch.maximum(best, r)
    if ctx.search in ("gradient", "adversarial", "exhaustive"):
        for i in range(n):
            Ds = greedy_flip_perturbation(Ws, X, tau, fwd, i)
            Wt = [W + D for W, D in zip(Ws, Ds)]
            r = torch.stack([(c / s).amax(-1) for c, s in zip(_flip_counts(Wt, X, fwd), scale)], -1).amax(-1)
            found = torch.where(r > best, torch.ones_like(found), found)
            best = torch.maximum(best, r)
    return Observation(best, valid=valid, extras={"found_by_greedy": found},
                       method=f"search={ctx.search} (random + greedy rank-one flips; layer 1 greedy is the exact sup)")


@QUANTITIES.register("union-flip-ratio", "sup over ||W~_l - W_l||_2 <= tau of |{j : exists i, (Sigma~_{L,i} - "
                     "Sigma_{L,i})_jj != 0}| / (3 n 4^L m_L tau^{2/3}) under ONE common perturbation (Lemma B.4), "
                     "lower estimate by random + greedy flips, given Theorem 5.1(i), (iv)", networks=NET)
def union_flip_ratio(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    fwd = net.forward(Ws, X)
    tau, L, n = ctx.p("tau"), len(Ws), X.shape[-2]
    m_L = Ws[-1].shape[-1]
    scale = 3 * n * 4 ** L * m_L * tau ** (2 / 3)
    betas = [4 ** L * tau ** (2 / 3) / math.sqrt(W.shape[-1]) for W in Ws]
    valid = _theorem_5_1_i(Ws, fwd) & _valid_iv(fwd.z, betas)

    def union(Wt: list[torch.Tensor]) -> torch.Tensor:
        zt = net.forward(Wt, X).z[-1]
        return (((zt > 0) != (fwd.z[-1] > 0)).any(-2)).sum(-1).to(X.dtype) / scale

    best = torch.zeros(ctx.replicates, dtype=X.dtype)
    for _ in range(int(ctx.arg("random_draws", 2))):
        best = torch.maximum(best, union([W + D for W, D in zip(Ws, random_perturbation(ctx.generator, Ws, tau))]))
    if ctx.search in ("gradient", "adversarial", "exhaustive"):
        for i in range(n):
            Ds = greedy_flip_perturbation(Ws, X, tau, fwd, i)
            best = torch.maximum(best, union([W + D for W, D in zip(Ws, Ds)]))
        # joint last-layer adversary: per-sample greedy shifts delta_i realised by the minimum-norm Delta_L with
        # Delta_L^T x_{L-1,i} = delta_i for all i, rescaled onto the ball (catalogue, Lemma B.4)
        Xl = fwd.x[-2]  # (R, n, m_{L-1})
        z = fwd.z[-1]
        cost = (z * (1 + 1e-9)) ** 2
        deltas = []
        for i in range(n):
            order = cost[:, i].argsort(-1)
            csum = cost[:, i].gather(-1, order).cumsum(-1)
            chosen = torch.zeros_like(z[:, i], dtype=torch.bool)
            chosen.scatter_(-1, order, csum <= (tau * Xl[:, i].norm(dim=-1, keepdim=True)) ** 2)
            deltas.append(torch.where(chosen, -z[:, i] * (1 + 1e-9), torch.zeros_like(z[:, i])))
        Dm = torch.stack(deltas, -2)  # (R, n, m_L)
        Gm = Xl @ Xl.transpose(-1, -2)
        DL = Xl.transpose(-1, -2) @ torch.linalg.solve(Gm, Dm)  # (R, m_{L-1}, m_L)
        DL = DL * (tau / spectral_norm(DL)[0].clamp_min(1e-300)).clamp_max(1.0).reshape(-1, 1, 1)
        best = torch.maximum(best, union(Ws[:-1] + [Ws[-1] + DL]))
    return Observation(best, valid=valid, method=f"search={ctx.search} (random + greedy per-sample + joint min-norm)")


def _top_s_backward(Ws: list[torch.Tensor], X: torch.Tensor, s: int) -> torch.Tensor:
    us = net.input_gradients_of(Ws, net.forward(Ws, X))
    return torch.stack([top_s_norm(u, s).amax(-1) for u in us], -1).amax(-1)


def _greedy_arbitrary_patterns(Ws: list[torch.Tensor], fwd: net.Forward, tau: float, s: int) -> torch.Tensor:
    """Lemma B.1 adversary with ARBITRARY binary Sigma~ within Hamming distance s of Sigma (per layer, per i) and
    ||W~_r - W_r|| <= tau, for every target layer l separately (sup and max commute): backward from v, at each
    layer r switch on the s inactive units with the largest |g_j| (raises ||Sigma~ g||), then add the rank-one
    Delta_r = tau (W_r h / ||W_r h||)(h / ||h||)^T, which adds exactly tau ||h|| along W_r h; at r = l the
    rank-one term is aimed at the top-s support of W_l h instead. Returns max_{l,i} Gamma~ (R,)."""
    L = len(Ws)
    R, n = fwd.out.shape
    v = net.output_vector(Ws[-1].shape[-1], fwd.out.dtype)
    best = torch.zeros(R, dtype=fwd.out.dtype)
    for l in range(1, L + 1):
        g = v.expand(R, n, -1)
        for r in range(L, l - 1, -1):
            mask = fwd.mask(r)
            score = torch.where(mask > 0, torch.full_like(g, -1.0), g.abs())
            k = min(s, g.shape[-1])
            idx = score.topk(k, dim=-1).indices
            on = torch.zeros_like(mask).scatter_(-1, idx, (score.gather(-1, idx) >= 0).to(mask.dtype))
            h = g * torch.clamp(mask + on, max=1.0)
            Wh = h @ Ws[r - 1].transpose(-1, -2)  # W_r h, (R, n, m_{r-1})
            hn = h.norm(dim=-1, keepdim=True)
            if r > l:
                g = Wh + tau * hn * Wh / Wh.norm(dim=-1, keepdim=True).clamp_min(1e-300)
            else:
                best = torch.maximum(best, (top_s_norm(Wh, s) + tau * hn.squeeze(-1)).amax(-1))
    return best


@QUANTITIES.register("perturbed-sparse-backward-sup", "sup over the tau-ball of max_{l,i} sup_{unit s-sparse a} "
                     "v^T(prod_{r=l}^L Sigma~_{r,i} W~_r^T) a (exact top-s norm); args.patterns = 'induced' "
                     "(Sigma~ from W~, Theorem 5.3(iv)) or 'arbitrary' (any Sigma~ within Hamming s, Lemma B.1)",
                     networks=NET)
def perturbed_sparse_backward_sup(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    fwd = net.forward(Ws, X)
    tau, s = ctx.p("tau"), ctx.i("s")
    valid = _theorem_5_1_i(Ws, fwd)
    if ctx.arg("patterns", "induced") == "arbitrary":
        value = _greedy_arbitrary_patterns(Ws, fwd, tau, s)
        Wt = [W + D for W, D in zip(Ws, random_perturbation(ctx.generator, Ws, tau))]
        value = torch.maximum(value, _top_s_backward(Wt, X, s))
        return Observation(value, valid=valid, method="greedy arbitrary patterns + aligned rank-one perturbations, "
                           "and random perturbations (lower estimate of the sup)")
    value, found = maximise(lambda Wt: _top_s_backward(Wt, X, s), Ws, tau, ctx.search, ctx.generator,
                            steps=int(ctx.arg("steps", 10)))
    return Observation(value, valid=valid, extras={"found_by": found}, method=f"search={ctx.search}, exact top-s norm")


def _labels(ctx: Context, Ws: list[torch.Tensor], X: torch.Tensor, fwd: net.Forward) -> torch.Tensor:
    """Rademacher labels, or (args.labels = 'adversarial') the signs of the eigenvector of H = G∘K (last-layer Gram
    of x_{L-1} times activation overlaps) with the smallest eigenvalue: the labels that make ||grad_{W_L}|| small."""
    if ctx.arg("labels", "random") != "adversarial":
        return ctx.labels(X.shape[-2])
    xl = fwd.x[-2]
    S = fwd.mask(len(Ws))
    H = (xl @ xl.transpose(-1, -2)) * (S @ S.transpose(-1, -2))
    _, vecs = canonical_eigh(H)  # the sign of an eigenvector is LAPACK's choice; labels must not be
    y = torch.sign(vecs[..., 0])
    return torch.where(y == 0, torch.ones_like(y), y)


@QUANTITIES.register("last-layer-gradient-ratio", "inf over the tau-ball of ||grad_{W_L} L_S(W~)||_F^2 / "
                     "(sum_i l'(y_i y~_i))^2 (logistic loss; lower-bound claims: the search minimises it), given "
                     "Theorem 5.1(i)", networks=NET)
def last_layer_gradient_ratio(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    fwd = net.forward(Ws, X)
    y = _labels(ctx, Ws, X, fwd)
    valid = _theorem_5_1_i(Ws, fwd)

    def neg_ratio(Wt: list[torch.Tensor]) -> torch.Tensor:
        # ||grad_{W_L}||_F^2 = ||sum_i w_i x_{L-1,i} b_{L,i}^T||_F^2 = w^T (G∘K) w (b_{L,i} = Σ_{L,i} v, v = ±1): n×n
        # factors, no m×m gradient formed or differentiated (w and l' as net.loss_gradient_factors makes them)
        fwd_t = net.forward(Wt, X)
        lp = net.logistic_derivative(y * fwd_t.out)
        wts = lp * y / X.shape[-2]
        xl, S = fwd_t.x[-2], fwd_t.mask(len(Wt))
        H = (xl @ xl.transpose(-1, -2)) * (S @ S.transpose(-1, -2))
        return -torch.einsum("ri,rij,rj->r", wts, H, wts) / lp.sum(-1) ** 2

    best, found = maximise(neg_ratio, Ws, ctx.p("tau"), ctx.search, ctx.generator, steps=int(ctx.arg("steps", 10)))
    return Observation(-best, valid=valid, extras={"found_by": found},
                       method=f"search={ctx.search} (minimising), closed-form gradients")


@QUANTITIES.register("gradient-upper-ratio", "sup over the tau-ball of max_l ||grad_{W_l}||/(-(1/|B|) sum_{i in B} "
                     "l'(y_i y~_i)) (args.norm = 'fro' | 'spectral'; minibatch of size B if declared, else all n), "
                     "given Theorem 5.1(i)", networks=NET)
def gradient_upper_ratio(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    fwd = net.forward(Ws, X)
    n = X.shape[-2]
    y = _labels(ctx, Ws, X, fwd)
    B = ctx.i("B", n)
    batch = None if B >= n else net.random_minibatch(ctx.generator, ctx.replicates, n, B, X.dtype)
    spectral = ctx.arg("norm", "fro") == "spectral"
    valid = _theorem_5_1_i(Ws, fwd)

    def ratio(Wt: list[torch.Tensor]) -> torch.Tensor:
        if spectral:  # the gradient is a sum of n outer products: its norm from the factors, no m×m SVD
            wts, bs, lp, fwd_t = net.loss_gradient_factors(Wt, X, y, batch=batch)
            # weights on the b side: a minibatch zeroes rows, and the QR of a rank-deficient factor has no gradient
            norms = [low_rank_spectral_norm(x, wts.unsqueeze(-1) * b) for x, b in zip(fwd_t.x[:-1], bs)]
        else:
            grads, lp, _ = net.loss_gradients(Wt, X, y, batch=batch)
            norms = [G.flatten(1).norm(dim=-1) for G in grads]
        w = torch.ones_like(lp) if batch is None else batch
        denom = -(lp * w).sum(-1) / w.sum(-1)
        return torch.stack(norms, -1).amax(-1) / denom

    best, found = maximise(ratio, Ws, ctx.p("tau"), ctx.search, ctx.generator, steps=int(ctx.arg("steps", 10)))
    return Observation(best, valid=valid, extras={"found_by": found},
                       method=f"search={ctx.search}, closed-form gradients, {'spectral' if spectral else 'Frobenius'}")


# ------------------------------------------------------------------------------ training (Section 5, App. C/D)


def _displacement(Ws: list[torch.Tensor], W0: list[torch.Tensor]) -> torch.Tensor:
    """max_l ||W_l - W_l^(0)||_2 per replicate (the Gram's top eigenvalue, rounded up)."""
    return torch.stack([spectral_norm(W - V)[0] for W, V in zip(Ws, W0)], -1).amax(-1)


def _within(Ws: list[torch.Tensor], W0: list[torch.Tensor], tau: float) -> torch.Tensor:
    """_displacement(Ws, W0) <= tau per replicate, decided by the Cholesky certificate (`spectral_norm_at_most`,
    the exact norm where it cannot certify): a threshold needs no eigensolver (0.4 of a trajectory's time at m = 256)."""
    return torch.stack([spectral_norm_at_most(W - V, tau) for W, V in zip(Ws, W0)], -1).all(-1)


def _eta0(ctx: Context) -> float:
    """eta0 (eta = eta0 / M), declared directly or as ieta = 1/eta0 (scaling claims oriented to eta -> 0)."""
    return ctx.p("eta0") if "eta0" in ctx.params else 1.0 / ctx.p("ieta")


def _batch(ctx: Context, n: int) -> torch.Tensor | None:
    B = ctx.i("B", n)
    if B > n or B < 1:
        raise ValueError(f"minibatch size B = {B} must lie in [1, n = {n}]")
    return None if B == n else net.random_minibatch(ctx.generator, ctx.replicates, n, B)


@QUANTITIES.register("gd-displacement", "max over k <= K and l of ||W_l^(k) - W_l^(0)||_2 for (S)GD with the "
                     "largest step eta = T/K allowed by k <= T/eta, T = tau/(4^L M^{1/2} rho) (Lemmas 5.5, 5.7; "
                     "logistic loss, rho = 1), given Theorem 5.1(i) at W^(0)", networks=NET)
def gd_displacement(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    n, L = X.shape[-2], len(Ws)
    y = ctx.labels(n)
    valid = _theorem_5_1_i(Ws, net.forward(Ws, X))
    M = _M(_dims(ctx))
    K = ctx.i("K")
    T = ctx.p("tau") / (4 ** L * math.sqrt(M) * 1.0)
    eta = T / K
    W0 = [W.clone() for W in Ws]
    worst = torch.zeros(ctx.replicates, dtype=X.dtype)
    for _ in range(K):
        grads, _, _ = net.loss_gradients(Ws, X, y, batch=_batch(ctx, n))
        Ws = [W - eta * G for W, G in zip(Ws, grads)]
        worst = torch.maximum(worst, _displacement(Ws, W0))
    return Observation(worst, valid=valid, extras={"eta": torch.full_like(worst, eta)},
                       method=f"{'SGD' if ctx.i('B', n) < n else 'GD'}, K = {K} steps at eta = T/K, exact norms (Gram top eigenvalue, rounded up)")


@QUANTITIES.register("hitting-time", "K eta, K = first (S)GD iteration with L_S(W^(K)) <= eps (logistic loss, "
                     "eta = eta0 / M); a replicate that does not reach eps within args.kmax steps reads kmax eta "
                     "(a lower bound) with extras reached = 0: reported as 'not reached within kmax steps', a "
                     "violation when the claim states that budget (args.budget_stated)", networks=NET)
def hitting_time(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    n = X.shape[-2]
    y = ctx.labels(n)
    eta = _eta0(ctx) / _M(_dims(ctx))
    eps = ctx.p("eps") if "eps" in ctx.params else 1.0 / ctx.p("ieps")
    kmax = int(ctx.arg("kmax", 20000))
    K = torch.full((ctx.replicates,), -1.0, dtype=X.dtype)
    idx = torch.arange(ctx.replicates)  # replicates still running (finished ones are dropped: cheaper, same result)
    B = ctx.i("B", n)
    for k in range(kmax + 1):
        batch = None if B >= n else net.random_minibatch(ctx.generator, len(idx), n, B)
        grads, _, fwd = net.loss_gradients(Ws, X[idx], y[idx], batch=batch)
        loss = net.logistic(y[idx] * fwd.out).mean(-1)
        done = loss <= eps
        K[idx[done]] = float(k)
        if bool(done.all()):
            break
        keep = ~done
        idx = idx[keep]
        Ws = [(W - eta * G)[keep] for W, G in zip(Ws, grads)]
    reached = K >= 0
    # Non-arrival is evidence, not a failed hypothesis: the draw stays (its hitting time exceeds kmax eta) and the
    # verdict counts it (verdicts.config_result: a violation for a stated budget, else "not reached").
    return Observation(torch.where(reached, K * eta, torch.full_like(K, kmax * eta)),
                       extras={"K": K, "reached": reached.to(K.dtype), "budget": torch.full_like(K, float(kmax))},
                       method=f"{'SGD' if ctx.i('B', n) < n else 'GD'} until L_S <= eps")


def first_order_remainder(Ws: list[torch.Tensor], Wn: list[torch.Tensor], fwd: net.Forward, fwd_n: net.Forward,
                          y: torch.Tensor) -> torch.Tensor:
    """Delta_i - sum_l y_i v^T u_{l,i} (the remainder in Lemma C.3) for a step W -> Wn, computed WITHOUT cancellation.

    By the telescoping identity of (D.2), Delta_i = y_i v^T sum_l (prod_{r>l} Sigma_r W_r^T)[(Sigma'_l - Sigma_l) W'_l^T x'_{l-1}
    + Sigma_l (W'_l - W_l)^T x'_{l-1}], and the first-order term is y_i v^T sum_l (prod_{r>l} Sigma_r W_r^T) Sigma_l
    (W'_l - W_l)^T x_{l-1} (u_{l,i} with -eta grad = W' - W), so
        remainder_i = y_i sum_l [ bt_l . ((mask'_l - mask_l) * z'_l) + (x'_{l-1} - x_{l-1})^T (W'_l - W_l) b_l ],
    bt_l = W_{l+1} b_{l+1} (bt_L = v) the backward vector before layer l's mask, b_l = mask_l * bt_l. Forming
    Delta_i - lin_i from O(1) outputs instead loses ~1e-16 absolutely, which fakes remainders at tiny steps (for L = 1
    without flips the remainder is exactly 0). Returns (R, n)."""
    bs = net.backward_vectors(Ws, fwd)
    L = len(Ws)
    v = net.output_vector(Ws[-1].shape[-1], y.dtype)
    rem = torch.zeros_like(y)
    for l in range(1, L + 1):
        bt = v.expand_as(bs[-1]) if l == L else bs[l] @ Ws[l].transpose(-1, -2)
        flip = (fwd_n.mask(l) - fwd.mask(l)) * fwd_n.z[l - 1]
        rem = rem + (bt * flip).sum(-1)
        if l >= 2:
            dx = fwd_n.x[l - 1] - fwd.x[l - 1]
            rem = rem + torch.einsum("rna,rab,rnb->rn", dx, Wn[l - 1] - Ws[l - 1], bs[l - 1])
    return y * rem


@QUANTITIES.register("trajectory-step-ratio", "one-step statistics along (S)GD trajectories (eta = eta0/M, K steps) "
                     "restricted to steps with W^(k), W^(k+1) in the tau-ball: args.statistic = feature-step | "
                     "output-step | remainder | descent (Lemmas C.2-C.4, (D.7), (C.7)); see the claim notes",
                     networks=NET)
def trajectory_step_ratio(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    n = X.shape[-2]
    y = ctx.labels(n)
    valid = _theorem_5_1_i(Ws, net.forward(Ws, X))
    eta = _eta0(ctx) / _M(_dims(ctx))
    tau, K = ctx.p("tau"), ctx.i("K")
    stat = ctx.arg("statistic", "feature-step")
    minimise = stat == "descent"
    W0 = [W.clone() for W in Ws]
    best = torch.full((ctx.replicates,), math.inf if minimise else -math.inf, dtype=X.dtype)
    inside_any = torch.zeros(ctx.replicates, dtype=torch.bool)
    within = torch.ones(ctx.replicates, dtype=torch.bool)  # W^(0) is in the ball
    for _ in range(K):
        batch = _batch(ctx, n)
        grads, lp, fwd = net.loss_gradients(Ws, X, y, batch=batch)
        Wn = [W - eta * G for W, G in zip(Ws, grads)]
        fwd_n = net.forward(Wn, X)
        within_n = _within(Wn, W0, tau)
        inside = within & within_n
        w = torch.ones_like(lp) if batch is None else batch
        S = -(lp * w).sum(-1)  # -sum over the (mini)batch of l'
        N = w.sum(-1)
        delta = y * (fwd_n.out - fwd.out)  # Delta_i^(k)
        if stat == "feature-step":
            step = torch.stack([(a - b).norm(dim=-1).amax(-1) for a, b in zip(fwd_n.x[1:], fwd.x[1:])], -1).amax(-1)
            val = step / (eta * S / N)
        elif stat == "output-step":
            d = delta.abs() if ctx.arg("abs", True) else delta
            val = d.amax(-1) / (eta * S / N)
        elif stat == "remainder":
            val = (-first_order_remainder(Ws, Wn, fwd, fwd_n, y)).amax(-1) / S
        elif stat == "descent":
            loss, loss_n = net.logistic(y * fwd.out).mean(-1), net.logistic(y * fwd_n.out).mean(-1)
            val = (loss - loss_n) / (eta * lp.sum(-1) ** 2)
        else:
            raise ValueError(f"unknown statistic '{stat}'")
        cand = torch.where(inside, val, best)
        best = torch.minimum(best, cand) if minimise else torch.maximum(best, cand)
        inside_any |= inside
        Ws, within = Wn, within_n
    return Observation(torch.where(inside_any, best, torch.zeros_like(best)), valid=valid & inside_any,
                       extras={"final_displacement": _displacement(Ws, W0)},
                       method=f"{'SGD' if ctx.i('B', n) < n else 'GD'} trajectory, {stat}, "
                              "certified spectral norms for the tau-ball")


@QUANTITIES.register("gradient-identity-error", "max over l of the relative error of (1/n) sum_i l'_i y_i v^T u_{l,i} "
                     "= -eta ||grad_{W_l} L_S||_F^2 (the exact identity in the proof of Lemma 5.6), with the gradient "
                     "from autograd and u from closed-form backward vectors", networks=NET)
def gradient_identity_error(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    n = X.shape[-2]
    y = ctx.labels(n)
    tau = ctx.p("tau", 0.0)
    if tau > 0:
        Ws = [W + D for W, D in zip(Ws, random_perturbation(ctx.generator, Ws, tau))]
    Wr = [W.clone().requires_grad_(True) for W in Ws]
    loss = net.logistic(y * net.forward(Wr, X).out).mean(-1).sum()
    grads = torch.autograd.grad(loss, Wr)
    fwd = net.forward(Ws, X)
    bs = net.backward_vectors(Ws, fwd)
    lp = net.logistic_derivative(y * fwd.out)
    eta = 1.0
    errs = []
    for x, G, b in zip(fwd.x[:-1], grads, bs):
        vu = -eta * torch.einsum("rna,rab,rnb->rn", x, G, b)  # v^T u_{l,i}
        lhs = (lp * y * vu).mean(-1)
        rhs = -eta * (G ** 2).sum((-1, -2))
        errs.append((lhs - rhs).abs() / rhs.abs().clamp_min(1e-300))
    return Observation(torch.stack(errs, -1).amax(-1), method="autograd gradient vs closed-form backward vectors")


@QUANTITIES.register("expected-sgd-descent", "min over k of (L_S(W^(k)) - E_B[L_S(W^(k+1))]) / (eta (sum_i l'_i)^2) "
                     "along an SGD trajectory, the expectation over the minibatch computed exactly by enumerating "
                     "all C(n, B) subsets ((C.18), conditional on W^(k))", networks=NET)
def expected_sgd_descent(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    R, n = ctx.replicates, X.shape[-2]
    y = ctx.labels(n)
    valid = _theorem_5_1_i(Ws, net.forward(Ws, X))
    B, K = ctx.i("B"), ctx.i("K")
    eta = _eta0(ctx) / _M(_dims(ctx))
    subsets = net.all_minibatches(n, B)
    C = subsets.shape[0]
    Xr, yr = X.repeat_interleave(C, 0), y.repeat_interleave(C, 0)
    masks = subsets.repeat(R, 1)
    best = torch.full((R,), math.inf, dtype=X.dtype)
    for _ in range(K + 1):
        Wr = [W.repeat_interleave(C, 0) for W in Ws]
        grads, lp, fwd = net.loss_gradients(Wr, Xr, yr, batch=masks)
        after = net.loss_value([W - eta * G for W, G in zip(Wr, grads)], Xr, yr).reshape(R, C).mean(-1)
        now = net.logistic(yr * fwd.out).mean(-1).reshape(R, C)[:, 0]
        S2 = lp.reshape(R, C, n)[:, 0].sum(-1) ** 2
        best = torch.minimum(best, (now - after) / (eta * S2))
        pick = net.random_minibatch(ctx.generator, R, n, B)
        g, _, _ = net.loss_gradients(Ws, X, y, batch=pick)
        Ws = [W - eta * G for W, G in zip(Ws, g)]
    return Observation(best, valid=valid, method=f"exact expectation over all {C} minibatches, {K + 1} iterates")


@QUANTITIES.register("masked-norm-preservation-tstat", "|t| statistic of the mean of ||Sigma W^T alpha||^2/||alpha||^2 "
                     "- 1 over K fresh draws of W (N(0, 2/m) entries, Sigma = 1{W^T x > 0}), max over alpha in "
                     "{random, x, perpendicular to x} (the key observation in the proof of Lemma A.8)", networks=NET)
def masked_norm_preservation_tstat(ctx: Context) -> Observation:
    R, d, m, K = ctx.replicates, ctx.i("d"), ctx.i("m"), ctx.i("K")
    x = torch.nn.functional.normalize(ctx.randn(R, d), dim=-1)
    a = ctx.randn(R, d)
    perp = a - (a * x).sum(-1, keepdim=True) * x
    # the same K draws serve the three alphas (each |t| is valid); scaled in place: no second (R, K, d, m) buffer
    W = ctx.randn(R, K, d, m).mul_(math.sqrt(2.0 / m))
    alphas = (a, x * 1.7, perp)
    # every projection of every draw in one batched product: W (the bulk of the memory) is read once, not four times
    proj_all = torch.stack((x, *alphas), 1).unsqueeze(1) @ W  # (R, K, 4, m)
    mask = (proj_all[:, :, 0] > 0).to(W.dtype)
    out = []
    for j, al in enumerate(alphas, 1):
        proj = proj_all[:, :, j]
        ratio = (mask * proj ** 2).sum(-1) / (al ** 2).sum(-1, keepdim=True)
        t = (ratio.mean(-1) - 1) / (ratio.std(-1) / math.sqrt(K))
        out.append(t.abs())
    return Observation(torch.stack(out, -1).amax(-1), method="fresh Gaussian draws, t statistic per alpha")


@QUANTITIES.register("gaussian-edge-excess", "s_max(A) - sqrt(N) - sqrt(n) for an N x n matrix with iid N(0,1) "
                     "entries (N = d, n = m; Vershynin Cor. 5.35, used for ||W_l||_2 in Theorem 5.1(i)), exact-in-law "
                     "bidiagonal sampler (args.sampler = 'full': the drawn matrix)", networks=NET)
def gaussian_edge_excess(ctx: Context) -> Observation:
    d, m = ctx.i("d"), ctx.i("m")
    if ctx.arg("sampler", "bidiagonal") == "full":
        s, meth = spectral_norm(ctx.randn(ctx.replicates, d, m))
    else:  # only s_max of the matrix matters: draw it exactly in law (linalg.gaussian_spectral_norm)
        s, meth = gaussian_spectral_norm(ctx.generator, (ctx.replicates,), d, m)
    return Observation(s.to(ctx.dtype) - math.sqrt(d) - math.sqrt(m), method=meth)


@QUANTITIES.register("training-outcome", "after K (S)GD steps at eta = eta0 / M from Gaussian init (logistic loss): "
                     "args.statistic = 'loss' (L_S(W^(K)); args.along: min over k <= K, Theorem 4.5's 'along its "
                     "iterates') or 'errors' (#{i : y_i yhat_i <= 0} at the best iterate, Corollaries 4.4/4.7)",
                     networks=NET)
def training_outcome(ctx: Context) -> Observation:
    """The conclusion of Theorems 4.1/4.5 and Corollaries 4.4/4.7 at a width and step budget of the claim's choice:
    the training loss (or the training errors) that (S)GD actually reaches on the claim's datasets and labels."""
    Ws, X = _init(ctx)
    n = X.shape[-2]
    y = ctx.labels(n, X)
    eta = _eta0(ctx) / _M(_dims(ctx))
    K = ctx.i("K")
    along = bool(ctx.arg("along", False))
    stat = ctx.arg("statistic", "loss")
    if stat not in ("loss", "errors"):
        raise ValueError(f"args.statistic = {stat!r}: one of loss, errors")
    best_loss = torch.full((ctx.replicates,), math.inf, dtype=X.dtype)
    best_err = torch.full((ctx.replicates,), float(n), dtype=X.dtype)
    for k in range(K + 1):
        batch = _batch(ctx, n) if k < K else None
        grads, _, fwd = net.loss_gradients(Ws, X, y, batch=batch)
        margin = y * fwd.out
        loss = net.logistic(margin).mean(-1)
        errors = (margin <= 0).sum(-1).to(X.dtype)
        if along or k == K:
            better = loss < best_loss
            best_loss = torch.where(better, loss, best_loss)
            best_err = torch.where(better, errors, best_err)
        if k < K:
            Ws = [W - eta * G for W, G in zip(Ws, grads)]
    value = best_loss if stat == "loss" else best_err
    where = "min over k <= K" if along else "at k = K"
    return Observation(value, extras={"loss": best_loss, "errors": best_err},
                       method=f"{'SGD' if ctx.i('B', n) < n else 'GD'}, K = {K} steps, eta = eta0/M, {where}")
