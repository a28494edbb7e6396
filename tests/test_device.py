"""`--device`: shards run on the named device.

On every machine: every claim's quick configurations (one shard of two replicates each) run under a stand-in
device (tests/standin_device.py) on which `.numpy()`/`numpy.asarray` of a device tensor and operations mixing device
and CPU tensors fail as they do on CUDA; a planted `.numpy()` is caught there. Where CUDA exists
(scripts/device_check.sh on a GPU machine): every claim's quick profile on the GPU against the CPU (per configuration
a two-sample test of the values, per claim the verdict)."""

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


def _values(claim_files, device, monkeypatch, workers: int = 1, db: str = ":memory:"):
    """(verdict per claim, values per (claim, configuration), errors per claim) of the quick profile at seed 0."""
    from lemmacheck.claims import load_claims
    from lemmacheck.store import Store

    monkeypatch.setenv("LEMMACHECK_DEVICE", device)
    claims, errors = load_claims([str(ROOT / "claims" / f) for f in claim_files])
    assert not errors
    store = Store(db)
    run_id = runner.run_claims(claims, store, profile="quick", seed=0, workers=workers)
    results = runner.evaluate(store, run_id, claims)
    values, errs = {}, {}
    for claim in claims:
        for c in store.configs(run_id, claim.id):
            shards = list(store.shards(run_id, claim.id, c["index"]))
            if not shards:  # a configuration the run never drew (e.g. decided before its first shard)
                continue
            errs.setdefault(claim.id, []).extend(s.error for s in shards if s.error)
            values[(claim.id, c["index"])] = np.concatenate([s.value for s in shards])
    store.close()
    return {r.claim.id: r.verdict for r in results}, values, {k: v for k, v in errs.items() if v}


KS_ALPHA = 1e-4  # per configuration: with ~1,300 quick configurations, 0.13 false alarms expected per comparison


def compare_devices(cpu: tuple, gpu: tuple) -> dict:
    """CPU against GPU: per configuration a two-sample Kolmogorov-Smirnov test of the values (same law, other
    draws; KS is conservative for discrete values), per claim the verdicts. Returns the failures and counts."""
    (cv, cvals, _), (gv, gvals, gerr) = cpu, gpu
    ks_fail, tested = [], 0
    for key, v in cvals.items():
        g = gvals.get(key)
        if g is None:
            continue
        ok_c, ok_g = v[np.isfinite(v)], g[np.isfinite(g)]
        if len(ok_c) >= 20 and len(ok_g) >= 20 and (np.ptp(ok_c) > 0 or np.ptp(ok_g) > 0):
            tested += 1
            p = stats.ks_2samp(ok_c, ok_g).pvalue
            if p <= KS_ALPHA:
                ks_fail.append((key, p))
    differ = {cid: (cv[cid], gv.get(cid)) for cid in cv if gv.get(cid) != cv[cid]}
    flips = {cid: d for cid, d in differ.items() if set(d) == {"holds", "violated"}}
    return {"tested": tested, "ks_fail": ks_fail, "differ": differ, "flips": flips, "gpu_errors": gerr,
            "claims": len(cv)}


ALL_CLAIMS = sorted(p.name for p in (ROOT / "claims").iterdir() if p.is_dir())  # every paper's folder


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here (torch.cuda.is_available() is "
                    "False: CPU-only torch build or no GPU), so the GPU path cannot be compared with the CPU")
def test_gpu_run_over_every_claim_is_consistent_with_cpu(monkeypatch, tmp_path):
    """Every claim's quick profile, CPU and GPU (scripts/device_check.sh runs it). No GPU shard may raise; values
    agree in law per configuration (KS at 1e-4: expected false alarms tested * 1e-4, allowed 2); verdicts: no claim
    moves between holds and violated, and at most 10% read otherwise (between two CPU seeds about 5% of claims
    do: docs/replication.md)."""
    import json
    import os

    workers = int(os.environ.get("LEMMACHECK_DEVICE_WORKERS", "4"))
    cpu = _values(ALL_CLAIMS, "cpu", monkeypatch, workers, str(tmp_path / "cpu.db"))
    gpu = _values(ALL_CLAIMS, "cuda", monkeypatch, workers, str(tmp_path / "gpu.db"))
    res = compare_devices(cpu, gpu)
    out = os.environ.get("LEMMACHECK_DEVICE_REPORT")
    if out:
        Path(out).write_text(json.dumps({k: (v if k != "ks_fail" else [[list(a), p] for a, p in v])
                                         for k, v in res.items()}, indent=1, default=str))
    assert not res["gpu_errors"], "\n".join(f"{k}: {v[0].splitlines()[0]}" for k, v in res["gpu_errors"].items())
    assert len(res["ks_fail"]) <= 2, res["ks_fail"]
    assert not res["flips"], res["flips"]
    assert len(res["differ"]) <= 0.1 * res["claims"], res["differ"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here (torch.cuda.is_available() is "
                    "False: CPU-only torch build or no GPU), so the GPU path cannot be compared with the CPU")
def test_gpu_run_is_statistically_consistent_with_cpu(monkeypatch):
    cpu = _values(GPU_CLAIMS, "cpu", monkeypatch)
    gpu = _values(GPU_CLAIMS, "cuda", monkeypatch)
    res = compare_devices(cpu, gpu)
    assert not res["gpu_errors"] and not res["ks_fail"] and not res["differ"], res


def test_compare_devices_flags_another_law_and_a_flipped_verdict():
    """The comparison itself, on made-up results: same law passes; a shifted law and holds -> violated are caught."""
    rng = np.random.default_rng(0)
    a = ({"c": "holds"}, {("c", 0): rng.normal(size=200)}, {})
    same = ({"c": "holds"}, {("c", 0): rng.normal(size=200)}, {})
    other = ({"c": "violated"}, {("c", 0): rng.normal(1.0, size=200)}, {})
    ok = compare_devices(a, same)
    assert ok["tested"] == 1 and not ok["ks_fail"] and not ok["differ"]
    bad = compare_devices(a, other)
    assert len(bad["ks_fail"]) == 1 and bad["flips"] == {"c": ("holds", "violated")}


def test_device_comparison_harness_runs_on_cpu(monkeypatch):
    """The GPU comparison's own machinery, on the CPU: every covered claim runs without estimator errors and
    gives its recorded verdict (so a failure on a GPU machine is the GPU path's, not the harness's)."""
    verdicts, values, errs = _values(GPU_CLAIMS[:2], "cpu", monkeypatch)
    assert not errs
    assert set(verdicts) == {CLAIM, "zou2018/theorem-5.1-i/weight-spectral-norm"}
    assert all(len(v) > 0 for v in values.values())


# ---------------------------------------------------------------------------------------------- stand-in device

PLANTED = '''
import numpy as np
import torch
from scipy import stats

from lemmacheck.boundary import to_numpy
from lemmacheck.context import Context, Observation
from lemmacheck.registry import QUANTITIES


@QUANTITIES.register("{name}", "test only: a device bug of kind args.bug", networks=("scalar",))
def planted(ctx):
    x = torch.randn(ctx.replicates, generator=ctx.generator, dtype=torch.float64)
    bug = ctx.arg("bug", "none")
    if bug == "numpy":
        return Observation(torch.from_numpy(x.numpy()).to(x.device))
    if bug == "scipy":  # numpy.asarray inside scipy
        return Observation(torch.as_tensor(stats.norm.cdf(x), device=x.device))
    if bug == "mixed":  # back from numpy without moving to the device
        return Observation(torch.from_numpy(stats.norm.cdf(to_numpy(x))) + x)
    if bug == "default-device":  # made on the shard's default device, combined with a tensor read to the CPU
        ok = torch.ones(ctx.replicates, dtype=torch.bool)
        ok &= (x > -50).cpu()
        return Observation(x, valid=ok)
    if bug == "cpu-context":  # a second context that forgets the device: its draws stay on the CPU
        y = Context(ctx.claim_id, ctx.params, ctx.replicates, ctx.generator, ctx.dtype).randn(ctx.replicates, 1, 1)
        return Observation((x.reshape(-1, 1, 1) @ y).reshape(-1))
    # the clean form: explicit moves both ways
    return Observation(torch.from_numpy(stats.norm.cdf(to_numpy(x))).to(x.device) + 0 * x)
'''

PLANTED_CLAIM = '''
id = "planted/fact-1/{name}"
paper = "planted"
result = "Fact 1"
title = "planted device bug"
statement = 'x \\\\le 10'
kind = "test"
network = "scalar"
[params]
k = {{ value = 1 }}
[check]
quantity = "{name}"
relation = "<="
bound = "10"
probability = "always"
args = {{ bug = "{bug}" }}
[profiles.quick]
replicates = 4
shard_size = 4
grid = {{ k = [1] }}
[profiles.full]
replicates = 4
shard_size = 4
grid = {{ k = [1] }}
'''


def standin_shard_errors(claims, replicates: int = 2, full: bool = True, configs: int | None = None) -> dict[str, str]:
    """Claim id -> the first device error of one shard (`replicates` draws) per quick configuration, run under the
    stand-in device (`full`: StandInDevice, which tracks every tensor; else NumpyBoundaryOnly, the cheap check);
    other errors (an estimator refusing a configuration) are not device errors. `configs`: only the first few
    quick configurations of each claim."""
    import dataclasses

    from standin_device import STANDIN, NumpyBoundaryOnly, StandInDevice

    from lemmacheck.runner import _task, plan
    from lemmacheck.shards import execute_shard, is_bug

    bad: dict[str, str] = {}
    for claim in claims:
        if claim.mode == "infeasible" or claim.check is None:
            continue
        for j, p in enumerate(plan(claim, "quick", 0)[:configs]):
            task = dataclasses.replace(_task(claim, j, p, 0), replicates=min(replicates, p.shard_size))
            with StandInDevice() if full else NumpyBoundaryOnly():
                rec = execute_shard(task, device=str(STANDIN) if full else "cpu")
            if rec.error and ("stand-in" in rec.error or is_bug(rec.error)):
                bad[claim.id] = rec.error
                break
    return bad


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("bug", ["numpy", "scipy", "mixed", "default-device", "cpu-context", "none"])
def test_standin_device_catches_a_planted_numpy_read_on_the_cpu(tmp_path, bug, full):
    from lemmacheck.claims import load_claims

    d = tmp_path / "claims" / "planted"
    d.mkdir(parents=True)
    name = f"planted-device-{bug}-{'full' if full else 'boundary'}"
    (d / "extension.py").write_text(PLANTED.format(name=name))
    (d / "device.toml").write_text(PLANTED_CLAIM.format(name=name, bug=bug))
    claims, errors = load_claims([d])
    assert not errors
    bad = standin_shard_errors(claims, full=full)
    expected = {"numpy": "can't convert stand-in device tensor to numpy",
                "scipy": "can't convert stand-in device tensor to numpy",
                "mixed": "Expected all tensors to be on the same device",
                "default-device": "Expected all tensors to be on the same device",
                "cpu-context": "Expected all tensors to be on the same device"}
    if bug == "none" or (bug in ("mixed", "default-device", "cpu-context") and not full):  # no device tracking
        assert bad == {}
    else:
        assert expected[bug] in bad[claims[0].id]


def test_every_claims_estimators_read_tensors_only_through_the_numpy_boundary():
    """One shard of two replicates per quick configuration of every claim, with `.numpy()` and `numpy.asarray` of a
    tensor failing anywhere but in lemmacheck.boundary (NumpyBoundaryOnly: what would have caught every "can't
    convert cuda:0 device type tensor to numpy"). A failure names the claim and the line: read tensors through
    lemmacheck.boundary.to_numpy and move arrays back with `.to(x.device)`. (The per-operation StandInDevice, which
    also catches device mixing, runs below on each claim's first configuration.)"""
    from lemmacheck.claims import load_claims

    claims, errors = load_claims([ROOT / "claims"])
    assert not errors
    bad = standin_shard_errors(claims, full=False)
    lines = [f"{cid}: {e.splitlines()[0][-240:]} | " + " / ".join(x.strip() for x in e.splitlines()[-5:-1])
             for cid, e in sorted(bad.items())]
    assert not bad, f"{len(bad)} claim(s) are not device-clean:\n" + "\n".join(lines)


def test_every_claims_estimators_are_device_clean_under_the_full_stand_in():
    """As the boundary check, under the per-operation StandInDevice: also device/CPU mixing (an array brought back
    from numpy and not moved to the device, a tensor made on the shard's default device combined with one read to
    the CPU, a second Context that forgets the device), and the paths a GPU takes (the stand-in's cpu:0 is not the
    host, so `boundary.on_host` sends it down the device branches). Every claim's first quick configuration (about
    a minute on 2 cores; what caught du2018 Section 4 and guo2024 Lemma 4.3, which failed on an H200);
    LEMMACHECK_FULL_STANDIN=1 runs every quick configuration (a few minutes)."""
    import os

    from lemmacheck.claims import load_claims

    claims, errors = load_claims([ROOT / "claims"])
    assert not errors
    bad = standin_shard_errors(claims, full=True, configs=None if os.environ.get("LEMMACHECK_FULL_STANDIN") else 1)
    assert not bad, f"{len(bad)} claim(s) are not device-clean:\n" + "\n".join(
        f"{cid}: {e.splitlines()[0][-240:]}" for cid, e in sorted(bad.items()))
