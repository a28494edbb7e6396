"""Witness: the second inequality in the proof of Lemma A.1 (Du et al.) fails for 1 < alpha <= 2.

The proof bounds L|alpha - 1|(2|sigma(0)| sqrt(2/pi) + L|alpha + 1|) by (C/c_sigma)|alpha - 1| with
C = c_sigma L (2|sigma(0)| sqrt(2/pi) + 2L), which needs |alpha + 1| <= 2. Softplus: L = 1, sigma(0) = log 2.
Also checks, by quadrature, the chain's conclusion |E sigma(alpha X)^2 - E sigma(X)^2| <= (C/c_sigma)|alpha - 1|: it
holds for softplus, and fails for sigma(x) = x (1-Lipschitz, sigma(0) = 0, so C/c_sigma = 2), whose LHS is |alpha^2 - 1|:
the ratio is (alpha + 1)/2. Exit 0 when the step fails as printed and the conclusion fails for the linear sigma."""
import sys

import numpy as np

L, s0 = 1.0, np.log(2.0)
c_over = L * (2 * s0 * np.sqrt(2 / np.pi) + 2 * L)  # C / c_sigma
x, w = np.polynomial.hermite_e.hermegauss(200)
w = w / w.sum()
softplus = np.logaddexp(0.0, x)


def second_moment(a):
    return float(w @ np.logaddexp(0.0, a * x) ** 2)


worst = 0.0
for a in np.linspace(0.5, 2.0, 61):
    if a == 1.0:
        continue
    middle = L * abs(a - 1) * (2 * s0 * np.sqrt(2 / np.pi) + L * abs(a + 1))
    ratio = middle / (c_over * abs(a - 1))
    lhs = abs(second_moment(a) - float(w @ softplus**2)) / (c_over * abs(a - 1))
    worst = max(worst, ratio)
    if a in (0.5, 2.0):
        print(f"alpha = {a}: middle / ((C/c_sigma)|alpha-1|) = {ratio:.4f}; chain LHS / bound = {lhs:.3f}")
print(f"largest ratio over alpha in [1/2, 2]: {worst:.4f} (the step claims <= 1)")
# sigma(x) = x: E (alpha X)^2 - E X^2 = alpha^2 - 1, by the same quadrature (exact for polynomials of degree < 400)
linear = max(abs(float(w @ (a * x) ** 2) - float(w @ x**2)) / (2 * abs(a - 1))
             for a in np.linspace(0.5, 2.0, 61) if a != 1.0)
print(f"sigma(x) = x: largest chain LHS / ((C/c_sigma)|alpha-1|) = {linear:.4f} (the conclusion claims <= 1)")
sys.exit(0 if worst > 1.3 and linear > 1.49 else 1)
