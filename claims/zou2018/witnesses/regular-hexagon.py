"""Witness: the regular hexagon with alternating labels refutes Lemma A.11, Lemma A.10 / Theorem 5.1 (vii) and, at
L = 1, Theorems 4.1, 4.5 and Corollaries 4.4, 4.7 of Zou, Cao, Zhou & Gu, at every width.

Data: x_k = (cos(k pi/3), sin(k pi/3)), k = 0..5, in a random 2-plane of R^d (unit norm, A3.5; pairwise distances
>= 1, so A3.6 holds for every phi <= 1), labels and coefficients y_k = a_k = (-1)^k. Antipodal vertices x_{k+3} = -x_k
carry opposite signs and x_0 - x_1 + x_2 = 0, hence for every w (off the three lines <w, x_k> = 0)
  h(w) = sum_k a_k 1{<w, x_k> > 0} x_k = x_0 - x_1 + x_2 = 0                     (Lemma A.11, A.10 at L = 1),
and for every bias-free one-hidden-layer ReLU network f(x) = v^T relu(W^T x), since relu(t) - relu(-t) = t,
  sum_k y_k f(x_k) = v^T W^T (x_0 - x_1 + x_2) = 0,
so some margin y_k f(x_k) is <= 0 (a training error) and, the logistic loss being convex,
L_S(W) >= l(0) = log 2 for every W: no epsilon < log 2 is reached by GD or SGD at any width, step or step size.
Checked here: (1) h(w) for Gaussian w; (2) Lemma A.10's node count at L = 1 for a = y; (3) the identity for Gaussian W;
(4) GD and SGD (logistic loss, W ~ N(0, 2/m), v half +1 / half -1, eta = 1/m) at m = 64..4096: L_S >= log 2 and
the margin sum is 0 (to rounding) at every iterate. Exit 0 when all four reproduce.
"""
import sys

import numpy as np

rng = np.random.default_rng(2018)
d = 16
Q, _ = np.linalg.qr(rng.standard_normal((d, 2)))          # a random 2-plane of R^d
ang = np.arange(6) * np.pi / 3
X = np.stack([np.cos(ang), np.sin(ang)], 1) @ Q.T          # 6 x d, unit rows
y = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])
dist = np.linalg.norm(X[:, None] - X[None], axis=-1)
ok = bool(np.allclose(np.linalg.norm(X, axis=1), 1) and dist[~np.eye(6, dtype=bool)].min() > 1 - 1e-12)
print(f"A3.5 unit norm and A3.6 separation >= 1 (so every phi <= 1): {ok}")

# (1) Lemma A.11: ||h(w)|| for w ~ N(0, I_d).
w = rng.standard_normal((100_000, d))
h = ((w @ X.T > 0) * y) @ X
hmax = float(np.linalg.norm(h, axis=1).max())
ok &= hmax < 1e-12
print(f"(1) Lemma A.11: max ||h(w)|| over 100000 Gaussian w = {hmax:.2e} (the lemma needs >= C phi/n with prob >= C' phi/n)")

# (2) Lemma A.10 / Theorem 5.1 (vii) at L = 1 (x_{L-1,i} = x_i), a = y, W_1 ~ N(0, 2/m): nodes with a positive norm.
m = 4096
W = rng.standard_normal((d, m)) * np.sqrt(2 / m)
g = (((W.T @ X.T) > 0) * y) @ X / 6
count = int((np.linalg.norm(g, axis=1) > 1e-12).sum())
ok &= count == 0
print(f"(2) Lemma A.10 at L = 1, m = {m}: nodes with ||(1/n) sum_i a_i sigma'(<w_j, x_i>) x_i|| > 1e-12: {count}")


def forward(W, v):
    return np.maximum(X @ W, 0) @ v


def grad(W, v, idx):
    """Gradient of (1/|idx|) sum_{i in idx} log(1 + exp(-y_i f(x_i))) in W."""
    pre = X[idx] @ W
    margin = y[idx] * (np.maximum(pre, 0) @ v)
    lp = -1 / (1 + np.exp(margin))                          # l'(margin)
    return X[idx].T @ ((lp * y[idx])[:, None] * (pre > 0) * v) / len(idx)


# (3) + (4): the identity at initialisation and along GD / SGD.
worst_sum, worst_gap = 0.0, np.inf
for m in (64, 256, 1024, 4096):
    v = np.repeat([1.0, -1.0], m // 2)
    for method, B in (("GD", 6), ("SGD", 2)):
        W = rng.standard_normal((d, m)) * np.sqrt(2 / m)
        min_loss, max_gap, max_sum, min_err = np.inf, 0.0, 0.0, 6
        for k in range(301):
            margin = y * forward(W, v)
            loss = float(np.mean(np.logaddexp(0, -margin)))
            scale = float(np.abs(margin).max()) + 1.0
            max_sum = max(max_sum, abs(float(margin.sum())) / scale)
            min_loss = min(min_loss, loss)
            min_err = min(min_err, int((margin <= 1e-12 * scale).sum()))
            idx = np.arange(6) if B == 6 else rng.choice(6, size=B, replace=False)
            G = grad(W, v, idx)
            max_gap = max(max_gap, float(np.linalg.norm(G)))
            W = W - (1 / m) * G
        gap = min_loss - np.log(2)
        worst_sum, worst_gap = max(worst_sum, max_sum), min(worst_gap, gap)
        ok &= gap > -1e-12 and max_sum < 1e-12 and min_err >= 1
        print(f"(4) {method:3s} m = {m:4d}: min_k L_S = {min_loss:.6f} (log 2 = {np.log(2):.6f}), "
              f"max_k |sum y f|/scale = {max_sum:.1e}, min_k #margins <= 0 = {min_err}, "
              f"max_k ||gradient|| {max_gap:.1e}")
print(f"(3) identity sum_k y_k f(x_k) = 0 at every iterate: max relative residual {worst_sum:.1e}; "
      f"min over runs of min_k L_S - log 2 = {worst_gap:.2e}")
print("reproduces" if ok else "does NOT reproduce")
sys.exit(0 if ok else 1)
