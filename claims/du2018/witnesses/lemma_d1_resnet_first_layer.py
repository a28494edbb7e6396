"""Witness: for Du et al.'s ResNet (eq. 3) the first layer is plain, x^(1) = sqrt(c_sigma/m) sigma(W^(1) x), so
Lemma D.1 (which assumes an identity a^(h)) does not give lambda >= lambda(K^(0)) at h = 1: the infinite-width
kernel of the first layer, K^(1)_ij = c_sigma E[sigma(u) sigma(v)], (u, v) ~ N(0, [[1, rho], [rho, 1]]), has a
smaller 2-block least eigenvalue than K^(0) = [[1, rho], [rho, 1]] (softplus, c_sigma = 1 / E sigma(g)^2), because
softplus has a positive mean. Assumption 4.1 defines lambda from K^(0) alone. Exit 0 when the ratio is < 1."""
import sys

import numpy as np

x, w = np.polynomial.hermite_e.hermegauss(80)
w = w / w.sum()
sp = np.logaddexp(0.0, x)
c_sigma = 1.0 / float(w @ sp**2)
best = np.inf  # a two-point dataset {x_1, x_2} with <x_1, x_2> = rho: lambda is its one pair's
for rho in (-0.9, -0.5, 0.0, 0.3, 0.6, 0.9):
    # v = rho u + sqrt(1 - rho^2) g
    U, G = np.meshgrid(x, x, indexing="ij")
    V = rho * U + np.sqrt(1 - rho**2) * G
    k1 = c_sigma * float(np.einsum("i,j,ij->", w, w, np.logaddexp(0.0, U) * np.logaddexp(0.0, V)))
    lam0 = 1 - abs(rho)
    lam1 = 1 - abs(k1)  # diagonal of K^(1) is c_sigma E sigma(g)^2 = 1
    best = min(best, lam1 / lam0)
    print(f"rho = {rho:+.1f}: lambda(K^(0)) = {lam0:.3f}, lambda(K^(1)) = {lam1:.3f}, ratio {lam1 / lam0:.3f}")
print(f"smallest ratio over these two-point datasets: {best:.3f} (the conclusion would need >= 1 for each)")
sys.exit(0 if best < 1 else 1)
