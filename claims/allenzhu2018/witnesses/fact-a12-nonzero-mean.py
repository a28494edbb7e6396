"""Witness: Fact A.12, second sentence as printed: for x ~ N(mu, sigma^2) and t in (0, sigma],
P[|x| >= t] in [1 - 4t/(5 sigma), 1 - 2t/(3 sigma)]. At mu = 10 sigma, t = sigma the exact probability is ~1,
above the printed upper end 1/3. The lower end and the mu = 0 case hold (checked on a grid).
Exit 0 when the printed upper end fails at mu != 0 and the centred reading holds, 1 otherwise."""
import sys

import numpy as np
from scipy.stats import norm

sigma = 1.0


def p_abs(mu, t):
    return norm.sf((t - mu) / sigma) + norm.cdf((-t - mu) / sigma)


mu, t = 10.0, 1.0
P = p_abs(mu, t)
hi = 1 - 2 * t / (3 * sigma)
print(f"mu = {mu} sigma, t = {t} sigma: P[|x| >= t] = {P:.6f} vs printed upper end {hi:.4f}")
ts = np.linspace(1e-3, 1.0, 400)
centred_ok = bool(np.all((p_abs(0.0, ts) >= 1 - 4 * ts / 5) & (p_abs(0.0, ts) <= 1 - 2 * ts / 3)))
lower_ok = all(bool(np.all(p_abs(m_, ts) >= 1 - 4 * ts / 5)) for m_ in np.linspace(-10, 10, 81))
print(f"mu = 0: both ends hold on t in (0, 1]: {centred_ok}; lower end for every mu in [-10, 10]: {lower_ok}")
ok = P > hi and centred_ok and lower_ok
print("printed Fact A.12 (ii) fails for mu != 0" if ok else "not reproduced")
sys.exit(0 if ok else 1)
