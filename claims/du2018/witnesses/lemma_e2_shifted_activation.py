"""Witness: Lemmas E.2 and E.3 (Du et al., Appendix E) fail for rho = softplus + c with c large.

Both lemmas hold "given a function rho whose Lipschitz and smoothness constants are bounded by L", with bounds 10L and
40L that do not involve rho(0). rho(x) = log(1 + e^x) + c has Lipschitz constant 1 and smoothness 1/4 for every c, so
L = 1. With A = a I and B = b I (2x2), u and v are independent and F(A^2) = (E rho(a Z))^2, F(A) = (E rho(sqrt(a) Z))^2:
the difference grows linearly in c. The preamble's C_rho = 10 sqrt(rho(0)^2 + sup|rho'|^2) in place of 10L (and 4 C_rho
for 40L) repairs both. Exit 0 when both lemmas fail as printed and hold with C_rho."""
import sys

import numpy as np

z, w = np.polynomial.hermite_e.hermegauss(120)
w = w / w.sum()


def mean_rho(s, c):  # E rho(s Z), rho = softplus + c
    return float(w @ np.logaddexp(0.0, s * z)) + c


def f_sq(s, c):  # F(S) for S = s^2 I: u, v independent N(0, s^2)
    return mean_rho(s, c) ** 2


L = 1.0
ok = True
for c in (0.0, 30.0, 100.0, 400.0):
    c_rho = 10 * np.sqrt((np.log(2) + c) ** 2 + 1.0)
    a, b = 0.5, 0.4  # E.2: A = a I, B = b I, ||A|| = a, ||A - B|| = a - b
    lhs = abs(f_sq(a, c) - f_sq(b, c))
    e2, e2_rep = lhs / (10 * L * a * (a - b)), lhs / (c_rho * a * (a - b))
    a3, b3 = 1.0, 0.9  # E.3: A = a I, B = b I, lambda = b, max ||.|| = a, ||A - B||_inf = a - b
    lhs3 = abs(f_sq(np.sqrt(a3), c) - f_sq(np.sqrt(b3), c))
    rhs3 = np.sqrt(a3 / b3) * (a3 - b3)
    e3, e3_rep = lhs3 / (40 * L * rhs3), lhs3 / (4 * c_rho * rhs3)
    print(f"c = {c:5.0f}: E.2 LHS / 10L-bound = {e2:.3f} (C_rho: {e2_rep:.4f}); "
          f"E.3 LHS / 40L-bound = {e3:.3f} (4 C_rho: {e3_rep:.4f})")
    ok &= e2_rep < 1 and e3_rep < 1
ok &= e2 > 1 and e3 > 1  # at c = 400
print("both printed bounds fail at c = 400 and hold with C_rho" if ok else "not reproduced")
sys.exit(0 if ok else 1)
