"""Straightforward implementations kept as oracles for tests and as baselines for benchmarks.

Each one is the textbook form of something src/ does faster; tests check that both agree.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import torch
from plugins import paper

from lemmacheck.linalg import gram

az = paper("allenzhu2018").network
du = paper("du2018").network


def dense_gradient_descent(net: du.DuNet, Ws: list[torch.Tensor], a: torch.Tensor, X: torch.Tensor,
                           y: torch.Tensor, eta: float, steps: int) -> dict[str, torch.Tensor]:
    """Du et al. full-batch GD written out: dense ∂L/∂W^{(h)} each step, W ← W − η ∂L/∂W, every norm recomputed
    from the m×m tensors."""
    W0, W = Ws, [w.clone() for w in Ws]
    rec: dict[str, list[torch.Tensor]] = {k: [] for k in ("loss", "movement", "grad_norm", "step", "residual")}
    for k in range(steps + 1):
        grads, fwd, _ = du.loss_gradients(net, W, a, X, y)
        rec["loss"].append(du.loss(fwd.out, y))
        rec["residual"].append((fwd.out - y).norm(dim=-1))
        rec["movement"].append(torch.stack([(w - w0).flatten(1).norm(dim=1) for w, w0 in zip(W, W0)], -1))
        rec["grad_norm"].append(torch.stack([g.flatten(1).norm(dim=1) for g in grads], -1))
        if k == steps:
            break
        new = [w - eta * g for w, g in zip(W, grads)]
        rec["step"].append(torch.stack([(u - w).flatten(1).norm(dim=1) for u, w in zip(new, W)], -1))
        W = new
    out = {k: torch.stack(v, 1) for k, v in rec.items()}
    out["weights"] = W
    return out


# --------------------------------------------------------------------------------------------------------------
# Straightforward Monte-Carlo baselines for tests/test_benchmarks.py: one network at a time, full matrices,
# torch.linalg.matrix_norm(ord=2), autograd. Each returns one value per replicate, like the estimator it mirrors.


def loop_max_layer_output_norm(gen: torch.Generator, X: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """zou2018 max_{l,i} ||x_{l,i}|| at init: draw every W_l (N(0, 2/m_l)) and run the forward pass."""
    out = []
    for r in range(X.shape[0]):
        h, best = X[r], torch.zeros((), dtype=X.dtype)
        for a, b in itertools.pairwise(dims):
            h = torch.relu(h @ (torch.randn(a, b, generator=gen, dtype=X.dtype) * (2.0 / b) ** 0.5))
            best = torch.maximum(best, h.norm(dim=-1).max())
        out.append(best)
    return torch.stack(out)


def loop_max_weight_spectral_norm(gen: torch.Generator, R: int, dims: list[int]) -> torch.Tensor:
    """zou2018 max_l ||W_l||_2 at init: draw every W_l, LAPACK SVD norm."""
    out = []
    for _ in range(R):
        norms = [torch.linalg.matrix_norm(torch.randn(a, b, generator=gen, dtype=torch.float64) * (2.0 / b) ** 0.5,
                                          ord=2) for a, b in itertools.pairwise(dims)]
        out.append(torch.stack(norms).max())
    return torch.stack(out)


def _zou_forward(Ws: list[torch.Tensor], x: torch.Tensor) -> list[torch.Tensor]:
    hs = [x]
    for W in Ws:
        hs.append(torch.relu(hs[-1] @ W))
    return hs[1:]


def loop_forward_perturbation(gen: torch.Generator, Ws: list[torch.Tensor], X: torch.Tensor, tau: float,
                              steps: int, lr: float = 0.3) -> torch.Tensor:
    """zou2018 sup_{||D_l||_2 <= tau} max_{l,i} ||x~_{l,i} - x_{l,i}||, the adversarial search of search.maximise
    written for one network at a time: a random start and a gradient-aligned start, each followed by `steps`
    projected gradient-ascent steps (autograd; projection by clipping the SVD's singular values)."""
    return torch.stack([_pga_one(gen, [w[r] for w in Ws], X[r], tau, steps, lr) for r in range(X.shape[0])])


def _pga_one(gen: torch.Generator, W: list[torch.Tensor], x: torch.Tensor, tau: float, steps: int,
             lr: float) -> torch.Tensor:
    base = [h.detach() for h in _zou_forward(W, x)]

    def target(D: list[torch.Tensor]) -> torch.Tensor:
        hs = _zou_forward([w + d for w, d in zip(W, D)], x)
        return torch.stack([(h - b).norm(dim=-1).max() for h, b in zip(hs, base)]).max()

    def grad(D: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        D = [d.detach().requires_grad_(True) for d in D]
        val = target(D)
        return val.detach(), list(torch.autograd.grad(val, D))

    def onto_sphere(G: torch.Tensor) -> torch.Tensor:
        return G * (tau / torch.linalg.matrix_norm(G, ord=2))

    def project(D: torch.Tensor) -> torch.Tensor:
        U, S, Vh = torch.linalg.svd(D, full_matrices=False)
        return (U * S.clamp_max(tau)) @ Vh

    starts = [[onto_sphere(torch.randn(w.shape, generator=gen, dtype=w.dtype)) for w in W]]
    with torch.no_grad():
        best = target(starts[0])
    _, g = grad([torch.zeros_like(w) for w in W])
    starts.append([onto_sphere(gi + 1e-30 * torch.randn(gi.shape, generator=gen, dtype=gi.dtype)) for gi in g])
    with torch.no_grad():
        best = torch.maximum(best, target(starts[1]))
    for D in starts:
        for _ in range(steps):
            val, g = grad(D)
            best = torch.maximum(best, val)
            D = [project(d + lr * tau * gi / gi.norm()) for d, gi in zip(D, g)]
        with torch.no_grad():
            best = torch.maximum(best, target(D))
    return best


def _replicate(net: du.DuNet, r: int) -> du.DuNet:
    """The architecture of replicate r alone (ResNet/CNN residual scales depend on each replicate's data)."""
    lam = net.lam
    return dataclasses.replace(net, lam=lam[r:r + 1]) if isinstance(lam, torch.Tensor) and lam.dim() else net


def loop_du_last_layer_gram_lambda_min(gen: torch.Generator, net: du.DuNet, X: torch.Tensor) -> torch.Tensor:
    """du2018 lambda_min(G^(H)(0)) at init: draw the weights, per-sample gradients of u_i w.r.t. W^(H) by autograd,
    G^(H)_ij = <du_i/dW^(H), du_j/dW^(H)>, eigvalsh."""
    out = []
    for r in range(X.shape[0]):
        one = _replicate(net, r)
        Ws, a = du.init(gen, 1, one, X.shape[2], X.dtype)
        WH = Ws[-1].clone().requires_grad_(True)
        u = du.forward(one, Ws[:-1] + [WH], a, X[r:r + 1]).out[0]
        J = torch.stack([torch.autograd.grad(u[i], WH, retain_graph=True)[0].flatten() for i in range(len(u))])
        out.append(torch.linalg.eigvalsh(J @ J.T)[0])
    return torch.stack(out)


def loop_rnn_max_hidden_norm_ratio(gen: torch.Generator, X: torch.Tensor, m: int) -> torch.Tensor:
    """allenzhu2018 max_{i,l} ||h_{i,l+1}|| / (2l + 4) at init (Lemma B.3, h-upper): draw W, A (N(0, 2/m)),
    h_{l+1} = relu(W h_l + A x_{l+1}) for each sequence."""
    out = []
    R, n, L, dx = X.shape
    for r in range(R):
        W = torch.randn(m, m, generator=gen, dtype=X.dtype) * (2.0 / m) ** 0.5
        A = torch.randn(m, dx, generator=gen, dtype=X.dtype) * (2.0 / m) ** 0.5
        best = torch.zeros((), dtype=X.dtype)
        for i in range(n):
            h = torch.zeros(m, dtype=X.dtype)
            for ell in range(L):
                h = torch.relu(W @ h + A @ X[r, i, ell])
                best = torch.maximum(best, h.norm() / (2 * ell + 4))
        out.append(best)
    return torch.stack(out)


def autograd_gradient_descent(net: du.DuNet, Ws: list[torch.Tensor], a: torch.Tensor, X: torch.Tensor,
                              y: torch.Tensor, eta: float, steps: int) -> torch.Tensor:
    """du2018 full-batch GD, one network at a time, gradients by autograd on L = ½ Σ (u_i - y_i)²; returns the
    losses (R, steps + 1)."""
    out = []
    for r in range(X.shape[0]):
        one = _replicate(net, r)
        W = [w[r:r + 1].clone() for w in Ws]
        losses = []
        for k in range(steps + 1):
            Wg = [w.requires_grad_(True) for w in W]
            L = du.loss(du.forward(one, Wg, a[r:r + 1], X[r:r + 1]).out, y[r:r + 1]).sum()
            losses.append(L.detach())
            if k == steps:
                break
            grads = torch.autograd.grad(L, Wg)
            W = [(w - eta * g).detach() for w, g in zip(Wg, grads)]
        out.append(torch.stack(losses))
    return torch.stack(out)


def autograd_gd_second_order(net: du.DuNet, Ws: list[torch.Tensor], a: torch.Tensor, X: torch.Tensor,
                             y: torch.Tensor, eta: float, steps: int) -> torch.Tensor:
    """du2018 Lemmas A.6/B.6's eq. (7) terms along full-batch GD, one network at a time by autograd: per step the
    per-sample gradients ∂u_i/∂w (one backward pass each), G(k) = J Jᵀ, I_1(k) = −η G(k)(u(k) − y), the step
    w ← w − η Jᵀ(u − y), and ‖I_2(k)‖ = ‖u(k+1) − u(k) − I_1(k)‖. Returns ‖I_2(k)‖, (R, steps)."""
    out = []
    for r in range(X.shape[0]):
        one = _replicate(net, r)
        W = [w[r:r + 1].clone() for w in Ws]
        norms, prev = [], None
        for k in range(steps + 1):
            Wg = [w.requires_grad_(True) for w in W]
            u = du.forward(one, Wg, a[r:r + 1], X[r:r + 1]).out[0]
            if prev is not None:
                norms.append((u.detach() - prev[0] - prev[1]).norm())
            if k == steps:
                break
            J = torch.stack([torch.cat([g.flatten() for g in torch.autograd.grad(u[i], Wg, retain_graph=True)])
                             for i in range(len(u))])
            res = u.detach() - y[r]
            i1 = -eta * (J @ J.T) @ res
            step = J.T @ res
            sizes = [w.numel() for w in W]
            W = [(w - eta * g.reshape(w.shape)).detach() for w, g in zip(Wg, step.split(sizes))]
            prev = (u.detach(), i1)
        out.append(torch.stack(norms))
    return torch.stack(out)


def lazy_forward_sequential(gen: torch.Generator, X: torch.Tensor, m: int, d: int = 1) -> az.Forward:
    """allenzhu2018 lazy_forward one vector at a time against all of Q (the slow path it is tested against): the same draws."""
    R, n, L, dx = X.shape
    dtype = X.dtype
    s = math.sqrt(2.0 / m)
    A = torch.randn(R, m, dx, generator=gen, dtype=dtype) * s
    AX = X @ A.transpose(-1, -2).unsqueeze(1)
    K = n * max(L - 1, 0)
    Q = torch.zeros(R, K, m, dtype=dtype)
    WQ = torch.zeros(R, K, m, dtype=dtype)
    k = 0
    h = torch.zeros(R, n, m, dtype=dtype)
    hs, gs = [h], [torch.zeros_like(h)]
    for l in range(L):
        Wh = torch.zeros(R, n, m, dtype=dtype)
        if l > 0:
            for i in range(n):
                v = h[:, i]
                Qk, WQk = Q[:, :k], WQ[:, :k]
                c = (Qk @ v.unsqueeze(-1)).squeeze(-1)
                r = v - (c.unsqueeze(-2) @ Qk).squeeze(-2)
                c2 = (Qk @ r.unsqueeze(-1)).squeeze(-1)
                r = r - (c2.unsqueeze(-2) @ Qk).squeeze(-2)
                c = c + c2
                rho = r.norm(dim=-1, keepdim=True)
                keep = rho > 1e-12 * v.norm(dim=-1, keepdim=True)
                rho = torch.where(keep, rho, torch.zeros_like(rho))
                w = torch.randn(R, m, generator=gen, dtype=dtype) * s
                Wh[:, i] = (c.unsqueeze(-2) @ WQk).squeeze(-2) + rho * w
                Q[:, k] = torch.where(keep, r / rho.clamp_min(1e-300), torch.zeros_like(r))
                WQ[:, k] = w * keep
                k += 1
        g = Wh + AX[:, :, l]
        h = torch.relu(g)
        gs.append(g)
        hs.append(h)
    B = torch.randn(R, d, m, generator=gen, dtype=dtype) * math.sqrt(1.0 / d)
    H = torch.stack(hs, dim=2)
    return az.Forward(H, torch.stack(gs, dim=2), H @ B.transpose(-1, -2).unsqueeze(1))


def clip_spectral_mirrored(D: torch.Tensor, tau: float) -> torch.Tensor:
    """`linalg.clip_spectral`'s previous host path: each Gram from `gram` (syrk's triangle mirrored into a batched
    tensor), then syevr on it; the fast path hands syevr syrk's triangle as it is and must equal this bit for bit."""
    import numpy as np
    import scipy.linalg

    wide = D.shape[-1] > D.shape[-2]
    A = D.transpose(-1, -2) if wide else D
    A64 = A.to(torch.float64)
    G = gram(A)
    outs = []
    for Gi, Ai in zip(G.reshape(-1, *G.shape[-2:]), A64.reshape(-1, *A64.shape[-2:])):
        evals, V = scipy.linalg.eigh(Gi.numpy(), subset_by_value=(tau * tau, np.inf), driver="evr", check_finite=False)
        if evals.size == 0:
            outs.append(Ai.clone())
            continue
        s = np.sqrt(np.clip(evals, 0, None))
        f = torch.from_numpy(np.where(s > tau, tau / np.maximum(s, 1e-300), 1.0) - 1)
        V = torch.from_numpy(V)
        outs.append(Ai + (Ai @ (V * f)) @ V.T)
    out = torch.stack(outs).reshape(A64.shape).to(D.dtype)
    return out.transpose(-1, -2) if wide else out


def clip_spectral_eigh(D: torch.Tensor, tau: float) -> torch.Tensor:
    """`linalg.clip_spectral` from all eigenpairs of the Gram (its previous fast path; the oracle it is tested against)."""
    wide = D.shape[-1] > D.shape[-2]
    A = D.transpose(-1, -2) if wide else D
    evals, V = torch.linalg.eigh(gram(A))
    s = evals.clamp_min(0).sqrt()
    f = torch.where(s > tau, tau / s.clamp_min(1e-300), torch.ones_like(s)) - 1
    A64 = A.to(torch.float64)
    out = (A64 + (A64 @ (V * f.unsqueeze(-2))) @ V.transpose(-1, -2)).to(D.dtype)
    return out.transpose(-1, -2) if wide else out
