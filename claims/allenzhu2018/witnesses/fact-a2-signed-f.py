"""Witness: Fact A.2 as printed (no sign condition on f): if Pr_{X,Y}[f >= a] >= eps then
Pr_X[E_Y f >= a eps/2] >= eps/2. A finite table with negative values breaks it: X uniform on 2 points, Y uniform
on 6 points, f = 1 on one cell of each row and -10 elsewhere. Exit 0 when the printed fact fails, 1 otherwise."""
import sys

import numpy as np

f = np.full((2, 6), -10.0)
f[:, 0] = 1.0
a = 1.0
eps = float(np.mean(f >= a))                      # Pr_{X,Y}[f >= a] = 1/6, the hypothesis at equality
EYf = f.mean(axis=1)                               # E_Y f(x, Y) for each x
lhs = float(np.mean(EYf >= a * eps / 2))           # Pr_X[E_Y f >= a eps / 2]
print(f"Pr[f >= a] = {eps:.4f}; E_Y f per x = {EYf}; Pr_X[E_Y f >= a eps/2] = {lhs} vs eps/2 = {eps / 2:.4f}")
fnn = np.abs(f)                                    # the same table made nonnegative: the fact's use
eps2 = float(np.mean(fnn >= a))
lhs2 = float(np.mean(fnn.mean(axis=1) >= a * eps2 / 2))
print(f"with f >= 0 (|f|): Pr_X[...] = {lhs2} vs eps/2 = {eps2 / 2:.4f} (holds)")
ok = lhs < eps / 2 and lhs2 >= eps2 / 2
print("printed Fact A.2 fails for f of both signs" if ok else "not reproduced")
sys.exit(0 if ok else 1)
