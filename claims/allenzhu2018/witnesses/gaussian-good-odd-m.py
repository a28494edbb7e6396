"""Witness: Lemma A.13 / Corollaries A.15, A.16 of Allen-Zhu, Li & Song (arXiv 1810.12065 v4) fail at odd m, alpha m < 1.

Lemma A.13: for x ~ N(0, sigma^2 I_m) and any alpha in (0, 1/2), with probability at least 1 - exp(-alpha^2 m/100) at
least a (1 - alpha)/2 fraction of coordinates have x_i >= 5 alpha sigma/16 and at least a (1 - alpha)/2 fraction have
x_i <= -5 alpha sigma/16 (Corollary A.15: the same with alpha sigma/4, i.e. x is (alpha, sigma/4)-good; Corollary
A.16: A x for Gaussian A has that law). At odd m with alpha m < 1 a count of at least (1 - alpha) m / 2 means at least
(m + 1)/2 on each side, m + 1 coordinates in all: the event is empty. The exact multinomial failure probability is
computed below and compared with the allowed exp(-alpha^2 m / 100). Exit 0 when every odd case fails.
"""
import math
import sys

from scipy import stats


def failure(m, p, q):
    """P[not (N+ >= q and N- >= q)] for (N+, N-, rest) ~ Multinomial(m; p, p, 1 - 2p)."""
    ok = 0.0
    for a in range(q, m + 1):  # N+ = a, then N- ~ Bin(m - a, p / (1 - p))
        ok += stats.binom.pmf(a, m, p) * stats.binom.sf(q - 1, m - a, p / (1 - p))
    return 1.0 - ok


bad = 0
for m in (1, 3, 11, 101, 501):
    for frac in (0.05, 0.5, 0.9):  # alpha m < 1
        alpha = frac / m
        q = math.ceil((1 - alpha) * m / 2)
        for name, c in (("A.13", 5 / 16), ("A.15/A.16", 1 / 4)):
            fail = failure(m, stats.norm.sf(c * alpha), q)
            allowed = math.exp(-alpha ** 2 * m / 100)
            bad += fail > allowed
            print(f"{name:9s} m = {m:4d} alpha = {alpha:.3e}: need {q} per side, P[fail] = {fail:.6f} > allowed {allowed:.8f}")
# control: even m and odd m with alpha m >= 1 hold
for m, alpha in ((2, 0.05), (10, 0.2), (11, 0.2), (501, 0.01)):
    q = math.ceil((1 - alpha) * m / 2)
    fail = failure(m, stats.norm.sf(5 / 16 * alpha), q)
    print(f"control A.13 m = {m:4d} alpha = {alpha}: P[fail] = {fail:.4f} vs allowed {math.exp(-alpha ** 2 * m / 100):.4f}")
print(f"{bad} of 30 odd-m cases violate the printed probability")
sys.exit(0 if bad == 30 else 1)
