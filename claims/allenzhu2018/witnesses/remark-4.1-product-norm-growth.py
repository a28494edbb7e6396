"""Witness: Remark 4.1 conjectures an O(1) bound (in place of O(L^3)) on the (4.4) product norm
max_{l1 <= l2} ||W D_{i,l2} W ... D_{i,l1} W||_2 of the Elman ReLU RNN at random initialization (Definition 2.3:
W, A ~ N(0, 2/m); h_{i,l} = phi(W h_{i,l-1} + A x_{i,l}), D_{i,l} = diag(1{g >= 0})). The longest segment's norm
(a lower estimate of the max, by power iteration, itself a lower estimate) grows with L like L^0.35-0.4, and the growth
does not shrink as the width grows. Exit 0 when the ratio of medians L = 8 over L = 1 exceeds 1.8 at m = 128 and at
m = 512 and is not smaller at the larger width (beyond a 10 % tolerance), 1 otherwise."""
import sys

import numpy as np


def seg_norm(m, L, rng, dx=5, iters=40):
    W = rng.standard_normal((m, m)) * np.sqrt(2 / m)
    A = rng.standard_normal((m, dx)) * np.sqrt(2 / m)
    xs = rng.standard_normal((L, dx))
    xs /= np.linalg.norm(xs, axis=1, keepdims=True)
    h, Ds = np.zeros(m), []
    for l in range(L):
        g = W @ h + A @ xs[l]
        D = (g >= 0).astype(float)
        Ds.append(D)
        h = D * g

    def P(v):
        v = W @ v
        for D in Ds:
            v = W @ (D * v)
        return v

    def PT(v):
        v = W.T @ v
        for D in reversed(Ds):
            v = W.T @ (D * v)
        return v

    v = rng.standard_normal(m)
    v /= np.linalg.norm(v)
    for _ in range(iters):
        v = PT(P(v))
        v /= np.linalg.norm(v)
    return float(np.linalg.norm(P(v)))


rng = np.random.default_rng(0)
ratios = []
for m in [128, 512]:
    med = {L: float(np.median([seg_norm(m, L, rng) for _ in range(10)])) for L in (1, 8)}
    ratios.append(med[8] / med[1])
    print(f"m = {m}: median norm L = 1: {med[1]:.3f}, L = 8: {med[8]:.3f}; ratio {ratios[-1]:.3f} "
          f"(L-exponent {np.log(ratios[-1]) / np.log(8):.2f})")
ok = min(ratios) > 1.8 and ratios[1] >= 0.9 * ratios[0]
print("the product norm grows with L at both widths, not shrinking with m" if ok else "not reproduced")
sys.exit(0 if ok else 1)
