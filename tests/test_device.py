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


def _values(claim_files, device, monkeypatch, workers: int = 1, db: str = ":memory:", info: dict | None = None):
    """(verdict per claim, values per (claim, configuration), errors per claim) of the quick profile at seed 0.
    `info` receives the run's wall seconds ("wall") and per configuration ("configs") its shard_cost, estimator
    seconds, draws and the devices its shards ran on."""
    import time

    from lemmacheck.claims import load_claims
    from lemmacheck.shards import shard_cost
    from lemmacheck.store import Store

    monkeypatch.setenv("LEMMACHECK_DEVICE", device)
    claims, errors = load_claims([str(ROOT / "claims" / f) for f in claim_files])
    assert not errors
    store = Store(db)
    t0 = time.perf_counter()
    run_id = runner.run_claims(claims, store, profile="quick", seed=0, workers=workers)
    wall = time.perf_counter() - t0
    results = runner.evaluate(store, run_id, claims)
    values, errs, configs = {}, {}, {}
    for claim in claims:
        for c in store.configs(run_id, claim.id):
            shards = list(store.shards(run_id, claim.id, c["index"]))
            if not shards:  # a configuration the run never drew (e.g. decided before its first shard)
                continue
            errs.setdefault(claim.id, []).extend(s.error for s in shards if s.error)
            values[(claim.id, c["index"])] = np.concatenate([s.value for s in shards])
            configs[(claim.id, c["index"])] = {"cost": shard_cost(claim, c["params"], c["shard_size"]),
                                               "seconds": sum(s.seconds for s in shards),
                                               "drawn": sum(len(s.value) for s in shards),
                                               "devices": sorted({s.device for s in shards}),
                                               "config": (c["params"], c["seed"])}
    store.close()
    if info is not None:
        info.update(wall=wall, configs=configs)
    return {r.claim.id: r.verdict for r in results}, values, {k: v for k, v in errs.items() if v}


def placement_gain(cpu: dict, gpu: dict, threshold: float) -> dict:
    """From two runs' per-configuration info (`_values`: the CPU's and one with every shard on the GPU): the
    estimator seconds the CPU alone spends, the GPU alone, placement at `threshold` (a configuration of
    shard_cost >= threshold on the GPU), and the threshold among the costs that spends least. Seconds are the CPU
    run's draws at each device's seconds a draw (early stopping draws other counts on other draws)."""
    rows = [(c["cost"], c["seconds"], gpu[k]["seconds"] / gpu[k]["drawn"] * c["drawn"])
            for k, c in cpu.items() if k in gpu and gpu[k]["drawn"] and gpu[k].get("config") == c.get("config")]

    def placed(th: float) -> float:
        return sum(g if cost >= th else c for cost, c, g in rows)

    best = min(sorted({cost for cost, _, _ in rows} | {float("inf")}), key=placed)
    return {"configs": len(rows), "cpu_s": sum(c for _, c, _ in rows), "gpu_s": sum(g for _, _, g in rows),
            "threshold": threshold, "placed_s": placed(threshold), "best_threshold": best, "best_s": placed(best),
            "on_gpu_at_threshold": sum(cost >= threshold for cost, _, _ in rows)}


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
    """Every claim's quick profile three ways, each timed on the same workers (scripts/device_check.sh runs it and
    prints the walls): on the CPU, with every shard on the GPU, and placed (`--device cuda`). CPU against every
    shard on the GPU: no GPU shard may raise; values agree in law per configuration (KS at 1e-4: expected false
    alarms tested * 1e-4, allowed 2); verdicts: no claim moves between holds and violated, and at most 10% read
    otherwise (between two CPU seeds about 5% of claims do: docs/replication.md). Placed: no shard raises, and the
    configurations placed on the CPU drew exactly the CPU run's values."""
    import json
    import os

    from lemmacheck.shards import device_min_cost

    workers = int(os.environ.get("LEMMACHECK_DEVICE_WORKERS", "4"))
    given = os.environ.get("LEMMACHECK_DEVICE_MIN_COST")  # the placed run's threshold (the default if unset)
    info: dict[str, dict] = {"cpu": {}, "gpu": {}, "placed": {}}
    cpu = _values(ALL_CLAIMS, "cpu", monkeypatch, workers, str(tmp_path / "cpu.db"), info["cpu"])
    monkeypatch.setenv("LEMMACHECK_DEVICE_MIN_COST", "0")  # every shard on the GPU: its code paths compared
    gpu = _values(ALL_CLAIMS, "cuda", monkeypatch, workers, str(tmp_path / "gpu.db"), info["gpu"])
    if given is None:
        monkeypatch.delenv("LEMMACHECK_DEVICE_MIN_COST")
    else:
        monkeypatch.setenv("LEMMACHECK_DEVICE_MIN_COST", given)
    placed = _values(ALL_CLAIMS, "cuda", monkeypatch, workers, str(tmp_path / "placed.db"), info["placed"])
    res = compare_devices(cpu, gpu)
    res["walls"] = {k: round(v["wall"], 1) for k, v in info.items()}
    res["workers"] = workers
    res["placement"] = placement_gain(info["cpu"]["configs"], info["gpu"]["configs"], device_min_cost())
    on_cpu = [k for k, c in info["placed"]["configs"].items() if c["devices"] == ["cpu"]]
    same = [k for k in on_cpu if k in info["cpu"]["configs"] and  # the same configuration (a hunt may differ)
            info["cpu"]["configs"][k]["config"] == info["placed"]["configs"][k]["config"]]
    res["placed_on_gpu"] = len(info["placed"]["configs"]) - len(on_cpu)
    res["placed_errors"] = placed[2]
    out = os.environ.get("LEMMACHECK_DEVICE_REPORT")
    if out:
        Path(out).write_text(json.dumps({k: (v if k != "ks_fail" else [[list(a), p] for a, p in v])
                                         for k, v in res.items()}, indent=1, default=str))
    assert not res["gpu_errors"], "\n".join(f"{k}: {v[0].splitlines()[0]}" for k, v in res["gpu_errors"].items())
    assert not placed[2], "\n".join(f"{k}: {v[0].splitlines()[0]}" for k, v in placed[2].items())
    assert same and all(np.array_equal(placed[1][k], cpu[1][k], equal_nan=True) for k in same)
    assert len(res["ks_fail"]) <= 2, res["ks_fail"]
    assert not res["flips"], res["flips"]
    assert len(res["differ"]) <= 0.1 * res["claims"], res["differ"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here (torch.cuda.is_available() is "
                    "False: CPU-only torch build or no GPU), so the GPU path cannot be compared with the CPU")
def test_gpu_run_is_statistically_consistent_with_cpu(monkeypatch):
    monkeypatch.setenv("LEMMACHECK_DEVICE_MIN_COST", "0")  # every shard on the GPU
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


# ------------------------------------------------------------------------------------------------------ placement


def _claim(path: str):
    from lemmacheck.claims import load_claims

    claims, errors = load_claims([str(ROOT / "claims" / path)])
    assert not errors
    return claims[0]


def test_placement_sends_small_shards_to_the_cpu_and_wide_ones_to_the_device(monkeypatch):
    from lemmacheck import shards
    from lemmacheck.registry import QUANTITIES

    monkeypatch.delenv("LEMMACHECK_DEVICE_MIN_COST", raising=False)
    claim = _claim("zou2018/theorem-5.1-i-layer-output-norm.toml")
    small = {"m": 64, "L": 5, "n": 10, "d": 16, "phi": 0.3, "delta": 0.1, "alternate": 0}
    wide = dict(small, m=8192, L=10)
    assert shards.shard_cost(claim, small, 50) == 50 * 10 * 64 ** 2 * 5
    assert shards.placement(claim, small, 50, "cuda") == "cpu"
    assert shards.placement(claim, wide, 50, "cuda") == "cuda"
    assert shards.placement(claim, wide, 50, "cpu") == "cpu"  # a CPU run never leaves the CPU
    # a function of the configuration and the threshold alone: the same answer every time, whatever the load
    assert {shards.placement(claim, wide, 50, "cuda:1") for _ in range(5)} == {"cuda:1"}
    monkeypatch.setenv("LEMMACHECK_DEVICE", "cuda")
    assert shards.placement(claim, wide, 50) == "cuda"  # the run's device by default
    monkeypatch.setenv("LEMMACHECK_DEVICE_MIN_COST", "0")  # every shard on the device
    assert shards.placement(claim, small, 50) == "cuda"
    monkeypatch.setenv("LEMMACHECK_DEVICE_MIN_COST", "inf")  # none
    assert shards.placement(claim, wide, 50) == "cpu"
    monkeypatch.delenv("LEMMACHECK_DEVICE_MIN_COST")
    # a quantity's declared cost replaces the default estimate
    monkeypatch.setitem(QUANTITIES.get(claim.check.quantity).extra, "cost", lambda p, r: 1e20 if p["m"] > 32 else 0)
    assert shards.placement(claim, small, 50) == "cuda"
    assert shards.placement(claim, dict(small, m=16), 50) == "cpu"


def test_placement_gain_finds_the_threshold_the_measured_shards_favour():
    """The device check's reading of two runs: configurations cheap on the CPU below some cost, on the GPU above."""
    def cfg(cost, seconds, drawn=10):
        return {"cost": cost, "seconds": seconds, "drawn": drawn, "config": ({"c": cost}, 0)}

    cpu = {("a", 0): cfg(1e6, 0.1), ("a", 1): cfg(1e8, 1.0), ("a", 2): cfg(1e10, 10.0), ("a", 3): cfg(1e12, 100)}
    gpu = {("a", 0): cfg(1e6, 2.0), ("a", 1): cfg(1e8, 2.0), ("a", 2): cfg(1e10, 2.0, drawn=20),
           ("a", 3): cfg(1e12, 2.0)}
    res = placement_gain(cpu, gpu, 1e9)
    assert res["cpu_s"] == 111.1 and res["gpu_s"] == 7.0  # the GPU's 2 s over 20 draws, at the CPU's 10 draws
    assert res["best_threshold"] == 1e10 and res["best_s"] == 1.1 + 1.0 + 2.0
    assert res["placed_s"] == res["best_s"] and res["on_gpu_at_threshold"] == 2
    assert placement_gain(cpu, gpu, float("inf"))["placed_s"] == res["cpu_s"]


def _standin_executes(monkeypatch):
    """runner's execute_shard with every shard placed off the CPU run under the stand-in device."""
    import contextlib

    from standin_device import StandInDevice

    from lemmacheck import shards

    def execute(task, device=None):
        with StandInDevice() if task.device not in ("", "cpu") else contextlib.nullcontext():
            return shards.execute_shard(task, device)

    monkeypatch.setattr(runner, "execute_shard", execute)


def _stored(store, run_id, claim):
    out = {}
    for c in store.configs(run_id, claim.id):
        shards = list(store.shards(run_id, claim.id, c["index"]))
        out[c["index"]] = (c["params"], [s.device for s in shards], np.concatenate([s.value for s in shards]))
    return out


def test_a_placed_run_records_each_shards_device_and_reproduces(monkeypatch, tmp_path):
    """A run on the stand-in device (cpu:0: its own generator, as a GPU's differs from the CPU's) with placement:
    each shard's row names where it ran (small configurations on the CPU, the wide one on the device); the CPU's
    configurations draw exactly what a CPU run draws, the device's other numbers; the run, a resumed run (under
    another threshold) and `repro` give the same values."""
    from standin_device import STANDIN

    from lemmacheck.shards import placement
    from lemmacheck.store import Store

    claim = _claim("zou2018/theorem-5.1-i-layer-output-norm.toml")
    _standin_executes(monkeypatch)
    monkeypatch.setenv("LEMMACHECK_DEVICE", "cpu")
    cpu_store = Store(":memory:")
    cpu = _stored(cpu_store, runner.run_claims([claim], cpu_store, profile="quick", seed=0), claim)
    monkeypatch.setenv("LEMMACHECK_DEVICE", str(STANDIN))
    monkeypatch.setenv("LEMMACHECK_DEVICE_MIN_COST", "1e9")  # m = 2048 (4.2e9) on the device; m <= 256 on the CPU
    store = Store(tmp_path / "placed.db")
    run_id = runner.run_claims([claim], store, profile="quick", seed=0)
    placed = _stored(store, run_id, claim)
    where = {j: set(devs) for j, (_, devs, _) in placed.items()}
    assert where == {j: {placement(claim, params, 50)} for j, (params, _, _) in placed.items()}
    assert sorted(map(min, where.values())) == ["cpu", "cpu", str(STANDIN)]
    for j, (params, devs, values) in placed.items():
        assert np.array_equal(values, cpu[j][2]) == (devs[0] == "cpu")  # the device draws other numbers
    again = Store(":memory:")
    assert {j: v[2].tolist() for j, v in _stored(again, runner.run_claims([claim], again, profile="quick", seed=0),
                                                 claim).items()} == {j: v[2].tolist() for j, v in placed.items()}
    # resumed after losing each configuration's last shard, under a threshold that would now place all on the
    # CPU: the missing shards run where their configuration's stored ones did
    wide = next(j for j, w in where.items() if w != {"cpu"})
    assert len(placed[wide][1]) > 1
    store.db.execute("DELETE FROM shards WHERE run_id=? AND shard_index=?", (run_id, len(placed[wide][1]) - 1))
    store.db.execute("UPDATE runs SET finished=NULL WHERE run_id=?", (run_id,))
    monkeypatch.setenv("LEMMACHECK_DEVICE_MIN_COST", "inf")
    assert runner.run_claims([claim], store, profile="quick", seed=0, resume=True) == run_id
    resumed = _stored(store, run_id, claim)
    assert {j: (v[1], v[2].tolist()) for j, v in resumed.items()} == {j: (v[1], v[2].tolist())
                                                                       for j, v in placed.items()}
    # repro of the wide configuration, placed as the run placed it
    monkeypatch.setenv("LEMMACHECK_DEVICE_MIN_COST", "1e9")
    params, devs, values = placed[wide]
    seed = store.configs(run_id, claim.id)[wide]["seed"]
    rstore = Store(":memory:")
    runner.repro(claim, params, seed, len(values), 50, store=rstore)
    rid = rstore.latest_run()
    assert _stored(rstore, rid, claim)[0][1] == devs
    assert np.array_equal(_stored(rstore, rid, claim)[0][2], values)


def test_a_resumed_fixed_size_configuration_draws_its_missing_shards_where_its_stored_ones_ran(monkeypatch,
                                                                                                 tmp_path):
    """The same as above for configurations that draw all their shards at once (no early stop): after losing a
    wide configuration's last shard, a resume under a threshold that would now place it on the CPU runs it on the
    device its stored shards ran on (Store.config_device), so the values equal the uninterrupted run's."""
    import copy

    from standin_device import STANDIN

    from lemmacheck.claims import parse_claim
    from lemmacheck.store import Store

    base = _claim("zou2018/theorem-5.1-i-layer-output-norm.toml")
    raw = copy.deepcopy(base.raw)
    raw["profiles"]["quick"]["early_stop"] = False
    claim = parse_claim(raw, base.source)
    _standin_executes(monkeypatch)
    monkeypatch.setenv("LEMMACHECK_DEVICE", str(STANDIN))
    monkeypatch.setenv("LEMMACHECK_DEVICE_MIN_COST", "1e9")
    store = Store(tmp_path / "placed.db")
    run_id = runner.run_claims([claim], store, profile="quick", seed=0)
    placed = _stored(store, run_id, claim)
    wide = next(j for j, (_, devs, _) in placed.items() if set(devs) == {str(STANDIN)})
    assert len(placed[wide][1]) > 1
    store.db.execute("DELETE FROM shards WHERE run_id=? AND config_index=? AND shard_index=?",
                     (run_id, wide, len(placed[wide][1]) - 1))
    store.db.execute("UPDATE runs SET finished=NULL WHERE run_id=?", (run_id,))
    monkeypatch.setenv("LEMMACHECK_DEVICE_MIN_COST", "inf")
    assert runner.run_claims([claim], store, profile="quick", seed=0, resume=True) == run_id
    resumed = _stored(store, run_id, claim)
    assert resumed[wide][1] == placed[wide][1] and resumed[wide][2].tolist() == placed[wide][2].tolist()


# ---------------------------------------------------------------------------------------- linalg on the device


def test_spectral_ball_projection_and_large_norms_stay_on_the_device():
    """`linalg.clip_spectral` (the searches' projections) and `spectral_norm`'s certified block Krylov path on a
    device tensor: no tensor goes to numpy (the stand-in counts every conversion), and the values are the host
    paths' to rounding."""
    from standin_device import STANDIN, StandInDevice

    from lemmacheck import linalg as la

    g = torch.Generator().manual_seed(5)
    D = torch.randn(3, 40, 24, generator=g, dtype=torch.float64)
    W = torch.randn(300, 200, generator=g, dtype=torch.float64)
    u, v = torch.randn(300, 1, generator=g, dtype=torch.float64), torch.randn(1, 200, generator=g, dtype=torch.float64)
    W += 5 * 300 ** 0.5 * (u / u.norm()) @ (v / v.norm())  # a separated top: the Krylov path certifies it
    host_clip = la.clip_spectral(D, 4.0)
    host_wide = la.clip_spectral(D.transpose(-1, -2), 4.0)
    host_norm, host_how = la.spectral_norm(W, exact_max=64)
    assert "krylov" in host_how
    with StandInDevice() as mode:
        Dd, Wd = D.clone().to(STANDIN), W.clone().to(STANDIN)  # device tensors
        assert not la.on_host(Dd)
        clip, wide = la.clip_spectral(Dd, 4.0), la.clip_spectral(Dd.transpose(-1, -2), 4.0)
        norm, how = la.spectral_norm(Wd, exact_max=64)
        assert mode.seen == 0
    torch.testing.assert_close(clip, host_clip, rtol=0, atol=1e-12)
    torch.testing.assert_close(wide, host_wide, rtol=0, atol=1e-12)
    assert how == host_how and abs(float(norm) - float(host_norm)) <= 1e-12 * float(host_norm)
    assert float(norm) >= float(torch.linalg.svdvals(W)[0])
