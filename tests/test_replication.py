"""Verdicts that replicate on another machine: the estimators give the same values under the perturbations another
LAPACK/BLAS build causes (eigenvector signs, the basis LAPACK picks for a degenerate eigenspace, the order of tied
eigenvalues, the BLAS thread count).

The machine dependence these guard against: Lemma A.11's search over coefficient vectors a included the
eigenvectors of the points' Gram matrix with the smallest eigenvalues; for n points in d = 2 that Gram has rank 2,
so those "eigenvectors" are LAPACK's arbitrary basis of an (n - 2)-dimensional null space, and the minimum over a
(the claim's quantity) changed by up to 0.24 between bases. The exact samplers drew A z with A = V sqrt(Lambda),
whose columns' signs are LAPACK's choice, so the draws themselves differed between machines.
"""

from __future__ import annotations

import math

import pytest
import torch
from plugins import paper

from lemmacheck.context import Context
from lemmacheck.linalg import canonical_eigh, psd_sqrt
from lemmacheck.shards import seeded_generator

_EIGH = torch.linalg.eigh


def perturbed_eigh(seed: int = 0):
    """torch.linalg.eigh as another machine might return it: every eigenvector's sign flipped at random, each
    degenerate eigenspace (eigenvalues within 1e-9 of the largest) given a random orthonormal basis, in a random
    order within the tie."""
    g = torch.Generator().manual_seed(seed)

    def eigh(H, *args, **kwargs):
        evals, V = _EIGH(H, *args, **kwargs)
        V = V.clone()
        n = H.shape[-1]
        Vf, ef = V.reshape(-1, n, n), evals.reshape(-1, n)
        for b in range(Vf.shape[0]):
            tol = 1e-9 * ef[b].abs().max().clamp_min(1e-300)
            i = 0
            while i < n:
                j = i
                while j < n - 1 and ef[b, j + 1] - ef[b, j] <= tol:
                    j += 1
                k = j - i + 1
                if k > 1:
                    Q, _ = torch.linalg.qr(torch.randn(k, k, generator=g, dtype=H.dtype))
                    Vf[b, :, i:j + 1] = Vf[b, :, i:j + 1] @ Q[:, torch.randperm(k, generator=g)]
                i = j + 1
        signs = torch.where(torch.rand(Vf.shape[0], 1, n, generator=g) < 0.5, -1.0, 1.0).to(H.dtype)
        return evals, (Vf * signs).reshape(V.shape)

    return eigh


def _rank_deficient(R: int = 6, n: int = 8, d: int = 2, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    Z = torch.randn(R, n, d, generator=g, dtype=torch.float64)
    return Z @ Z.transpose(-1, -2)


def test_the_perturbation_really_changes_what_lapack_returns():
    """The stand-in for another machine is not a no-op: the raw eigenvectors differ under it."""
    H = _rank_deficient()
    _, V0 = _EIGH(H)
    _, V1 = perturbed_eigh(1)(H)
    assert (V0 - V1).abs().max() > 0.1


@pytest.mark.parametrize("seed", range(5))
def test_canonical_eigh_is_the_same_under_sign_flips_rotated_null_spaces_and_reordered_ties(monkeypatch, seed):
    H = torch.cat([_rank_deficient(seed=seed), torch.eye(8, dtype=torch.float64).expand(2, 8, 8) * 3.0])
    e0, V0 = canonical_eigh(H)
    monkeypatch.setattr(torch.linalg, "eigh", perturbed_eigh(seed))
    e1, V1 = canonical_eigh(H)
    assert torch.equal(e0, e1)
    assert torch.allclose(V0, V1, atol=1e-10), (V0 - V1).abs().max()
    # still an eigendecomposition
    assert torch.allclose(V1 @ torch.diag_embed(e1) @ V1.transpose(-1, -2), H, atol=1e-10)
    assert torch.allclose(V1.transpose(-1, -2) @ V1, torch.eye(8, dtype=torch.float64).expand_as(V1), atol=1e-10)


def test_psd_sqrt_is_the_unique_symmetric_root_whatever_basis_lapack_picks(monkeypatch):
    G = _rank_deficient(n=6, d=3)
    A0 = psd_sqrt(G)
    monkeypatch.setattr(torch.linalg, "eigh", perturbed_eigh(3))
    A1 = psd_sqrt(G)
    assert torch.allclose(A0, A1, atol=1e-10)
    assert torch.allclose(A1 @ A1.transpose(-1, -2), G, atol=1e-10)
    assert torch.allclose(A1, A1.transpose(-1, -2))


def _ctx(params: dict, R: int, seed: int, args: dict | None = None) -> Context:
    return Context("t", params, R, seeded_generator(seed), torch.float64, torch.device("cpu"), args or {}, {},
                   "random", "scalar")


def _li_ctx(params: dict, R: int, seed: int) -> Context:
    """Lemma A.11's claim inputs: n points on an arc in the plane, 1/iphi apart."""
    spec = {"kind": "unit-sphere", "n": "n", "d": "2", "separation": "1/iphi", "geometry": "arc"}
    return Context("t", params, R, seeded_generator(seed), torch.float64, torch.device("cpu"), {}, spec, "random",
                   "scalar")


@pytest.mark.parametrize("n,iphi", [(4, 4), (8, 4), (8, 20)])
def test_li_liang_probability_is_machine_independent(monkeypatch, n, iphi):
    """Lemma A.11's quantity (the minimum over the structured search set) under another machine's eigenvectors:
    the same values. Before canonical_eigh it moved by up to 0.24 at (n, iphi) = (8, 4)."""
    sl = paper("zou2018").scalar_lemmas
    params = {"n": n, "iphi": iphi, "t": 1.0}
    v0 = sl.li_liang_probability(_li_ctx(params, 40, 7)).value
    for s in range(3):
        with monkeypatch.context() as mp:
            mp.setattr(torch.linalg, "eigh", perturbed_eigh(s))
            v1 = sl.li_liang_probability(_li_ctx(params, 40, 7)).value
        assert torch.allclose(v0, v1, atol=1e-12), (v0 - v1).abs().max()


def test_zou2018_exact_sampler_draws_do_not_depend_on_eigenvector_signs(monkeypatch):
    """The conditional (exact-in-distribution) forward pass draws layer pre-activations as A z from the inputs'
    Gram; the same seed must give the same draws under another machine's eigenvectors."""
    q = paper("zou2018").quantities
    params = {"m": 64, "L": 3, "n": 4, "d": 8, "phi": 0.1, "delta": 0.1}
    name = "max-layer-output-norm"
    from lemmacheck.registry import QUANTITIES

    fn = QUANTITIES.get(name).obj
    assert q is not None
    v0 = fn(_ctx(params, 16, 11)).value
    monkeypatch.setattr(torch.linalg, "eigh", perturbed_eigh(5))
    v1 = fn(_ctx(params, 16, 11)).value
    assert torch.allclose(v0, v1, rtol=1e-10), (v0 - v1).abs().max()


def test_li_liang_probability_is_the_same_at_another_blas_thread_count():
    """Rounding differs between thread counts only below 1e-12 here, and no decision in the estimator sits on it."""
    sl = paper("zou2018").scalar_lemmas
    params = {"n": 8, "iphi": 4, "t": 1.0}
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        v1 = sl.li_liang_probability(_li_ctx(params, 40, 3)).value
        torch.set_num_threads(max(2, threads))
        v2 = sl.li_liang_probability(_li_ctx(params, 40, 3)).value
    finally:
        torch.set_num_threads(threads)
    assert torch.allclose(v1, v2, atol=1e-12)
    assert math.isfinite(float(v1.sum()))


# ------------------------------------------------------------------------------------------- run --seeds K

def test_agreement_counts_the_seeds_that_give_the_expected_verdict():
    from lemmacheck.replication import agreement, markdown, summary, table

    per_seed = {
        0: [{"id": "a", "verdict": "holds", "expect": "holds", "flags": []},
            {"id": "b", "verdict": "holds", "expect": "inconclusive", "flags": []}],
        1: [{"id": "a", "verdict": "holds", "expect": "holds", "flags": []},
            {"id": "b", "verdict": "inconclusive", "expect": "inconclusive", "flags": ["errors"]}],
    }
    rows = {r["id"]: r for r in agreement(per_seed)}
    assert rows["a"]["agree"] == 2 and rows["a"]["seeds"] == 2
    assert rows["b"]["agree"] == 1 and rows["b"]["counts"] == {"holds": 1, "inconclusive": 1}
    assert rows["b"]["errors"] == [1]
    s = summary(list(rows.values()))
    assert s == {"claims": 2, "seeds": 2, "all_agree": 1, "by_agree": {2: 1, 1: 1}}
    text = table(list(rows.values()))
    assert "b  " in text and "1/2 (errors)" in text and "a  " not in text.splitlines()[2]
    assert "1 of 2 claims give their expected verdict at all 2 seeds" in text
    md = markdown(list(rows.values()), [0, 1])
    assert "| `b` | inconclusive | 1/2 (errors) | holds 1, inconclusive 1 |" in md


def test_run_seeds_runs_each_seed_and_reports_agreement(tmp_path, capsys):
    import json

    from fault_claims import write_fault_claim

    from lemmacheck.cli import main
    from lemmacheck.store import Store

    claims_dir = write_fault_claim(tmp_path, "replication-draws", configs=2)
    db, out = tmp_path / "r.db", tmp_path / "r.json"
    rc = main(["run", str(claims_dir), "--seeds", "3", "--seed", "4", "--db", str(db), "--json", str(out), "-q",
               "--report", str(tmp_path / "site")])
    assert rc == 0
    index = (tmp_path / "site" / "index.html").read_text()
    assert "Replication at seeds 4, 5, 6: 1 of 1 claims give their expected verdict at every seed" in index
    assert json.loads((tmp_path / "site" / "replication.json").read_text())["seeds"] == [4, 5, 6]
    doc = json.loads(out.read_text())
    assert doc["seeds"] == [4, 5, 6]
    assert doc["replication"] == {"claims": 1, "seeds": 3, "all_agree": 1, "by_agree": {"3": 1}}
    (row,) = doc["claims"]
    assert row["id"] == "fault/fact-1/draws" and row["verdicts"] == {"4": "inconclusive", "5": "inconclusive",
                                                                      "6": "inconclusive"}
    assert [r["seed"] for r in doc["runs"]] == [4, 5, 6]
    assert "1 of 1 claims give their expected verdict at all 3 seeds" in capsys.readouterr().out
    store = Store(db)
    seeds = sorted(store.run_info(r)["seed"] for r in range(1, store.latest_run() + 1))
    store.close()
    assert seeds == [4, 5, 6]  # three runs, one per seed, each resumable on its own
