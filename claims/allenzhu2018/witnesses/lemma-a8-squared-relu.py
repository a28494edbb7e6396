"""Witness: Lemma A.8 with its printed phi(a) = max(a, 0)^2: for n iid N(0, sigma^2),
Pr[||phi(x)|| in ((1-eps) sqrt(n/2) sigma, (1+eps) sqrt(n/2) sigma)] >= 1 - 2 exp(-eps^2 n / 100).
E||phi(x)||^2 = n E[max(x,0)^4] = 3 n sigma^4 / 2, so ||phi(x)|| sits near sqrt(3) sqrt(n/2) (sigma = 1), outside the
window for eps < 0.73. With the ReLU phi(a) = max(a, 0) the event holds. Exit 0 when the printed form fails, 1 otherwise."""
import sys

import numpy as np

rng = np.random.default_rng(0)
n, eps, R = 1480, 0.5, 300
x = rng.standard_normal((R, n))
r = np.maximum(x, 0)
sq = np.linalg.norm(r**2, axis=1) / np.sqrt(n / 2)     # printed phi
relu = np.linalg.norm(r, axis=1) / np.sqrt(n / 2)      # ReLU reading
fail_sq = float(np.mean(np.abs(sq - 1) >= eps))
fail_relu = float(np.mean(np.abs(relu - 1) >= eps))
bound = 2 * np.exp(-eps**2 * n / 100)
print(f"n={n}, eps={eps}: printed phi: median ||phi(x)||/sqrt(n/2) = {np.median(sq):.3f} (sqrt 3 = 1.732), "
      f"failure rate {fail_sq:.3f} vs allowed {bound:.3f}; ReLU: failure rate {fail_relu:.3f}")
ok = fail_sq > bound and fail_relu <= bound
print("printed Lemma A.8 fails; the ReLU reading holds" if ok else "not reproduced")
sys.exit(0 if ok else 1)
