"""Witness: the reduction in the proofs of Corollaries 4.4 and 4.7 of Zou, Cao, Zhou & Gu fails at its boundary.

The proofs state: L_S(W) = (1/n) sum_i l(y_i yhat_i) <= l(0)/n implies y_i yhat_i > 0 for all i (zero training
error), "since l(x) is strictly decreasing". Assumption 3.1 only asks l' <= 0. Two margin vectors meet the printed
hypothesis with equality and misclassify (margin 0 is not y_i yhat_i > 0), whatever the network:
(1) n = 1, any loss (here the logistic loss, strictly decreasing): margin 0 gives L_S = l(0) = l(0)/n;
(2) the smoothed hinge l(x) = 1/2 - x (x <= 0), (1 - x)^2/2 (0 < x < 1), 0 (x >= 1): continuous, non-increasing,
    tends to 0, |l'| <= 1 (A3.3, rho = 1), |l''| <= 1 (A3.4, lambda = 1), A3.2 with x_0 = 0, alpha_0 = 1,
    alpha_1 = sqrt 2, p = 1/2; l(0) = 1/2 > 0. Margins (0, 1, 1, 1), n = 4: L_S = l(0)/4.
With the strict hypothesis L_S < l(0)/n the reduction holds for every non-increasing loss (checked on random margins).
Exit 0 when both boundary cases violate and the strict version holds on every sampled margin vector.
"""
import sys

import numpy as np


def logistic(x):
    return np.log1p(np.exp(-x))


def smoothed_hinge(x):
    x = np.asarray(x, dtype=float)
    return np.where(x <= 0, 0.5 - x, np.where(x < 1, (1 - x) ** 2 / 2, 0.0))


def check_assumptions(loss, grid):
    h = grid[1] - grid[0]
    d1 = np.gradient(loss(grid), h)
    d2 = np.gradient(d1, h)
    return bool(np.all(d1 <= 1e-9) and np.all(np.abs(d1) <= 1 + 1e-6) and np.all(np.abs(d2[2:-2]) <= 1 + 1e-3))


ok = True
grid = np.linspace(-5, 5, 200_001)
assumptions = check_assumptions(smoothed_hinge, grid)
ok &= assumptions
print(f"smoothed hinge: non-increasing, 1-Lipschitz, 1-smooth on [-5, 5]: {assumptions}")
for name, loss, margins in (("logistic, n = 1", logistic, np.array([0.0])),
                            ("smoothed hinge, n = 4", smoothed_hinge, np.array([0.0, 1.0, 1.0, 1.0]))):
    n = len(margins)
    ls, bound = float(np.mean(loss(margins))), float(loss(0.0)) / n
    fails = ls <= bound and margins.min() <= 0
    ok &= fails
    print(f"{name}: L_S = {ls:.6f} <= l(0)/n = {bound:.6f}, min margin {margins.min():.1f} -> "
          f"{'reduction fails' if fails else 'reduction holds'}")
rng = np.random.default_rng(20184)
strict_ok = True
for loss in (logistic, smoothed_hinge):
    for n in (1, 2, 4, 16):
        m = rng.uniform(-3, 3, size=(200_000, n))
        m[:, 0] = np.where(rng.random(200_000) < 0.5, 0.0, m[:, 0])
        hyp = np.mean(loss(m), axis=1) < float(loss(0.0)) / n
        strict_ok &= bool(np.all(m[hyp].min(axis=1) > 0))
print(f"strict hypothesis L_S < l(0)/n gives zero training error on every sampled margin vector: {strict_ok}")
ok &= strict_ok
print("reproduces" if ok else "does NOT reproduce")
sys.exit(0 if ok else 1)
