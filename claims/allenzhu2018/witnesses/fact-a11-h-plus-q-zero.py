"""Witness: Fact A.11 of Allen-Zhu, Li & Song (arXiv 1810.12065 v4) at h + q = 0, and Claim B.13 at x = y = 0.

Fact A.11: for fixed h, q in R^p with h != 0, W in R^{m x p} with iid N(0, 2/m) entries and v_i = 1{<W_i, h + q> >= 0}
<W_i, h>, (i) |v_i| is 0 with probability 1/2 and |N(0, 2||h||^2/m)| otherwise, (ii) m ||v||^2 / (2 ||h||^2) is
chi^2_omega with omega ~ Bin(m, 1/2). At q = -h every indicator is 1{0 >= 0} = 1, so v = W h: |v_i| is never 0 and the
norm law is chi^2_m.
Claim B.13: for fixed x, y, z and M, A with iid N(0, 2/m) entries, with probability at least 1 - exp(-Omega(m/L^2)),
||1{My + Ax >= 0} . Mz|| <= ||z|| (1 + 1/(2L)). At x = y = 0 the mask is all ones and ||Mz||/||z|| concentrates at
sqrt(2) > 1 + 1/(2L) for L >= 2: the failure probability P[chi^2_m > m (1 + 1/(2L))^2 / 2] tends to 1 as m grows.
Exit 0 when both reproduce.
"""
import sys

import numpy as np
from scipy import stats

rng = np.random.default_rng(0)
ok = True
# Fact A.11 at q = -h: p = 3, h = (1, 2, -1), q = -h
p, m, R = 3, 500, 400
h = np.array([1.0, 2.0, -1.0])
q = -h
stat_printed = []
zeros = 0
for _ in range(R):
    W = rng.normal(0.0, np.sqrt(2 / m), size=(m, p))
    v = (W @ (h + q) >= 0) * (W @ h)
    stat_printed.append(m * (v @ v) / (2 * (h @ h)))
    zeros += int((v == 0).sum())
stat_printed = np.array(stat_printed)
# the printed law: chi^2_omega, omega ~ Bin(m, 1/2); sample it and compare by two-sample KS
omega = rng.binomial(m, 0.5, size=20000)
ref = rng.chisquare(np.maximum(omega, 1))
ks = stats.ks_2samp(stat_printed, ref)
zero_frac = zeros / (R * m)  # the printed part (i): 1/2
print(f"Fact A.11 (ii), q = -h, m = {m}: mean of m||v||^2/(2||h||^2) = {stat_printed.mean():.1f} "
      f"(printed law mean m/2 = {m / 2:.0f}, chi^2_m mean {m}); KS p = {ks.pvalue:.2e}")
print(f"Fact A.11 (i): fraction of v_i equal to 0 = {zero_frac:.2f} against the printed 1/2")
ok &= ks.pvalue < 1e-6 and zero_frac < 0.25
# Claim B.13 at x = y = 0: exact failure probabilities, and a simulation at m = 10000
for L in (2, 3, 10):
    bound = 1 + 1 / (2 * L)
    rates = [stats.chi2.sf(mm * bound ** 2 / 2, mm) for mm in (1000, 10000, 100000)]
    print(f"Claim B.13, x = y = 0, L = {L}: exact P[fail] at m = 1e3, 1e4, 1e5: "
          + ", ".join(f"{r:.6f}" for r in rates) + " (the statement asks exp(-Omega(m/L^2)) -> 0)")
    ok &= all(r > 0.99 for r in rates)
m, k = 10000, 3
z = rng.normal(size=k)
M = rng.normal(0.0, np.sqrt(2 / m), size=(50, m, k))
A = rng.normal(0.0, np.sqrt(2 / m), size=(50, m, 3))
x, y = np.zeros(3), np.zeros(k)
mask = (M @ y + A @ x >= 0)
ratio = np.linalg.norm(mask * (M @ z), axis=-1) / np.linalg.norm(z)
print(f"simulated at m = {m}: ||1{{My+Ax>=0}} Mz||/||z|| median {np.median(ratio):.4f}, "
      f"{(ratio > 1.25).sum()}/50 above 1 + 1/(2L) = 1.25 (L = 2)")
ok &= bool((ratio > 1.25).all())
sys.exit(0 if ok else 1)
