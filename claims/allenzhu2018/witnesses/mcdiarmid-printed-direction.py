"""Witness: Lemma A.18 (McDiarmid) as printed asks P[f - Ef >= t] >= exp(-2t^2/sum c_i^2) and
P[f - Ef <= -t] >= exp(+2t^2/sum c_i^2). Take f = mean of N iid Bernoulli(p) (bounded differences c_i = 1/N,
sum c_i^2 = 1/N), whose law is binomial, and compute both tails exactly.
Exit 0 when both printed inequalities fail (the finding reproduces), 1 otherwise."""
import sys

import numpy as np
from scipy.stats import binom

N, p, t = 20, 0.5, 0.6           # t > 1 - p: f - Ef >= t is impossible
s = 1.0 / N                      # sum_i c_i^2
upper = binom.sf(np.ceil(N * (p + t)) - 1, N, p)      # P[f - Ef >= t] = P[K >= N(p + t)]
rhs_upper = np.exp(-2 * t**2 / s)
t2 = 0.1
lower = binom.cdf(np.floor(N * (p - t2)), N, p)        # P[f - Ef <= -t2]
rhs_lower = np.exp(2 * t2**2 / s)
print(f"N={N}, p={p}: P[f-Ef >= {t}] = {upper:.3g} vs printed lower bound exp(-2t^2 N) = {rhs_upper:.3g}")
print(f"P[f-Ef <= -{t2}] = {lower:.4f} vs printed lower bound exp(+2t^2 N) = {rhs_lower:.4f} (> 1)")
ok = upper < rhs_upper and lower < rhs_lower
print("printed Lemma A.18 fails in both directions" if ok else "not reproduced")
sys.exit(0 if ok else 1)
