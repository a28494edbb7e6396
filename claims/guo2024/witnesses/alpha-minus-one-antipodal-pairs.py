"""Witness: at alpha = -1 the leaky-ReLU network of Guo, Li & Lerman is even in x, so data with an antipodal pair
(admitted by Assumption 2.1) break Theorem 3.1, Lemma 4.2 (10), Lemma B.2 and Lemma B.7 for every width.

Setup (Section 2, Algorithm 1): h_0 = A x (A ~ N(0, 1/m)), h_l = s(W_l h_{l-1}) with W_l ~ N(0, 2/m) and the rescaled
activation s(x) = x/sqrt(1+a^2) (x >= 0), a x/sqrt(1+a^2) (x < 0); yhat = B h_L (B ~ N(0, 1/d)); loss
L(W) = sum_i ||y_i - yhat_i||^2; GD with eta = d/(n L^2 m). Assumption 2.1 only asks ||x_i|| = 1 and
min_{i != j} ||x_i - x_j|| >= delta; x and -x are 2 apart. At a = -1, s(x) = |x|/sqrt 2 is even, so
h_l(-x) = h_l(x) for l >= 1 and N(-x; W) = N(x; W) for every W. Consequences checked here (m = 64, 256, 1024; GD at m = 64, 256):
  Lemma B.2: 1 - <h_i,l/|h_i,l|, h_j,l/|h_j,l|>^2 = 0 on the pair, against the positive Omega(delta^2/L^2);
  Lemma B.7: the pair's per-sample gradients G_{i,l} coincide, so every per-layer Gram K_l is singular;
  Theorem 3.1: with labels y(-x) = -y(x), L(W) >= 2 per pair for every W, so GD never reaches L < eps (eps < 2);
  Lemma 4.2 (10): along GD the gradient vanishes (||grad||^2 / L -> 0) while L stays 2 per pair, at iterates whose
  distance to W^(0) shrinks with m (so inside the omega-ball for any hidden constant at large m).
Control: alpha = 0 on the same data fits the labels. Exit 0 when every consequence holds at every width.
"""
import sys

import numpy as np

rng = np.random.default_rng(20241)
P, D, DELTA = 5, 1, 0.2


def act(x, a):
    return np.where(x >= 0, x, a * x) / np.sqrt(1 + a * a)


def dact(x, a):
    return np.where(x >= 0, 1.0, a) / np.sqrt(1 + a * a)


def dataset(n):
    while True:
        base = rng.standard_normal((n // 2, P))
        base /= np.linalg.norm(base, axis=1, keepdims=True)
        x = np.empty((n, P))
        x[0::2], x[1::2] = base, -base
        dist = np.linalg.norm(x[:, None] - x[None], axis=-1) + 10 * np.eye(n)
        if dist.min() >= DELTA:
            y = rng.choice([-1.0, 1.0], size=(n // 2, D))
            return x, np.repeat(y, 2, axis=0) * np.tile([[1.0], [-1.0]], (n // 2, 1))


def init(m, depth):
    return (rng.standard_normal((m, P)) / np.sqrt(m), [rng.standard_normal((m, m)) * np.sqrt(2 / m) for _ in range(depth)],
            rng.standard_normal((D, m)) / np.sqrt(D))


def forward(A, Ws, B, x, a):
    hs, gs = [x @ A.T], []
    for W in Ws:
        gs.append(hs[-1] @ W.T)
        hs.append(act(gs[-1], a))
    return hs, gs, hs[-1] @ B.T


def grads(A, Ws, B, x, a, dout):
    """Per-layer gradients of sum_i <dout_i, yhat_i> and the per-sample backward vectors of every layer."""
    hs, gs, _ = forward(A, Ws, B, x, a)
    delta = (dout @ B) * dact(gs[-1], a)
    out, deltas = [None] * len(Ws), [None] * len(Ws)
    for l in range(len(Ws) - 1, -1, -1):
        deltas[l] = delta
        out[l] = delta.T @ hs[l]
        if l:
            delta = (delta @ Ws[l]) * dact(gs[l - 1], a)
    return out, deltas, hs


ok = True
for m in (64, 256, 1024):
    depth, n = 2, 6
    x, y = dataset(n)
    A, Ws, B = init(m, depth)
    hs, _, out = forward(A, Ws, B, x, -1.0)
    even = float(np.abs(out[0::2] - out[1::2]).max())
    cos = [float(1 - (h[0] @ h[1] / np.linalg.norm(h[0]) / np.linalg.norm(h[1])) ** 2) for h in hs[1:]]
    _, deltas, hs = grads(A, Ws, B, x, -1.0, np.ones((n, D)))
    lam = [float(np.linalg.eigvalsh((dl @ dl.T) * (h @ h.T))[0] / np.linalg.eigvalsh((dl @ dl.T) * (h @ h.T))[-1])
           for dl, h in zip(deltas, hs[:-1])]
    b2 = max(abs(c) for c in cos) < 1e-12
    b7 = max(abs(v) for v in lam) < 1e-12
    ok &= even < 1e-12 and b2 and b7
    print(f"m = {m:4d}: max |N(x) - N(-x)| = {even:.1e}; Lemma B.2 1 - cos^2 on the pair per layer = "
          f"{', '.join(f'{c:.1e}' for c in cos)}; Lemma B.7 lambda_min/lambda_max of K_l = {', '.join(f'{v:.1e}' for v in lam)}")

for m in (64, 256):
    depth, n, steps = 2, 2, 800
    x, y = dataset(n)
    A, Ws0, B = init(m, depth)
    eta = D / (n * depth ** 2 * m)
    final = {}
    for a in (-1.0, 0.0):
        Ws = [W.copy() for W in Ws0]
        for _ in range(steps):
            out = forward(A, Ws, B, x, a)[2]
            g = grads(A, Ws, B, x, a, 2 * (out - y))[0]
            Ws = [W - eta * gl for W, gl in zip(Ws, g)]
        out = forward(A, Ws, B, x, a)[2]
        loss = float(((out - y) ** 2).sum())
        g = grads(A, Ws, B, x, a, 2 * (out - y))[0]
        gsq = float(sum((gl ** 2).sum() for gl in g))
        dist = max(float(np.linalg.norm(W - W0, 2)) for W, W0 in zip(Ws, Ws0))
        final[a] = (loss, gsq, dist)
    (l1, g1, d1), (l0, _, _) = final[-1.0], final[0.0]
    shape = DELTA * m / (n * D)  # (10)'s bound is L * Omega(c(alpha) delta m / (n d)), c(-1) = 2
    ok &= l1 >= 2 * (n // 2) - 1e-9 and l0 < 1e-3 and g1 / l1 < 1e-3 * shape
    print(f"m = {m:4d}, {steps} GD steps: alpha = -1 loss {l1:.6f} (floor 2 per pair), ||grad||^2/L = {g1 / l1:.2e} "
          f"against delta m/(n d) = {shape:.1f}, max_l ||W_l - W_l^(0)||_2 = {d1:.4f}; alpha = 0 loss {l0:.2e}")
print("reproduces" if ok else "does NOT reproduce")
sys.exit(0 if ok else 1)
