"""Witness: Lemma B.6 (1) of Chatterji, Long and Bartlett fails for L >= 2.

||V|| = sqrt(sum_j ||V_j||^2). If ||V|| > sqrt(L+1) the lemma says max_{k in [L]} prod_{j=k+1}^{L+1} ||V_j|| <=
(||V||/sqrt L)^L. Take the last m layers of equal norm eta/sqrt(m), the others 0 (the proof's AM-GM extremal):
the product is (eta/sqrt m)^m, largest at m = eta^2/e, not at m = L. Exit 0 when a counterexample is found."""
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
sys.exit(0 if found == 5 else 1)
