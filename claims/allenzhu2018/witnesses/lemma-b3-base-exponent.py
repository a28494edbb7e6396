"""Witness: Lemma B.3's printed lower bound (1 - 1/(4L))^l <= ||h_{i,l+1}|| at l = 0 reads 1 <= ||h_{i,1}||, with
h_{i,1} = phi(A x_{i,1}), ||x_{i,1}|| = 1, A ~ N(0, 2/m) (Definition 2.3). The coordinates of A x are iid N(0, 2/m),
so E||h_{i,1}||^2 = 1 exactly and P[||h_{i,1}|| < 1] -> 1/2 as m grows, not exp(-Omega(m/L^2)). The proof's base case
gives 1 - 1/(4L) <= ||h_{i,1}|| (exponent l + 1), which holds. Exit 0 when the printed bound fails at rate ~1/2 at
every width along m = 1024 ... 65536 (L = 2), 1 otherwise."""
import sys

import numpy as np

rng = np.random.default_rng(0)
L, R = 2, 400
ok = True
for m in [1024, 4096, 16384, 65536]:
    fails = fails_fixed = 0
    for _ in range(R // 50):
        g = rng.standard_normal((50, m)) * np.sqrt(2.0 / m)      # A x_{i,1}, ||x_{i,1}|| = 1
        nrm = np.linalg.norm(np.maximum(g, 0), axis=1)            # ||h_{i,1}||
        fails += int(np.sum(nrm < 1.0))                           # printed: (1 - 1/4L)^0 = 1
        fails_fixed += int(np.sum(nrm < 1 - 1 / (4 * L)))         # exponent l + 1
    rate, rate_fixed = fails / R, fails_fixed / R
    print(f"m = {m:6d} (m/L^2 = {m // L**2}): P[||h_1|| < 1] ~ {rate:.3f}; P[||h_1|| < 1 - 1/(4L)] ~ {rate_fixed:.3f}")
    ok = ok and 0.35 < rate < 0.65 and rate_fixed < 0.01
print("printed base case fails at rate ~1/2 at every width" if ok else "not reproduced")
sys.exit(0 if ok else 1)
