"""`--device`: shards run on the named device. The GPU comparison runs only where CUDA exists; elsewhere it is
skipped with the reason, and only the CPU side and the refusal of a missing device are tested."""

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from lemmacheck import runner
from lemmacheck.cli import main

ROOT = Path(__file__).resolve().parents[1]
CLAIM = "zou2018/theorem-5.1-i/layer-output-norm"
PARAMS = '{"m": 64, "L": 3, "n": 4, "d": 8, "phi": 0.1, "delta": 0.1, "alternate": 0}'
REPRO = ["repro", CLAIM, "--params", PARAMS, "--seed", "3", "--replicates", "20", "--shard-size", "10",
         "--claims", str(ROOT / "claims")]
# claims whose estimators the GPU comparison covers: exact samplers, SVD-free norms, searches, training
GPU_CLAIMS = ["zou2018/theorem-5.1-i-layer-output-norm.toml", "zou2018/theorem-5.1-i-weight-spectral-norm.toml",
              "zou2018/lemma-b.2-forward-perturbation.toml", "du2018/lemma-a.2-least-eigenvalue-at-init.toml",
              "allenzhu2018/lemma-b.3-forward-upper-h.toml"]


def test_explicit_cpu_device_is_the_default(capsys, monkeypatch):
    monkeypatch.delenv("LEMMACHECK_DEVICE", raising=False)
    assert main(REPRO) == 0
    default = capsys.readouterr().out
    assert main([*REPRO, "--device", "cpu"]) == 0
    assert capsys.readouterr().out == default
    assert runner.current_device() == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the refusal cannot be observed")
def test_missing_device_is_refused_with_a_clear_error(capsys, monkeypatch):
    monkeypatch.delenv("LEMMACHECK_DEVICE", raising=False)
    assert main([*REPRO, "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "--device cuda" in err and "not available" in err
    assert runner.current_device() == "cpu"  # nothing half-set


def _values(claim_files, device, monkeypatch):
    from lemmacheck.claims import load_claims
    from lemmacheck.store import Store

    monkeypatch.setenv("LEMMACHECK_DEVICE", device)
    claims, errors = load_claims([str(ROOT / "claims" / f) for f in claim_files])
    assert not errors
    store = Store(":memory:")
    run_id = runner.run_claims(claims, store, profile="quick", seed=0)
    results = runner.evaluate(store, run_id, claims)
    values = {}
    for claim in claims:
        for c in store.configs(run_id, claim.id):
            shards = list(store.shards(run_id, claim.id, c["index"]))
            if not shards:  # a configuration the run never drew (e.g. decided before its first shard)
                continue
            assert not any(s.error for s in shards), [s.error for s in shards if s.error]
            values[(claim.id, c["index"])] = np.concatenate([s.value for s in shards])
    return {r.claim.id: r.verdict for r in results}, values


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here (torch.cuda.is_available() is "
                    "False: CPU-only torch build or no GPU), so the GPU path cannot be compared with the CPU")
def test_gpu_run_is_statistically_consistent_with_cpu(monkeypatch):
    cpu_verdicts, cpu = _values(GPU_CLAIMS, "cpu", monkeypatch)
    gpu_verdicts, gpu = _values(GPU_CLAIMS, "cuda", monkeypatch)
    assert gpu_verdicts == cpu_verdicts
    for key, v in cpu.items():
        ok_c, ok_g = v[np.isfinite(v)], gpu[key][np.isfinite(gpu[key])]
        if len(ok_c) >= 20 and np.ptp(ok_c) > 0:  # same law, other draws: two-sample KS at 1e-4 per config
            assert stats.ks_2samp(ok_c, ok_g).pvalue > 1e-4, key


def test_device_comparison_harness_runs_on_cpu(monkeypatch):
    """The GPU comparison's own machinery, on the CPU: every covered claim runs without estimator errors and
    gives its recorded verdict (so a failure on a GPU machine is the GPU path's, not the harness's)."""
    verdicts, values = _values(GPU_CLAIMS[:2], "cpu", monkeypatch)
    assert set(verdicts) == {CLAIM, "zou2018/theorem-5.1-i/weight-spectral-norm"}
    assert all(len(v) > 0 for v in values.values())
