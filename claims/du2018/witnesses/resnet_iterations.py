"""Witness: Section 1.2 of Du et al. states Theorem 4.1's iteration complexity as T ~ n^2 log(1/eps), depth-free.

Theorem 4.1: step eta = O(lambda_0 H^2 / n^2) and ||y - u(k)||^2 <= (1 - eta lambda_0 / 2)^k ||y - u(0)||^2, so
T(eps) = log(1/eps) / -log(1 - eta lambda_0 / 2). Footnote 3 substitutes lambda_0 = c_D / H^2 (c_D depth-free).
Then eta lambda_0 / 2 = c_D^2 / (2 n^2 H^2) and T = 2 n^2 H^2 log(1/eps) / c_D^2 (1 + o(1)): T / (n^2 log(1/eps))
grows as H^2. Exit 0 when the ratio grows with H (as printed it would stay bounded)."""
import sys

import numpy as np

n, eps, c_D = 100, 1e-6, 1.0
ratios = []
for H in (2, 8, 32, 128):
    lam0 = c_D / H**2
    eta = lam0 * H**2 / n**2
    T = np.log(1 / eps) / -np.log1p(-eta * lam0 / 2)
    ratios.append(T / (n**2 * np.log(1 / eps)))
    print(f"H = {H:4d}: T / (n^2 log(1/eps)) = {ratios[-1]:.4g}")
slope = np.polyfit(np.log([2, 8, 32, 128]), np.log(ratios), 1)[0]
print(f"fitted exponent in H: {slope:.3f} (depth-free would be 0)")
sys.exit(0 if slope > 1.9 else 1)
