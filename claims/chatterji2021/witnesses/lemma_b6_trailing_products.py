"""Witness: Lemma B.6 (1) of Chatterji, Long and Bartlett fails for L >= 2.

||V|| = sqrt(sum_j ||V_j||^2). If ||V|| > sqrt(L+1) the lemma says max_{k in [L]} prod_{j=k+1}^{L+1} ||V_j|| <=
(||V||/sqrt L)^L. Take the last m layers of equal norm eta/sqrt(m), the others 0 (the proof's AM-GM extremal):
the product is (eta/sqrt m)^m, largest at m = eta^2/e, not at m = L. Then the same failure at weights Theorem 3.1
admits (J_1 < n^{-(1+24L)}, width-1 chains at L = 20 and 100), where Lemma B.18's step (iii) invokes the bound, and
what it does to the last step of (34) in Lemma 4.5 at h = h_max. Exit 0 when every counterexample is found."""
import sys

import numpy as np

found = 0
for L in (2, 3, 5, 10, 20):
    best = (0.0, None)
    for eta in np.linspace(np.sqrt(L + 1) * 1.0001, 4 * np.sqrt(L + 1), 400):
        for m in range(1, L + 1):  # the last m of the L+1 layers (k = L + 1 - m in [1, L])
            norms = np.r_[np.zeros(L + 1 - m), np.full(m, eta / np.sqrt(m))]
            assert abs(np.linalg.norm(norms) - eta) < 1e-9 and eta > np.sqrt(L + 1)
            lhs = max(np.prod(norms[k:]) for k in range(1, L + 1))  # k = 1..L: product over j = k+1..L+1
            ratio = lhs / (eta / np.sqrt(L)) ** L
            if ratio > best[0]:
                best = (ratio, (eta, m))
    print(f"L = {L:2d}: largest LHS / (||V||/sqrt L)^L = {best[0]:.4f} at ||V|| = {best[1][0]:.3f}, last {best[1][1]} "
          "layers equal")
    found += best[0] > 1
norms = np.array([0.0, 0.0, 1.9])
print(f"L = 2, norms {norms.tolist()}: LHS = {max(np.prod(norms[k:]) for k in (1, 2)):.3f} > "
      f"(||V||/sqrt 2)^2 = {(1.9 / np.sqrt(2)) ** 2:.3f}")

# In Theorem 3.1's regime (the proof of Lemma B.18, step (iii), invokes the middle bound at V^(t)): a width-1 chain
# (p = 1 is allowed), layers 1..k equal to b and k+1..L+1 equal to a, n = 3 copies of x = 1 with y = 1, Huberized
# ReLU (1) with tiny h. Theorem 3.1 needs J_1 < n^{-(1+24L)}; Lemma B.5 then gives ||V|| > sqrt(L+1).
n, h = 3, 1e-12


def huber(z):
    return np.where(z < 0, 0.0, np.where(z <= h, z * z / (2 * h), z - h / 2))


in_regime = 0
for L, k, a, b in ((20, 2, 1.58, 0.314), (100, 28, 1.342, 0.6161)):
    V = np.r_[np.full(k, b), np.full(L + 1 - k, a)]
    x = 1.0
    for v in V[:-1]:
        x = huber(v * x)
    f = V[-1] * x
    log_J1 = -f if f > 40 else np.log(np.log1p(np.exp(-f)))  # log J_1 = log log(1 + e^-f), -f to 1e-17 past 40
    norm2 = float(np.sum(V ** 2))
    lhs = max(np.prod(V[j:]) for j in range(1, L + 1))
    mid = (np.sqrt(norm2) / np.sqrt(L)) ** L
    ok = log_J1 < -(1 + 24 * L) * np.log(n) and norm2 > L + 1 and lhs > mid
    # (34)'s last step at h = h_max: the h-term is 1/(48L) with the middle bound, ratio/(48L) with the true maximum
    x_true = (lhs / mid) / (48 * L)
    bracket = (1 + 1 / (4 * (L + 0.75))) * (1 - np.log(2 * n) / -log_J1 - x_true)
    print(f"L = {L}: log J_1 = {log_J1:.1f} < -(1+24L) log 3 = {-(1 + 24 * L) * np.log(3):.1f}, ||V||^2 = "
          f"{norm2:.2f} > L+1 = {L + 1} (< eL = {np.e * L:.1f}); max_k prod_(j>k) |V_j| = {lhs:.4g} > "
          f"(||V||/sqrt L)^L = {mid:.4g} (ratio {lhs / mid:.3f}); (34)'s last factor at h = h_max with the true "
          f"maximum: {bracket:.4f} ({'< 1: (6) does not follow' if bracket < 1 else '>= 1: absorbed by its slack'})")
    in_regime += ok
sys.exit(0 if found == 5 and in_regime == 2 else 1)
