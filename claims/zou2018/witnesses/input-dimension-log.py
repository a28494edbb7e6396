"""Witness: Theorem 5.1 (vi) of Zou, Cao, Zhou & Gu (= Lemma A.9) at l = 1 grows with log d, which its bound lacks.

(vi): sup over a in S^{m_{l-1}-1} with ||a||_0 <= s of v^T (prod_{r=l}^L Sigma_{r,i} W_r^T) a <= C' L sqrt(s log M),
M = max{m_1..m_L} (Assumption 3.7; m_0 = d is not in it), C' absolute. Take L = 1, n = 2, x_1 = e_1, x_2 = e_2
(unit, ||x_1 - x_2|| = sqrt 2 >= phi = 1/2), v half +1 half -1, W_1 (d x m) with N(0, 2/m) entries. Then the sup is
the norm of the s largest |u_j|, u = W_1 Sigma_{1,i} v in R^d. For x_i = e_i, Sigma_{1,i} depends on row i of W_1
only, so u_j (j > 2) are i.i.d. N(0, 2 K_i / m) given K_i = #active units: the witness draws rows 1, 2 exactly and
the s largest of the other d - 2 |u_j| exactly by order statistics (checked against a direct draw at d = m^2 = 65536).

Regime: (5.1) at L = 1, n = 2, phi = 1/2, delta = 0.1 needs m >= 59 C_bar and s >= 3 C_bar (s = 16: C_bar <= 5.3;
beta is free). Path: width M = 256, 4096, 65536 with d tied to powers of M (d = M, M^2, M^4). Exit 0 when at every
width the implied constant Gamma / (L sqrt(s log M)) at d = M^4 exceeds the one at d = M by a factor above 1.6
(the law sqrt(2 log(d/s) / log M) gives about 2), i.e. no absolute C' serves every d.
"""
import sys

import numpy as np
from scipy.special import ndtri

rng = np.random.default_rng(20186)
S, REPS = 16, 20


def top_abs_normals(count: int, k: int) -> np.ndarray:
    """The k largest of |Z_1..Z_count|, Z i.i.d. N(0, 1), drawn exactly from uniform order statistics."""
    log_u = np.cumsum(np.log(rng.random(k)) / (float(count) - np.arange(k)))  # log of the descending uniform order stats
    tail = -np.expm1(log_u)  # 1 - U_(j), computed without cancellation
    return -ndtri(tail / 2)  # |Z| with P(|Z| > z) = tail


def gamma(m: int, d: int, direct: bool = False) -> float:
    v = np.repeat([1.0, -1.0], m // 2)
    rows = rng.standard_normal((2, m)) * np.sqrt(2.0 / m)  # rows 1 and 2 of W_1 (they fix Sigma_{1,1}, Sigma_{1,2})
    best = 0.0
    for i in range(2):
        active = rows[i] > 0
        head = rows @ (active * v)  # u_1, u_2 exactly
        scale = np.sqrt(2.0 * active.sum() / m)
        if direct:
            rest = np.abs(rng.standard_normal((d - 2, m)) @ (active * v)) * np.sqrt(2.0 / m)
        else:
            rest = scale * top_abs_normals(d - 2, S)
        u = np.sort(np.concatenate([np.abs(head), rest]))[::-1][:S]
        best = max(best, float(np.sqrt((u ** 2).sum())))
    return best


ok = True
m0 = 256
direct = np.median([gamma(m0, m0 ** 2, direct=True) for _ in range(4)])
exact = np.median([gamma(m0, m0 ** 2) for _ in range(REPS)])
print(f"check at m = {m0}, d = m^2: median Gamma {direct:.3f} (direct W_1) vs {exact:.3f} (order statistics)")
ok &= abs(direct / exact - 1) < 0.1
for m in (256, 4096, 65536):
    consts = {}
    for k in (1, 2, 4):
        g = np.median([gamma(m, m ** k) for _ in range(REPS)])
        consts[k] = g / np.sqrt(S * np.log(m))
    ratio = consts[4] / consts[1]
    ok &= ratio > 1.6
    print(f"M = {m:6d}: implied constant Gamma/(L sqrt(s log M)) = {consts[1]:.2f} (d = M), {consts[2]:.2f} (d = M^2),"
          f" {consts[4]:.2f} (d = M^4); d = M^4 over d = M: {ratio:.2f}")
print("reproduces" if ok else "does NOT reproduce")
sys.exit(0 if ok else 1)
