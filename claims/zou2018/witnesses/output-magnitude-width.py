"""Witness: Lemma A.6 of Zou, Cao, Zhou & Gu, printed without a width condition, fails for depth large against width.

Lemma A.6: under Gaussian initialization only, for any delta > 0, w.p. >= 1 - delta, |yhat_i| <= C sqrt(log(n/delta))
for all i, C absolute. Take n = 1. If it held for every delta, P(|yhat| > t) <= exp(-t^2/C^2) for all t, so
E yhat^4 <= 2 C^4. But for one input, given x_{l-1}, the m pre-activations of layer l are i.i.d. N(0, 2||x_{l-1}||^2/m)
(columns of W_l ~ N(0, 2/m I)), so ||x_l||^2 = ||x_{l-1}||^2 (2/m) chi^2_K with K ~ Bin(m, 1/2), whence
E[||x_l||^4 | x_{l-1}] = (1 + 5/m) ||x_{l-1}||^4; and E[yhat^2 | x_{L-1}] = (1 - 1/pi) ||x_{L-1}||^2 (v half +1, half -1).
So E yhat^4 >= (1 - 1/pi)^2 (1 + 5/m)^(L-1), and C >= ((1 - 1/pi)^2 (1 + 5/m)^(L-1) / 2)^(1/4): unbounded in L at
every width m. The witness checks the one-layer moment factor 1 + 5/m by simulation, measures the implied constant
q_{1-delta}(|yhat|) / sqrt(log(1/delta)) (delta = 1e-3) growing with depth at two widths, and prints the depth at
which the exact bound forces C > 10. Exit 0 when the moment factor matches within 3% and the implied constant at
L ~ 2m is more than twice the one at L = 1 at both widths.
"""
import sys

import numpy as np

rng = np.random.default_rng(20183)
DRAWS, DELTA = 200_000, 1e-3


def layer_factor(m: int, size) -> np.ndarray:
    """||x_l||^2 / ||x_{l-1}||^2 = (2/m) chi^2_K, K ~ Bin(m, 1/2) active units (exact law for one input)."""
    k = rng.binomial(m, 0.5, size=size)
    return 2.0 / m * rng.chisquare(np.maximum(k, 1), size=size) * (k > 0)


def yhat(m: int, depth: int) -> np.ndarray:
    sq = np.ones(DRAWS)  # ||x_0||^2 = 1
    for _ in range(depth - 1):
        sq *= layer_factor(m, DRAWS)
    pre = rng.standard_normal((DRAWS, m)) * np.sqrt(2.0 * sq / m)[:, None]  # layer-L pre-activations
    relu = np.maximum(pre, 0.0)
    return relu[:, : m // 2].sum(1) - relu[:, m // 2:].sum(1)


ok = True
for m in (16, 64):
    f = layer_factor(m, 400_000)
    ratio = np.mean(f ** 2)
    ok &= abs(ratio / (1 + 5 / m) - 1) < 0.03
    print(f"m = {m}: E[(||x_l||^2/||x_(l-1)||^2)^2] = {ratio:.4f} (exact 1 + 5/m = {1 + 5 / m:.4f})")
for m, deep in ((16, 30), (64, 120)):
    c = {}
    for depth in (1, deep):
        q = np.quantile(np.abs(yhat(m, depth)), 1 - DELTA)
        c[depth] = q / np.sqrt(np.log(1 / DELTA))
    ok &= c[deep] > 2 * c[1]
    print(f"m = {m}: implied constant q_(1-delta)|yhat| / sqrt(log(1/delta)) = {c[1]:.2f} (L = 1), {c[deep]:.2f} (L = {deep})")
for m in (16, 64, 256, 1024):
    need = np.log(2 * 10 ** 4 / (1 - 1 / np.pi) ** 2) / np.log1p(5 / m) + 1
    print(f"m = {m:4d}: the exact moment bound forces C > 10 once L >= {int(np.ceil(need))}")
print("reproduces" if ok else "does NOT reproduce")
sys.exit(0 if ok else 1)
