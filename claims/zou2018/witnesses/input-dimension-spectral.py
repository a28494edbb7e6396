"""Witness: Theorem 5.1 (i), (v) and Lemma A.8 of Zou, Cao, Zhou & Gu fail when the input dimension d exceeds m_1.

Paper setup (Section 3): W_1 is d x m_1 (m_0 = d) with columns drawn from N(0, 2/m_1 I) (Gaussian initialization).
Assumption 3.7 bounds M = max{m_1..m_L} <= 2 m = 2 min{m_1..m_L}; nothing bounds d. Theorem 5.1 (i) states
||W_l||_2 <= 7/2 for every l under (5.1); (v) and Lemma A.8 state ||W_{l2}^T prod_{r=l1}^{l2-1} Sigma_{r,i} W_r^T||_2
<= C' L with an absolute C'. At l = 1 both contain W_1, whose norm is about sqrt(2)(1 + sqrt(d/m_1)) (Bai-Yin).

Regime path: the width grows with d/m_1 fixed. (5.1) at L = 1, n = 2, phi = 1/2, delta = 0.1 reads
m >= C_bar * max{16 log 40, 8 log 8} = 59 C_bar, so each width admits every C_bar <= m/59; s and beta are free.
Exit 0 when (i) fails at every width (every draw above 7/2 at d = 3 m_1) and, for (v), Lambda/L grows like
sqrt(d/m_1) at every width (ratio d = 16 m_1 over d = m_1 above 2).
"""
import sys

import numpy as np

rng = np.random.default_rng(20181)


def gaussian_init(rows: int, cols: int) -> np.ndarray:
    return rng.standard_normal((rows, cols)) * np.sqrt(2.0 / cols)


def spectral_norm(a: np.ndarray) -> float:
    g = a @ a.T if a.shape[0] <= a.shape[1] else a.T @ a
    return float(np.sqrt(np.linalg.eigvalsh(g)[-1]))


ok = True
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

print("reproduces" if ok else "does NOT reproduce")
sys.exit(0 if ok else 1)
