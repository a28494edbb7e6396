"""Witness: Lemma B.7 of Chatterji, Long and Bartlett fails for L >= 2.

For ||M_i||_op <= 1 and nonempty I in [L+1], the lemma says prod_{i in I} ||A_i||_op ||M_i||_op <=
max{||A||^{L+1}/(L+1)^{(L+1)/2}, ||A||}, ||A||^2 = sum_i ||A_i||_F^2. Counterexample (L = 2): A_1 = A_2 =
sqrt(e) e_1 e_1^T, A_3 = 0, M_i = I, I = {1, 2}. Exit 0 when the printed inequality fails."""
import sys

import numpy as np

d = 3
e1 = np.zeros((d, 1))
e1[0] = 1
fails = 0
for L in (2, 3, 5, 10):
    x = np.sqrt(2 * np.e) if L == 2 else np.sqrt(np.e * (L // 2 + 1))
    k = max(1, round(x**2 / np.e))  # |I| near x^2/e, where (x^2/|I|)^{|I|/2} peaks
    A = [np.sqrt(x**2 / k) * (e1 @ e1.T) if i < k else np.zeros((d, d)) for i in range(L + 1)]
    M = [np.eye(d)] * (L + 1)
    normA = np.sqrt(sum(np.linalg.norm(a, "fro") ** 2 for a in A))
    lhs = np.prod([np.linalg.norm(A[i], 2) * np.linalg.norm(M[i], 2) for i in range(k)])
    rhs = max(normA ** (L + 1) / (L + 1) ** ((L + 1) / 2), normA)
    print(f"L = {L:2d}: |I| = {k}, ||A|| = {normA:.3f}: LHS = {lhs:.4f}, RHS = {rhs:.4f}, ratio {lhs / rhs:.4f}")
    fails += lhs > rhs * (1 + 1e-12)
sys.exit(0 if fails == 4 else 1)
