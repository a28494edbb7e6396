"""Witness: Lemma D.7 as printed: for fixed losses and N4 (independent of B) with |N4| in [rho^4, varrho^100],
whp |N5| >= (1 - 1/(2nL)) |N4|, N5 = {k in N4 : |u_k| >= ||loss_{i*,l*}|| / (6 sqrt(dnL))},
u = sum_{a >= l*} Back_{i*,l*->a}^T loss_{i*,a}. With one nonzero loss, at (i*, l*) = (1, L), u = B^T loss_{1,L}
(Back_{L->L} = B), whose coordinates are iid N(0, ||loss||^2/d) (B ~ N(0, 1/d), Definition 2.3), independent of N4.
So |N5| ~ Bin(|N4|, p), p = P[|Z| >= 1/(6 sqrt(nL))] ~ 1 - 0.133/sqrt(nL), below 1 - 1/(2nL) for nL >= 15: the event
fails with probability -> 1 as |N4| grows. Computed exactly (binomial) at |N4| = rho^4, and by simulation at m = 4096.
The proof's own last line has the threshold ||loss|| / (6 nL sqrt(d)); there the fraction holds.
Exit 0 when the printed fraction fails, 1 otherwise."""
import sys

import numpy as np
from scipy.stats import binom, norm

n, L, d = 4, 16, 1
need = 1 - 1 / (2 * n * L)
p_printed = 2 * norm.sf(1 / (6 * np.sqrt(n * L)))      # |Z| >= threshold / (||loss|| / sqrt(d))
p_proof = 2 * norm.sf(1 / (6 * n * L))
m_big = 10**14                                         # any width with |N4| = rho^4 <= m
rho = n * L * d * np.log(m_big)
N4 = int(np.ceil(rho**4))
p_event = binom.sf(np.ceil(need * N4) - 1, N4, p_printed)   # P[|N5| >= need |N4|]
print(f"n = {n}, L = {L}: required fraction {need:.5f}; P[|Z| >= 1/(6 sqrt(nL))] = {p_printed:.5f}; "
      f"proof's threshold 1/(6nL): {p_proof:.5f}")
print(f"|N4| = rho^4 = {N4:.3g} (m = 1e14): P[printed event] = {p_event:.3g} (it should be >= 1 - e^(-Omega(rho^2)))")
rng = np.random.default_rng(0)
m, R = 4096, 200
B = rng.standard_normal((R, m)) / np.sqrt(d)          # d = 1: u = B^T loss with ||loss|| = 1
frac = np.mean(np.abs(B) >= 1 / (6 * np.sqrt(d * n * L)), axis=1)
print(f"simulation, N4 = [m], m = {m}: median fraction {np.median(frac):.4f}, {np.mean(frac < need):.2f} of {R} draws "
      f"below {need:.4f}")
ok = p_printed < need and p_event < 1e-6 and p_proof >= need and np.mean(frac < need) > 0.5
print("printed Lemma D.7 fails; the proof's threshold 1/(6nL sqrt d) holds" if ok else "not reproduced")
sys.exit(0 if ok else 1)
