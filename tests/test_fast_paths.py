"""Every estimator fast path against its slow path (args.sampler = 'full', or the textbook computation), exactly
where the fast path is a rewrite and statistically (two-sample KS, fixed seeds: deterministic) where it is a
different but exact-in-law sampler."""

import math

import pytest
import torch
from plugins import paper
from scipy import stats

import lemmacheck.builtin  # noqa: F401  (registers the estimators)
from lemmacheck import linalg as la
from lemmacheck.context import Context
from lemmacheck.registry import QUANTITIES

net = paper("zou2018").network
zq = paper("zou2018").quantities


def _ctx(params, R, seed, args=None, search="none"):
    return Context("test", dict(params), R, torch.Generator().manual_seed(seed), args=args or {},
                   inputs_spec={"kind": "unit-sphere", "n": "n", "d": "d"}, search=search)


def _est(name, params, R, seed, **kw):
    return QUANTITIES.get(name).obj(_ctx(params, R, seed, **kw))


@pytest.mark.parametrize("name,params", [
    ("max-weight-spectral-norm", {"m": 24, "L": 3, "n": 2, "d": 10}),
    ("max-weight-spectral-norm", {"m": 16, "L": 2, "n": 2, "d": 40, "alternate": 1}),
    ("gaussian-edge-excess", {"m": 30, "d": 12}),
])
def test_bidiagonal_weight_norms_have_the_law_of_drawn_weights(name, params):
    R = 1500
    fast = _est(name, params, R, 1)
    slow = _est(name, params, R, 2, args={"sampler": "full"})
    assert "bidiagonal" in fast.method and "bidiagonal" not in slow.method
    assert fast.value.shape == (R,) and fast.value.dtype == torch.float64
    assert stats.ks_2samp(fast.value.numpy(), slow.value.numpy()).pvalue > 1e-3


def test_max_layer_output_norm_conditional_has_the_law_of_the_full_forward():
    params = {"m": 64, "L": 4, "n": 3, "d": 8}
    fast = _est("max-layer-output-norm", params, 1500, 3)
    slow = _est("max-layer-output-norm", params, 1500, 4, args={"sampler": "full"})
    assert "conditioning" in fast.method and slow.method == "full forward pass"
    assert stats.ks_2samp(fast.value.numpy(), slow.value.numpy()).pvalue > 1e-3


def test_theorem_5_1_i_certificate_equals_the_exact_decision():
    """The Cholesky certificate decides ||W_l|| <= 7/2 exactly as the SVD does, also for norms straddling 7/2."""
    g = torch.Generator().manual_seed(5)
    dims = [6, 20, 20, 20]
    Ws = net.init(g, 40, dims)
    # rescale layer 2 so its norms spread across 3.5 (some within 1e-6 of it)
    s = la.spectral_norm_exact_svd(Ws[1])
    target = 3.5 * (1 + torch.linspace(-0.05, 0.05, 40, dtype=torch.float64))
    target[::7] = 3.5 * (1 + 1e-7 * torch.sign(torch.randn(len(target[::7]), generator=g, dtype=torch.float64)))
    Ws[1] = Ws[1] * (target / s).reshape(-1, 1, 1)
    X = torch.nn.functional.normalize(torch.randn(40, 3, 6, generator=g, dtype=torch.float64), dim=-1)
    fwd = net.forward(Ws, X)
    xn = torch.stack([x.norm(dim=-1).amax(-1) for x in fwd.x[1:]], -1).amax(-1)
    wn = torch.stack([la.spectral_norm_exact_svd(W) for W in Ws], -1).amax(-1)
    assert torch.equal(zq._theorem_5_1_i(Ws, fwd), (xn <= 1.5) & (wn <= 3.5))


def test_perturbed_weight_norm_is_the_norm_of_the_explicit_maximiser():
    """Slow path: form W + tau u1 v1^T from a full SVD and take its SVD norm; fast path: ||W|| + tau."""
    params = {"m": 12, "L": 3, "n": 2, "d": 5, "tau": 0.4}
    out = _est("perturbed-weight-norm", params, 6, 7)
    Ws, _ = zq._init(_ctx(params, 6, 7))
    ref = []
    for W in Ws:
        U, _, Vh = torch.linalg.svd(W, full_matrices=False)
        ref.append(la.spectral_norm_exact_svd(W + 0.4 * U[..., :, :1] @ Vh[..., :1, :]))
    ref = torch.stack(ref, -1).amax(-1)
    assert bool((out.value >= ref).all())
    torch.testing.assert_close(out.value, ref, rtol=1e-12, atol=0)


def test_forward_perturbation_search_matches_svd_projection(monkeypatch):
    """The adversarial search with the eigh-based projection finds the same value as with the SVD projection
    (same draws, same iterates up to rounding)."""
    from lemmacheck import search

    params = {"m": 16, "L": 2, "n": 3, "d": 6, "tau": 0.2}
    fast = _est("forward-perturbation", params, 4, 9, search="adversarial", args={"steps": 5})
    monkeypatch.setitem(search.BALLS, "spectral", (search._scale_to, la.clip_spectral_svd))
    slow = _est("forward-perturbation", params, 4, 9, search="adversarial", args={"steps": 5})
    torch.testing.assert_close(fast.value, slow.value, rtol=1e-9, atol=0)
    assert math.isfinite(fast.value.sum().item())


@pytest.mark.parametrize("B", [5, 3])
def test_gradient_upper_spectral_search_matches_the_formed_gradient_svd(monkeypatch, B):
    """The spectral-norm gradient ratio from the factors equals the SVD of the formed m×m gradient, along the same
    adversarial search (full batch and minibatch)."""
    params = {"m": 24, "L": 2, "n": 5, "d": 6, "tau": 0.1, "B": B}
    fast = _est("gradient-upper-ratio", params, 3, 13, search="adversarial", args={"norm": "spectral", "steps": 3})
    monkeypatch.setattr(zq, "low_rank_spectral_norm",
                        lambda A, Bm: torch.linalg.matrix_norm(A.transpose(-1, -2) @ Bm, ord=2))
    slow = _est("gradient-upper-ratio", params, 3, 13, search="adversarial", args={"norm": "spectral", "steps": 3})
    torch.testing.assert_close(fast.value, slow.value, rtol=1e-9, atol=0)


def test_worker_processes_run_one_blas_thread():
    """Parallel workers: torch's pool and numpy/scipy's BLAS get one thread each (no oversubscription)."""
    import os

    from lemmacheck.runner import make_executor

    ex = make_executor(2)
    try:
        assert ex.submit(torch.get_num_threads).result() == 1
        assert ex.submit(os.getenv, "OPENBLAS_NUM_THREADS").result() == "1"
        assert ex.submit(os.getenv, "OMP_NUM_THREADS").result() == "1"
    finally:
        ex.shutdown()


@pytest.mark.parametrize("kind", ["fc", "resnet"])
@pytest.mark.parametrize("track", [(True, True, True), (False, False, False), (False, True, False),
                                   (True, False, True)])
def test_du2018_column_gd_equals_the_general_path(kind, track):
    """du2018's one-pixel GD (features as columns; without per-step terms the backward carries −η r) follows the
    general path's trajectory and records the same quantities, whatever is tracked; untracked ones stay NaN/empty.
    Teeth: a step size off by 1e-6 moves the losses beyond the tolerance."""
    from lemmacheck import kernels
    du = paper("du2018").network

    g = torch.Generator().manual_seed(9)
    R, n, d, m, H, T = 3, 5, 7, 24, 3, 8
    X = du.as_images(torch.nn.functional.normalize(torch.randn(R, n, d, generator=g, dtype=torch.float64), dim=-1))
    y = torch.randn(R, n, generator=g, dtype=torch.float64)
    dn = du.make_net(kind, X, m=m, H=H, act=kernels.get_activation("softplus"))
    Ws, a = du.init(torch.Generator().manual_seed(10), R, dn, X.shape[2])
    eta = torch.tensor([0.05, 0.1, 0.02], dtype=torch.float64)
    terms, gram, move = track
    kw = {"track_terms": terms, "track_gram": gram, "track_movement": move}
    fast = du.gradient_descent(dn, Ws, a, X, y, eta, T, **kw)
    slow = du.gradient_descent(dn, Ws, a, X, y, eta, T, columns=False, **kw)
    for f in ("loss", "movement", "step", "grad_norm", "residual_norm", "du", "i1", "lam_min_gram_last"):
        got, ref = getattr(fast, f), getattr(slow, f)
        assert got.shape == ref.shape, f
        torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-13, equal_nan=True, msg=f)
    for w, w_ref in zip(fast.weights, slow.weights):
        torch.testing.assert_close(w, w_ref, rtol=1e-10, atol=1e-12)
    assert bool(fast.movement.isnan().all()) != move and bool(fast.grad_norm.isnan().all()) != terms
    assert (fast.i1.shape[1] == T) == terms and bool(fast.lam_min_gram_last.isnan().all()) != gram
    off = du.gradient_descent(dn, Ws, a, X, y, eta * (1 + 1e-6), T, **kw)
    assert not torch.allclose(off.loss, slow.loss, rtol=1e-10, atol=1e-13)


def test_du2018_gd_in_replicate_chunks_equals_one_batch(monkeypatch):
    """GD runs replicates in cache-sized chunks (GD_CACHE_BYTES); the chunks' trajectories, weights and the
    per-replicate λ and η line up with the one-batch run (chunk sizes 1 and 2 of 3 replicates, one uneven)."""
    from lemmacheck import kernels
    du = paper("du2018").network

    g = torch.Generator().manual_seed(4)
    R, n, d, m, H, T = 3, 4, 6, 16, 3, 6
    X = du.as_images(torch.nn.functional.normalize(torch.randn(R, n, d, generator=g, dtype=torch.float64), dim=-1))
    y = torch.randn(R, n, generator=g, dtype=torch.float64)
    dn = du.make_net("resnet", X, m=m, H=H, act=kernels.get_activation("softplus"))
    Ws, a = du.init(torch.Generator().manual_seed(5), R, dn, X.shape[2])
    eta = torch.tensor([0.05, 0.1, 0.02], dtype=torch.float64)
    whole = du.gradient_descent(dn, Ws, a, X, y, eta, T)
    per_replicate = sum(w[0].numel() * w.element_size() for w in Ws)
    for c in (1, 2):
        monkeypatch.setattr(du, "GD_CACHE_BYTES", c * per_replicate)
        part = du.gradient_descent(dn, Ws, a, X, y, eta, T)
        for f in ("loss", "movement", "step", "grad_norm", "residual_norm", "du", "i1", "lam_min_gram_last"):
            torch.testing.assert_close(getattr(part, f), getattr(whole, f), rtol=1e-12, atol=1e-15, msg=f)
        for w, w_ref in zip(part.weights, whole.weights):
            torch.testing.assert_close(w, w_ref, rtol=1e-12, atol=1e-15)
    # teeth: chunks that dropped λ's per-replicate slicing would pair replicate 2's data with replicate 0's λ
    assert not torch.allclose(dn.lam[:1].expand(R), dn.lam)


@pytest.mark.parametrize("seed, R", [(21, 3), (22, 3), (23, 1)])
def test_forward_perturbation_tracked_search_equals_the_dense_search(monkeypatch, seed, R):
    """zou2018 forward-perturbation's ascent with rank-one steps projected by linalg.BallTracker, each start scaled
    onto the sphere by the Gram eigendecomposition its tracker starts from, finds the same value (same draws, same
    iterates to rounding) as search.maximise with dense scaling and dense projections, at three seeds (one with a
    single replicate, whose iterate is the tracker's own, not a copy); the tracker
    is used with the handed-over eigendecomposition for every start (TRACK_MIN lowered to reach these sizes) and
    never declines here."""
    from lemmacheck import search

    calls = {"step": 0, "declined": 0, "eig_given": 0, "eig_own": 0}
    step, init = la.BallTracker.step, la.BallTracker.__init__

    def counted(self, a, b):
        out = step(self, a, b)
        calls["step"] += 1
        calls["declined"] += out is None
        return out

    def counted_init(self, D0, tau, eig=None):
        calls["eig_given" if eig is not None else "eig_own"] += 1
        init(self, D0, tau, eig)

    monkeypatch.setattr(la.BallTracker, "step", counted)
    monkeypatch.setattr(la.BallTracker, "__init__", counted_init)
    monkeypatch.setattr(zq, "TRACK_MIN", 24)
    params = {"m": 48, "L": 3, "n": 4, "d": 6, "tau": 0.3}
    fast = _est("forward-perturbation", params, R, seed, search="adversarial", args={"steps": 8})
    # 2 starts x 8 steps x R replicates x 2 m×m layers, less the steps whose gradient vanishes at a layer above the
    # maximising one (a zero step: projected densely, a no-op)
    assert 2 * 8 * R <= calls["step"] <= 2 * 8 * R * 2 and calls["declined"] == 0
    # one tracker per start, replicate and m×m layer it steps, each from its start's scaling (plus restarts after a
    # zero step, which diagonalise afresh)
    assert 2 * R <= calls["eig_given"] <= 2 * R * 2 and calls["eig_own"] <= calls["eig_given"]
    monkeypatch.setattr(zq, "maximise_tracked", lambda target, Ws, tau, method, gen, steps=30, lr=0.3:
                        search.maximise(target, Ws, tau, method, gen, steps=steps, lr=lr))
    slow = _est("forward-perturbation", params, R, seed, search="adversarial", args={"steps": 8})
    torch.testing.assert_close(fast.value, slow.value, rtol=1e-10, atol=0)
    assert torch.equal(fast.extras["found_by"], slow.extras["found_by"])
