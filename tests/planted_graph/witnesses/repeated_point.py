"""Witness (planted): the Gram matrix X^T X / m of data with a repeated column is singular at every width, so
Lemma C's lambda_min >= 0.01 fails and Theorem A's condition number <= 10^6 with it."""
import sys

import numpy as np

rng = np.random.default_rng(0)
worst = 0.0
for m in (4, 64, 1024):
    X = rng.standard_normal((m, 3))
    X[:, 2] = X[:, 0]
    lam = np.linalg.eigvalsh(X.T @ X / m)[0]
    print(f"m = {m}: lambda_min = {lam:.2e} (claimed >= 0.01)")
    worst = max(worst, lam)
sys.exit(0 if worst < 0.01 else 1)
