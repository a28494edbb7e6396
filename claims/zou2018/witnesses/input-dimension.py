"""Witness: nothing in Zou, Cao, Zhou & Gu bounds the input dimension d = m_0, and the l = 1 cases of Theorem 5.1 (i),
(v), (vi) and Lemma A.8 fail once d is large against the width (one root cause: Assumption 3.7 covers m_1..m_L only).

Part 1 (spectral). Paper setup (Section 3): W_1 is d x m_1 (m_0 = d) with columns drawn from N(0, 2/m_1 I) (Gaussian
initialization).
Assumption 3.7 bounds M = max{m_1..m_L} <= 2 m = 2 min{m_1..m_L}; nothing bounds d. Theorem 5.1 (i) states
||W_l||_2 <= 7/2 for every l under (5.1); (v) and Lemma A.8 state ||W_{l2}^T prod_{r=l1}^{l2-1} Sigma_{r,i} W_r^T||_2
<= C' L with an absolute C'. At l = 1 both contain W_1, whose norm is about sqrt(2)(1 + sqrt(d/m_1)) (Bai-Yin).

Regime path: the width grows with d/m_1 fixed. (5.1) at L = 1, n = 2, phi = 1/2, delta = 0.1 reads
m >= C_bar * max{16 log 40, 8 log 8} = 59 C_bar, so each width admits every C_bar <= m/59; s and beta are free.
Exit 0 when (i) fails at every width (every draw above 7/2 at d = 3 m_1) and, for (v), Lambda/L grows like
sqrt(d/m_1) at every width (ratio d = 16 m_1 over d = m_1 above 2).

Part 2 (log d). (vi): sup over a in S^{m_{l-1}-1} with ||a||_0 <= s of v^T (prod_{r=l}^L Sigma_{r,i} W_r^T) a
<= C' L sqrt(s log M), M = max{m_1..m_L} (Assumption 3.7; m_0 = d is not in it), C' absolute. Take L = 1, n = 2,
x_1 = e_1, x_2 = e_2 (unit, ||x_1 - x_2|| = sqrt 2 >= phi = 1/2), v half +1 half -1, W_1 (d x m) with N(0, 2/m)
entries. Then the sup is the norm of the s largest |u_j|, u = W_1 Sigma_{1,i} v in R^d. For x_i = e_i,
Sigma_{1,i} depends on row i of W_1 only, so u_j (j > 2) are i.i.d. N(0, 2 K_i / m) given K_i = #active units:
the witness draws rows 1, 2 exactly and the s largest of the other d - 2 |u_j| exactly by order statistics
(checked against a direct draw at d = m^2 = 65536).

Regime: (5.1) at L = 1, n = 2, phi = 1/2, delta = 0.1 needs m >= 59 C_bar and s >= 3 C_bar (s = 16: C_bar <= 5.3;
beta is free). Path: width M = 256, 4096, 65536 with d tied to powers of M (d = M, M^2, M^4). Exit 0 when at every
width the implied constant Gamma / (L sqrt(s log M)) at d = M^4 exceeds the one at d = M by a factor above 1.6
(the law sqrt(2 log(d/s) / log M) gives about 2), i.e. no absolute C' serves every d.

Exit 0 when both parts reproduce.
"""
import sys

import numpy as np
from scipy.special import ndtri

rng = np.random.default_rng(20181)


def gaussian_init(rows: int, cols: int) -> np.ndarray:
    return rng.standard_normal((rows, cols)) * np.sqrt(2.0 / cols)


def spectral_norm(a: np.ndarray) -> float:
    g = a @ a.T if a.shape[0] <= a.shape[1] else a.T @ a
    return float(np.sqrt(np.linalg.eigvalsh(g)[-1]))


ok = True
print("Part 1")
print("Theorem 5.1 (i): ||W_1||_2 at d = 3 m_1 (bound 7/2; Bai-Yin limit sqrt(2)(1 + sqrt(3)) = 3.864)")
for m in (64, 256, 1024):
    norms = [spectral_norm(gaussian_init(3 * m, m)) for _ in range(3 if m < 1024 else 2)]
    viol = all(v > 3.5 for v in norms)
    ok &= viol
    print(f"  m = {m:5d} (C_bar <= {m / 59:5.1f}): ||W_1||_2 = {', '.join(f'{v:.3f}' for v in norms)}"
          f"  -> {'all above 7/2' if viol else 'NOT all above 7/2'}")

print("Theorem 5.1 (v) / Lemma A.8: Lambda = ||W_2^T Sigma_1 W_1^T||_2, L = 2, l1 = 1, l2 = 2, one unit input")
for m in (64, 256, 512):
    lam = {}
    for ratio in (1, 4, 16):
        d = ratio * m
        vals = []
        for _ in range(2):
            x = rng.standard_normal(d)
            x /= np.linalg.norm(x)
            w1, w2 = gaussian_init(d, m), gaussian_init(m, m)
            active = (w1.T @ x) > 0
            prod = w2.T @ (w1.T * active[:, None])  # W_2^T Sigma_1 W_1^T, an m x d matrix
            vals.append(spectral_norm(prod))
        lam[ratio] = float(np.median(vals))
    growth = lam[16] / lam[1]
    ok &= growth > 2.0
    print(f"  m = {m:5d}: Lambda/L = {lam[1] / 2:.3f} (d = m), {lam[4] / 2:.3f} (d = 4m), {lam[16] / 2:.3f} (d = 16m);"
          f" d = 16m over d = m: {growth:.2f}")

print("Part 2")
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
