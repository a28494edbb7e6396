"""Benchmarks (pytest-benchmark): each lemmacheck estimator against a straightforward implementation of the same
Monte-Carlo (tests/references.py: one network at a time, full matrices, matrix_norm(ord=2), autograd), same run.

    python -m pytest tests/test_benchmarks.py --benchmark-enable --benchmark-group-by=group

runs them at the sizes of issue 15 (about 10 minutes on one idle core; add `--benchmark-timer time.process_time` on
a loaded machine) and prints, after the run, a table of seconds per replicate, the ratio, and each implementation's
GFLOP/s against the machine's float64 GEMM measured in the same run (LEMMACHECK_BENCH_OUT=FILE also writes it). In the default test run (--benchmark-disable) every benchmark runs once at small sizes as a correctness check
(both implementations must agree) and the file stays cheap. Everything runs with one BLAS thread, as shards do.
LEMMACHECK_BENCH=wide (with --benchmark-enable) runs the wide sizes (WIDE: m = 4096-8192) that regime paths and
log-factor sweeps reach, the "lemmacheck (cuda)" rows included; --bench-device cuda|cpu|auto adds or drops those rows
(GPU/CPU ratio), --bench-device standin runs them on the stand-in device of tests/standin_device.py (a check of their
code on a machine without CUDA; their times mean nothing). No test asserts a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

import pytest
import torch
from plugins import paper
from references import (
    autograd_gd_second_order,
    autograd_gradient_descent,
    loop_du_last_layer_gram_lambda_min,
    loop_forward_perturbation,
    loop_max_layer_output_norm,
    loop_max_weight_spectral_norm,
    loop_rnn_max_hidden_norm_ratio,
)
from torch.utils.flop_counter import FlopCounterMode

import lemmacheck.builtin  # noqa: F401  (registers the estimators)
from lemmacheck import kernels
from lemmacheck import linalg as la
from lemmacheck.context import Context
from lemmacheck.registry import QUANTITIES

rnn = paper("allenzhu2018").network
du2018 = paper("du2018").network
net = paper("zou2018").network
zq = paper("zou2018").quantities

# issue 15's sizes (--benchmark-enable or LEMMACHECK_BENCH=issue) and the cheap ones of the default test run.
# `base_R`: replicates the straightforward loop runs (its time is linear in them: reported per replicate).
ISSUE = {
    "forward": {"m": 2048, "L": 10, "n": 16, "d": 64, "R": 64, "base_R": 16},
    "spectral": {"m": 2048, "L": 10, "R": 64, "base_R": 1},
    "perturbation": {"m": 1024, "L": 5, "n": 8, "d": 32, "R": 1, "base_R": 1, "steps": 20},
    "tracked": {"m": 2048, "L": 2, "n": 4, "d": 16, "R": 1, "steps": 15},
    "ntk": {"m": 1024, "H": 3, "n": 32, "d": 16, "R": 8, "base_R": 2},
    "rnn": {"m": 1024, "L": 20, "n": 8, "dx": 16, "R": 16, "base_R": 4},
    "gd": {"m": 512, "H": 4, "n": 8, "d": 16, "R": 2, "base_R": 1, "steps": 200},
    "gd-terms": {"m": 512, "H": 4, "n": 8, "d": 16, "R": 2, "base_R": 1, "steps": 200},
    "drawn-norm": {"m": 4096},
    "gram": {"m": 1024, "d": 4096, "R": 4},
    "top-eig": {"m": 1024, "R": 4},
    "op-norm": {"m": 256, "R": 32},
    "gemm": {"k": 2048},
}
CI = {
    "forward": {"m": 256, "L": 3, "n": 8, "d": 16, "R": 4, "base_R": 4},
    "spectral": {"m": 128, "L": 2, "R": 4, "base_R": 2},
    "perturbation": {"m": 32, "L": 2, "n": 3, "d": 8, "R": 2, "base_R": 2, "steps": 3},
    "tracked": {"m": 160, "L": 2, "n": 3, "d": 8, "R": 2, "steps": 3},
    "ntk": {"m": 64, "H": 2, "n": 6, "d": 8, "R": 2, "base_R": 2},
    "rnn": {"m": 64, "L": 5, "n": 3, "dx": 6, "R": 2, "base_R": 2},
    "gd": {"m": 64, "H": 3, "n": 4, "d": 8, "R": 2, "base_R": 2, "steps": 5},
    "gd-terms": {"m": 48, "H": 3, "n": 4, "d": 8, "R": 2, "base_R": 2, "steps": 4},
    "drawn-norm": {"m": 700},
    "gram": {"m": 128, "d": 600, "R": 2},
    "top-eig": {"m": 96, "R": 3},
    "op-norm": {"m": 70, "R": 3},
    "gemm": {"k": 256},
}
# The widths regime paths and log-factor sweeps reach (LEMMACHECK_BENCH=wide, with --benchmark-enable): each family
# at m = 4096-8192 where the straightforward loop still finishes in minutes on one core (the perturbation search
# at L = 2 and 5 ascent steps; GD at H = 2 and 20 steps).
WIDE = {
    "forward": {"m": 8192, "L": 10, "n": 16, "d": 64, "R": 16, "base_R": 1},
    "spectral": {"m": 4096, "L": 4, "R": 16, "base_R": 1},
    "perturbation": {"m": 2048, "L": 2, "n": 4, "d": 16, "R": 1, "base_R": 1, "steps": 5},
    "tracked": {"m": 4096, "L": 2, "n": 4, "d": 16, "R": 1, "steps": 15},
    "ntk": {"m": 8192, "H": 3, "n": 32, "d": 16, "R": 4, "base_R": 1},
    "rnn": {"m": 4096, "L": 20, "n": 8, "dx": 16, "R": 4, "base_R": 1},
    "gd": {"m": 4096, "H": 2, "n": 8, "d": 16, "R": 1, "base_R": 1, "steps": 20},
    "gd-terms": {"m": 4096, "H": 2, "n": 8, "d": 16, "R": 1, "base_R": 1, "steps": 20},
    "drawn-norm": {"m": 8192},
    "gram": {"m": 2048, "d": 8192, "R": 2},
    "top-eig": {"m": 4096, "R": 1},
    "op-norm": {"m": 1024, "R": 4},
    "gemm": {"k": 2048},
}
RESULTS: dict[str, dict[str, dict[str, float]]] = {}  # group -> impl -> {"s_per_rep", "gflops"}
SIZES = {"name": "ci"}  # which of the size sets ran (the table's header says)


def _issue_sizes(config: pytest.Config) -> bool:
    return bool(config.getoption("benchmark_enable", False)) or os.environ.get("LEMMACHECK_BENCH") == "issue"


def _sizes(config: pytest.Config) -> str:
    if os.environ.get("LEMMACHECK_BENCH") == "wide":
        return "wide"
    return "issue" if _issue_sizes(config) else "ci"


@pytest.fixture(scope="module")
def S(request):
    """The sizes every row of a group runs at, its device rows included."""
    SIZES["name"] = _sizes(request.config)
    return {"wide": WIDE, "issue": ISSUE, "ci": CI}[SIZES["name"]]


@pytest.fixture(scope="module", autouse=True)
def _ratio_table(request):
    """After the module: one line per group with both implementations, the ratio and GEMM fractions."""
    yield
    if not RESULTS:
        return
    text = _table()
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("\n" + text)


def _table() -> str:
    gemm = RESULTS.get("gemm", {}).get("float64 GEMM", {}).get("gflops", float("nan"))
    lines = [f"lemmacheck benchmarks (sizes: {SIZES['name']}; 1 BLAS thread; float64 GEMM {gemm:.1f} GFLOP/s in this run)",
             f"{'group':58s} {'impl':30s} {'s/replicate':>12s} {'ratio':>8s} {'GFLOP/s':>8s} {'of GEMM':>8s}"]
    for group, impls in RESULTS.items():
        if group == "gemm":
            continue
        for impl, rec in impls.items():
            # "lemmacheck (cuda)" against "straightforward"; "lemmacheck repro (CPU s)" against "straightforward
            # (CPU s)"; a "cuda" row also against its own implementation on the CPU (the GPU/CPU ratio, below)
            unit = impl[impl.rindex(" ("):] if impl.endswith(" s)") else ""
            base = impls.get("straightforward" + unit, {}).get("s_per_rep")
            ratio = base / rec["s_per_rep"] if base and not impl.startswith("straightforward") else float("nan")
            gf = rec.get("gflops", float("nan"))
            cpu = impls.get(impl.removesuffix(" (cuda)"), {}).get("s_per_rep") if impl.endswith(" (cuda)") else None
            gpu = f"  GPU/CPU {cpu / rec['s_per_rep']:.1f}x" if cpu else ""
            lines.append(f"{group[:58]:58s} {impl[:30]:30s} {rec['s_per_rep']:12.4g} {ratio:8.1f} {gf:8.2f} "
                         f"{gf / gemm:8.0%}{gpu}")
    return "\n".join(lines)


def _children_cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _flops(fn) -> int:
    with FlopCounterMode(display=False) as fc:
        fn()
    return fc.get_total_flops()


def _run(benchmark, group: str, impl: str, fn, replicates: int, rounds: int = 1, count_flops: bool = False):
    """Time fn (the benchmark fixture when enabled, one plain call otherwise) and record seconds per replicate."""
    if benchmark.disabled:
        t0 = time.perf_counter()
        out = benchmark(fn)
        seconds = time.perf_counter() - t0
    else:
        out = benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=0)
        seconds = benchmark.stats.stats.min
    rec = {"s_per_rep": seconds / replicates}
    if count_flops and not benchmark.disabled:
        rec["gflops"] = _flops(fn) / seconds / 1e9
    _record(group, impl, rec)
    benchmark.extra_info.update(replicates=replicates, seconds_per_replicate=rec["s_per_rep"])
    return out


def _record(group: str, impl: str, rec: dict[str, float]) -> None:
    RESULTS.setdefault(group, {})[impl] = rec
    out = os.environ.get("LEMMACHECK_BENCH_OUT")
    if out:  # rewritten after every measurement, so a killed run keeps what it measured
        with open(out, "a" if os.environ.get("LEMMACHECK_BENCH_APPEND") else "w") as fh:
            fh.write(json.dumps({"group": group, "impl": impl, **rec}) + "\n" if os.environ.get(
                "LEMMACHECK_BENCH_APPEND") else _table() + "\n")


def _ctx(params, R, seed, inputs=None, args=None, search="none", device="cpu"):
    spec = {"kind": "unit-sphere", "n": "n", "d": "d"} if inputs is None else inputs
    return Context("bench", {k: float(v) for k, v in params.items()}, R, torch.Generator(device).manual_seed(seed),
                   device=torch.device(device), args=args or {}, inputs_spec=spec, search=search)


@contextlib.contextmanager
def _on(device: str):
    """As a shard runs on `device`: factory calls allocate there (shards.execute_shard); on the stand-in device its
    checks apply (a device tensor read into numpy, or mixed with a CPU tensor, raises)."""
    if device == "cpu":
        yield
        return
    from standin_device import STANDIN, StandInDevice

    with StandInDevice() if device == str(STANDIN) else contextlib.nullcontext(), torch.device(device):
        yield


def _on_device(fn, device: str):
    """fn run as a shard runs it on `device`, the clock stopped once the device is done; its result on the CPU."""
    def run():
        with _on(device):
            out = fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return tuple(o.cpu() for o in out) if isinstance(out, tuple) else out.cpu()
    return run


def _estimator(name, params, R, seed, device="cpu", **kw):
    """The registered estimator as a shard runs it: on a GPU its generator and factory calls are on the device
    (shards.execute_shard), and the clock stops once the device is done."""
    return _on_device(lambda: QUANTITIES.get(name).obj(_ctx(params, R, seed, device=device, **kw)).value, device)


def _device_of(impl: str, config: pytest.Config) -> str:
    """"cpu", or the device of a "... (cuda)" row: "cuda" where CUDA exists (unless --bench-device cpu), the
    stand-in device with --bench-device standin, else skipped with the reason."""
    if not impl.endswith("(cuda)"):
        return "cpu"
    asked = config.getoption("bench_device", "auto")  # tests/conftest.py declares --bench-device
    if asked == "cpu":
        pytest.skip("--bench-device cpu: GPU rows not asked for")
    if asked == "standin":
        from standin_device import STANDIN

        return str(STANDIN)
    if not torch.cuda.is_available():
        pytest.skip(f"no CUDA device here (torch {torch.__version__}, CUDA not available): the GPU/CPU ratio "
                    "needs a GPU (--bench-device standin checks the rows' code on the CPU)")
    return "cuda"


def _unit(R, n, d, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(R, n, d, generator=g, dtype=torch.float64), dim=-1)


IMPLS = ["straightforward", "lemmacheck"]
# the estimators a shard runs on the device: each also as "lemmacheck (cuda)", with its GPU/CPU ratio in the table
DEVICE_IMPLS = [*IMPLS, "lemmacheck (cuda)"]


@pytest.mark.benchmark(group="gemm")
def test_bench_gemm_throughput(benchmark, S):
    """The machine's float64 matmul throughput, measured in this run: the yardstick for GFLOP/s fractions."""
    k = S["gemm"]["k"]
    A = torch.randn(k, k, dtype=torch.float64)
    C = _run(benchmark, "gemm", "float64 GEMM", lambda: A @ A, 1, rounds=5, count_flops=True)
    assert C.shape == (k, k)


@pytest.mark.benchmark(group="forward norms at init (zou2018 Thm 5.1 (i))")
@pytest.mark.parametrize("impl", DEVICE_IMPLS)
def test_bench_forward_norms_at_init(benchmark, S, impl, request):
    device = _device_of(impl, request.config)
    c = S["forward"]
    dims = net.widths(c["d"], c["m"], c["L"])
    params = {"m": c["m"], "L": c["L"], "n": c["n"], "d": c["d"]}
    group = "forward norms at init (zou2018 Thm 5.1 (i))"
    if impl == "straightforward":
        X = _unit(c["base_R"], c["n"], c["d"], 0)
        out = _run(benchmark, group, impl, lambda: loop_max_layer_output_norm(torch.Generator().manual_seed(1), X,
                                                                              dims), c["base_R"])
    else:
        out = _run(benchmark, group, impl, _estimator("max-layer-output-norm", params, c["R"], 1, device=device), c["R"],
                   rounds=3, count_flops=True)
    # Same law, different draws: under He init E||x_l||² = ||x_0||² = 1, and the max over n inputs and L
    # layers sits a little above 1.
    assert bool(((out > 0.8) & (out < 1.5 + 2 / c["m"] ** 0.25)).all())


@pytest.mark.benchmark(group="forward norms at init (zou2018 Thm 5.1 (i))")
def test_bench_forward_norms_whole_process(benchmark, S):
    """The whole `lemmacheck repro` process for the same configuration (start-up included), and `import torch`
    alone for scale."""
    c = S["forward"]
    params = json.dumps({"m": c["m"], "L": c["L"], "n": c["n"], "d": c["d"], "phi": 0.01, "delta": 0.1,
                         "alternate": 0})
    cmd = [sys.executable, "-m", "lemmacheck.cli", "repro", "zou2018/theorem-5.1-i/layer-output-norm", "--params",
           params, "--seed", "1", "--replicates", str(c["R"]), "--shard-size", str(c["R"]), "--claims", "claims"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    group = "forward norms at init (zou2018 Thm 5.1 (i))"
    cpu0 = _children_cpu()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    _record(group, "`import torch` alone (CPU s)", {"s_per_rep": (_children_cpu() - cpu0) / c["R"]})
    cpu0 = _children_cpu()
    done = _run(benchmark, group, "whole process (lemmacheck repro)",
                lambda: subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False), c["R"])
    # CPU seconds of the child, robust to other load on the machine (one call, or the benchmark's rounds)
    rounds = 1 if benchmark.disabled else max(1, len(benchmark.stats.stats.data))
    _record(group, "whole process repro (CPU s)", {"s_per_rep": (_children_cpu() - cpu0) / rounds / c["R"]})
    assert done.returncode == 0, done.stderr
    assert "zou2018/theorem-5.1-i/layer-output-norm" in done.stdout


# The straightforward Monte-Carlo of the forward-at-init claim as a process of its own: torch alone, one network
# at a time, full weight matrices (references.loop_max_layer_output_norm written out, so that its start-up is
# `import torch` and nothing of lemmacheck). Prints the per-network maxima as JSON.
STRAIGHTFORWARD_FORWARD = """
import itertools, json, sys
import torch
torch.set_num_threads(1)
m, L, n, d, R, seed = map(int, sys.argv[1:7])
gen = torch.Generator().manual_seed(seed)
X = torch.nn.functional.normalize(torch.randn(R, n, d, generator=gen, dtype=torch.float64), dim=-1)
dims = [d] + [m] * L
out = []
for r in range(R):
    h, best = X[r], 0.0
    for a, b in itertools.pairwise(dims):
        h = torch.relu(h @ (torch.randn(a, b, generator=gen, dtype=torch.float64) * (2.0 / b) ** 0.5))
        best = max(best, float(h.norm(dim=-1).max()))
    out.append(best)
print(json.dumps(out))
"""


def _timed_process(cmd: list[str], cwd: str) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds, result) of one child process."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, _children_cpu() - cpu0, done


@pytest.mark.benchmark(group="forward at init, whole processes (zou2018 Thm 5.1 (i))")
def test_bench_forward_side_by_side_whole_processes(benchmark, S):
    """The side-by-side a user sees: a straightforward torch loop over the networks as one process against a
    `lemmacheck repro` process for the same configuration (start-up, claim lookup, verdict included), run
    alternately (LEMMACHECK_BENCH_ROUNDS pairs, default 2 at the issue's sizes) on a noisy machine; the minimum of
    each side's wall and CPU seconds is recorded (per network). The repro's seed and the loop's differ: the same
    law, other draws."""
    c = S["forward"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    params = json.dumps({"m": c["m"], "L": c["L"], "n": c["n"], "d": c["d"], "phi": 0.01, "delta": 0.1,
                         "alternate": 0})
    repro = [sys.executable, "-m", "lemmacheck.cli", "repro", "zou2018/theorem-5.1-i/layer-output-norm", "--params",
             params, "--seed", "1", "--replicates", str(c["R"]), "--shard-size", str(c["R"]), "--claims", "claims"]
    loop = [sys.executable, "-c", STRAIGHTFORWARD_FORWARD, *map(str, (c["m"], c["L"], c["n"], c["d"], c["R"], 1))]
    rounds = int(os.environ.get("LEMMACHECK_BENCH_ROUNDS", "1" if benchmark.disabled else "2"))
    times: dict[str, list[tuple[float, float]]] = {"loop": [], "repro": []}
    outs: dict[str, subprocess.CompletedProcess] = {}

    def alternate():
        for _ in range(rounds):
            for name, cmd in (("loop", loop), ("repro", repro)):
                wall, cpu, outs[name] = _timed_process(cmd, root)
                times[name].append((wall, cpu))
    benchmark.pedantic(alternate, rounds=1, iterations=1, warmup_rounds=0)
    group = "forward at init, whole processes (zou2018 Thm 5.1 (i))"
    for name, label in (("loop", "straightforward"), ("repro", "lemmacheck repro")):
        _record(group, f"{label} (wall s)", {"s_per_rep": min(w for w, _ in times[name]) / c["R"]})
    for name, label in (("loop", "straightforward"), ("repro", "lemmacheck repro")):
        _record(group, f"{label} (CPU s)", {"s_per_rep": min(u for _, u in times[name]) / c["R"]})
    assert outs["loop"].returncode == 0, outs["loop"].stderr
    assert outs["repro"].returncode == 0, outs["repro"].stderr
    assert "zou2018/theorem-5.1-i/layer-output-norm" in outs["repro"].stdout
    maxima = torch.tensor(json.loads(outs["loop"].stdout), dtype=torch.float64)
    # the process computes what the oracle computes (same generator stream, same order of draws)
    if benchmark.disabled:
        gen = torch.Generator().manual_seed(1)
        X = torch.nn.functional.normalize(torch.randn(c["R"], c["n"], c["d"], generator=gen, dtype=torch.float64),
                                          dim=-1)
        ref = loop_max_layer_output_norm(gen, X, [c["d"]] + [c["m"]] * c["L"])
        torch.testing.assert_close(maxima, ref, rtol=1e-12, atol=0)
    assert bool(((maxima > 0.8) & (maxima < 1.5 + 2 / c["m"] ** 0.25)).all())


@pytest.mark.benchmark(group="weight spectral norms at init (zou2018 Thm 5.1 (i))")
@pytest.mark.parametrize("impl", DEVICE_IMPLS)
def test_bench_weight_spectral_norms(benchmark, S, impl, request):
    device = _device_of(impl, request.config)
    c = S["spectral"]
    group = "weight spectral norms at init (zou2018 Thm 5.1 (i))"
    if impl == "straightforward":
        dims = net.widths(c["m"], c["m"], c["L"])
        out = _run(benchmark, group, impl,
                   lambda: loop_max_weight_spectral_norm(torch.Generator().manual_seed(2), c["base_R"], dims),
                   c["base_R"])
    else:
        params = {"m": c["m"], "L": c["L"], "n": 1, "d": c["m"]}
        out = _run(benchmark, group, impl, _estimator("max-weight-spectral-norm", params, c["R"], 2, device=device), c["R"],
                   rounds=3)
    # square m×m with N(0, 2/m) entries: ||W|| -> 2 sqrt(2) (Bai-Yin), max over L layers a little above it
    assert bool(((out > 2.5) & (out < 3.4)).all())


@pytest.mark.benchmark(group="Gram of masked products, m x d (zou2018 Thm 5.1 (v): spectral norms)")
@pytest.mark.parametrize("impl", IMPLS)
def test_bench_gram_of_products(benchmark, S, impl):
    """The Gram whose top eigenvalue `spectral_norm` takes, for a batch of m x d products (d = 4m, as Theorem 5.1
    (v)'s costliest configuration): the batched product W W^T, against `linalg.gram` (syrk, one matrix at a time)."""
    c = S["gram"]
    group = "Gram of masked products, m x d (zou2018 Thm 5.1 (v): spectral norms)"
    W = torch.randn(c["R"], c["m"], c["d"], generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    fn = {"straightforward": lambda: W @ W.transpose(-1, -2), "lemmacheck": lambda: la.gram(W)}[impl]
    G = _run(benchmark, group, impl, fn, c["R"])
    ref = W @ W.transpose(-1, -2)
    assert bool(((G - ref).abs().amax((-1, -2)) <= 2 * la.gram_rounding_bound(W)).all())


@pytest.mark.benchmark(group="top eigenvalue of an m x m Gram (spectral_norm's eigensolve)")
@pytest.mark.parametrize("impl", IMPLS)
def test_bench_top_eigenvalue(benchmark, S, impl):
    """The largest eigenvalue of a batch of Grams, as `spectral_norm` takes it: torch's eigvalsh (all m eigenvalues)
    against `linalg.top_eigenvalue` (LAPACK syevx, bisection for the one value)."""
    c = S["top-eig"]
    group = "top eigenvalue of an m x m Gram (spectral_norm's eigensolve)"
    W = torch.randn(c["R"], c["m"], 2 * c["m"], generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    G = la.gram(W)
    fn = {"straightforward": lambda: torch.linalg.eigvalsh(G)[..., -1], "lemmacheck": lambda: la.top_eigenvalue(G)}[impl]
    top = _run(benchmark, group, impl, fn, c["R"])
    ref = torch.linalg.eigvalsh(G)[..., -1]
    assert bool(((top - ref).abs() <= la.gram_rounding_bound(W)).all())


def _masked_products(R: int, m: int) -> torch.Tensor:
    """R products D W D W of a Gaussian m x m W (variance 2/m) with random 0/1 diagonal masks, (R, m, m)."""
    gen = torch.Generator().manual_seed(7)
    W = torch.randn(R, m, m, generator=gen, dtype=torch.float64) * (2 / m) ** 0.5
    D = (torch.randn(R, 2, m, 1, generator=gen, dtype=torch.float64) > 0).to(torch.float64)
    return D[:, 1] * (W @ (D[:, 0] * W))


@pytest.mark.benchmark(group="operator norm of masked products (allenzhu2018 Lemma B.11: segment norms)")
@pytest.mark.parametrize("impl", IMPLS)
def test_bench_operator_norm(benchmark, S, impl):
    """||D W D W||_2 for a batch of masked m x m products (half the rows of each factor zeroed), as allenzhu2018's
    segment norms and guo2024's product norms take them: the SVD against `linalg.operator_norm` (the Gram's top
    eigenvalue, rounded up)."""
    c = S["op-norm"]
    group = "operator norm of masked products (allenzhu2018 Lemma B.11: segment norms)"
    P = _masked_products(c["R"], c["m"])
    fn = {"straightforward": lambda: torch.linalg.matrix_norm(P, ord=2), "lemmacheck": lambda: la.operator_norm(P)}[impl]
    out = _run(benchmark, group, impl, fn, c["R"])
    exact = torch.linalg.matrix_norm(P, ord=2)
    assert bool((out >= exact).all()) and bool(((out - exact) / exact <= 1e-11).all())


@pytest.mark.benchmark(group="differentiated operator norm of masked products (guo2024 Lemma B.5 (2) ascent)")
@pytest.mark.parametrize("impl", IMPLS)
def test_bench_operator_norm_gradient(benchmark, S, impl):
    """The value and gradient of ||D W D W||_2 for the same batch, as an ascent that differentiates a product norm
    takes them (guo2024 Lemma B.5 (2), allenzhu2018 Lemma C.7 (ii)): the SVD's autograd against
    `linalg.operator_norm`'s top singular pair from the Gram's top eigenpair."""
    c = S["op-norm"]
    group = "differentiated operator norm of masked products (guo2024 Lemma B.5 (2) ascent)"
    P = _masked_products(c["R"], c["m"])
    norm = {"straightforward": lambda M: torch.linalg.matrix_norm(M, ord=2), "lemmacheck": la.operator_norm}[impl]

    def value_and_gradient():
        M = P.clone().requires_grad_()
        value = norm(M)
        value.sum().backward()
        return value.detach(), M.grad

    out, grad = _run(benchmark, group, impl, value_and_gradient, c["R"])
    Mr = P.clone().requires_grad_()
    ref = torch.linalg.matrix_norm(Mr, ord=2)
    ref.sum().backward()
    assert bool(((out - ref.detach()).abs() / ref.detach() <= 1e-11).all())
    assert float((grad - Mr.grad).abs().max()) <= 1e-9 * float(Mr.grad.abs().max())


@pytest.mark.benchmark(group="spectral norm of a drawn m x m Gaussian (search starts; allenzhu2018 Lemma C.9 (b))")
@pytest.mark.parametrize("impl", [*IMPLS, "dense Gram eigvalsh", "lemmacheck (cuda)", "dense Gram eigvalsh (cuda)"])
def test_bench_drawn_matrix_spectral_norm(benchmark, S, impl, request):
    """One drawn matrix's ||W||_2, as a search scales its Gaussian starts onto the sphere: the SVD, the dense
    eigensolver of the Gram, and `linalg.spectral_norm`'s certified block Krylov (above EXACT_SVD_MAX; the CI size
    lowers the threshold to reach that path); the last two also on the device (Gram, Krylov passes, Cholesky and
    eigvalsh there)."""
    device = _device_of(impl, request.config)
    c = S["drawn-norm"]
    group = "spectral norm of a drawn m x m Gaussian (search starts; allenzhu2018 Lemma C.9 (b))"
    W = torch.randn(c["m"], c["m"], generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    exact_max = min(la.EXACT_SVD_MAX, c["m"] // 4)
    with _on(device):
        Wd = W.to(device)
    fn = {"straightforward": lambda: torch.linalg.matrix_norm(W, ord=2),
          "dense Gram eigvalsh": lambda: la.spectral_norm(W, exact_max=c["m"])[0],
          "lemmacheck": lambda: la.spectral_norm(W, exact_max=exact_max)[0],
          "lemmacheck (cuda)": _on_device(lambda: la.spectral_norm(Wd, exact_max=exact_max)[0], device),
          "dense Gram eigvalsh (cuda)": _on_device(lambda: la.spectral_norm(Wd, exact_max=c["m"])[0], device)}[impl]
    out = float(_run(benchmark, group, impl, fn, 1))
    exact = float(torch.linalg.svdvals(W)[0]) if c["m"] <= 1024 else out
    assert exact <= out <= exact * (1 + 1e-9)  # the CI size checks each against the SVD
    assert 1.9 < out / c["m"] ** 0.5 < 2.1  # Bai-Yin: ||W|| ~ 2 sqrt(m)


@pytest.mark.benchmark(group="forward perturbation, adversarial search (zou2018 Lemma B.2)")
@pytest.mark.parametrize("impl", DEVICE_IMPLS)
def test_bench_forward_perturbation_adversarial(benchmark, S, impl, request):
    device = _device_of(impl, request.config)
    c = S["perturbation"]
    group = "forward perturbation, adversarial search (zou2018 Lemma B.2)"
    tau = 0.5 / c["m"] ** 0.5 * 4
    params = {"m": c["m"], "L": c["L"], "n": c["n"], "d": c["d"], "tau": tau}
    if impl == "straightforward":
        cx = _ctx(params, c["base_R"], 3)
        X = cx.inputs()
        Ws = net.init(cx.generator, c["base_R"], net.widths(c["d"], c["m"], c["L"]))
        out = _run(benchmark, group, impl, lambda: loop_forward_perturbation(torch.Generator().manual_seed(4), Ws,
                                                                             X, tau, c["steps"]), c["base_R"])
    else:
        out = _run(benchmark, group, impl, _estimator("forward-perturbation", params, c["R"], 3, device=device,
                                                      search="adversarial", args={"steps": c["steps"]}),
                   c["R"], count_flops=True)
    # a search's lower estimate of the sup: positive, and below the trivial bound (1 + tau)^L - 1 (times 1.5²)
    assert bool(((out > 0) & (out < 2.25 * ((1 + 3.5 * tau) ** c["L"] - 1) * 3)).all())


def _previous_tracked_stepper(tau: float):
    """The straightforward form of zou2018's tracked ascent (the reference of the tracked-starts benchmark): every
    ascent start's tracker diagonalises its own start's Gram (torch eigh), after search's `_scale_to` took the
    start's norm from another Gram eigensolve, and the tracker's iterate is compared with the one handed back."""
    from lemmacheck.linalg import BallTracker
    from lemmacheck.search import BALLS

    project = BALLS["spectral"][1]
    trackers: dict = {}

    def step(Ds, moves):
        new = []
        for li, (D, move) in enumerate(zip(Ds, moves)):
            if min(D.shape[-2:]) < zq.TRACK_MIN or D.shape[-2] < D.shape[-1]:
                new.append(project(D + move, tau))
                continue
            out = torch.empty_like(D)
            for r in range(D.shape[0]):
                res = None
                ab = zq._rank_one(move[r])
                if ab is not None:
                    tr = trackers.get((li, r))
                    if tr is None or tr.D is not D[r] and not torch.equal(tr.D, D[r]):
                        tr = trackers[(li, r)] = BallTracker(D[r], tau)
                    res = tr.step(*ab)
                if res is None:
                    res = project((D[r] + move[r]).unsqueeze(0), tau)[0]
                    trackers.pop((li, r), None)
                out[r] = res
            new.append(out)
        return new

    return step


def _previous_maximise_tracked(target, Ws, tau, method, gen, steps=30, lr=0.3):
    """search.maximise with `_previous_tracked_stepper`; the starts' norms by `spectral_norm`'s Gram eigvalsh at every
    size (one eigensolve per start, as the previous implementation took them)."""
    from lemmacheck.linalg import spectral_norm
    from lemmacheck.search import maximise

    def scale(G, radius):
        return G * (radius / spectral_norm(G, exact_max=max(G.shape[-2:]))[0].clamp_min(1e-300)).reshape(-1, 1, 1)

    return maximise(target, Ws, tau, method, gen, steps=steps, lr=lr, scale=scale,
                    stepper=lambda: _previous_tracked_stepper(tau))


TRACKED: dict[str, torch.Tensor] = {}  # impl -> value, for the agreement check of the second implementation


@pytest.mark.benchmark(group="forward perturbation, tracked starts (zou2018 Lemma B.2)")
@pytest.mark.parametrize("impl", DEVICE_IMPLS)
def test_bench_forward_perturbation_tracked_starts(benchmark, S, impl, monkeypatch, request):
    """zou2018 Lemma B.2's adversarial search at a width where its O(m³) part shows (one eigensolver per start,
    layer and replicate, the Gram diagonalisation that scales the start onto the sphere and starts its tracker)
    against the same search taking the start's norm and its tracker's eigendecomposition separately (torch eigh):
    the same draws, values equal to 1e-10. The ratio goes into extra_info; no time is asserted. On the device
    (its own draws) the engine scales the starts and the trackers' eigensolves run there."""
    device = _device_of(impl, request.config)
    c = S["tracked"]
    group = "forward perturbation, tracked starts (zou2018 Lemma B.2)"
    params = {"m": c["m"], "L": c["L"], "n": c["n"], "d": c["d"], "tau": 0.1, "phi": 0.1}
    if impl == "straightforward":
        monkeypatch.setattr(zq, "maximise_tracked", _previous_maximise_tracked)
    out = _run(benchmark, group, impl, _estimator("forward-perturbation", params, c["R"], 3, search="adversarial",
                                                  args={"steps": c["steps"]}, device=device,
                                                  inputs={"kind": "unit-sphere", "n": "n", "d": "d",
                                                          "separation": "phi"}), c["R"])
    if device != "cpu":  # other draws: nothing to compare with
        assert bool((out > 0).all())
        return
    TRACKED[impl] = out
    other = TRACKED.get("straightforward" if impl == "lemmacheck" else "lemmacheck")
    if other is not None:
        torch.testing.assert_close(out, other, rtol=1e-10, atol=0)
        base = RESULTS[group].get("straightforward", {}).get("s_per_rep")
        if base and impl == "lemmacheck":
            benchmark.extra_info["ratio"] = base / RESULTS[group]["lemmacheck"]["s_per_rep"]
    assert bool((out > 0).all())


@pytest.mark.benchmark(group="NTK Gram least eigenvalue at init (du2018 FC, G^(H))")
@pytest.mark.parametrize("impl", DEVICE_IMPLS)
def test_bench_ntk_gram_least_eigenvalue(benchmark, S, impl, request):
    device = _device_of(impl, request.config)
    c = S["ntk"]
    group = "NTK Gram least eigenvalue at init (du2018 FC, G^(H))"
    act = kernels.get_activation("softplus")
    X = du2018.as_images(_unit(max(c["R"], c["base_R"]), c["n"], c["d"], 5))
    dn = du2018.make_net("fc", X, m=c["m"], H=c["H"], act=act)
    if impl == "straightforward":
        Xb = X[:c["base_R"]]
        out = _run(benchmark, group, impl,
                   lambda: loop_du_last_layer_gram_lambda_min(torch.Generator().manual_seed(6), dn, Xb), c["base_R"])
        # exact check on the same weights: the closed-form Gram equals autograd's J J^T
        Ws, a = du2018.init(torch.Generator().manual_seed(6), 1, dn, X.shape[2])
        ref = kernels.lambda_min(du2018.last_layer_gram(dn, Ws, a, Xb[:1]))
        torch.testing.assert_close(out[:1], ref, rtol=1e-8, atol=1e-12)
    else:
        with _on(device):  # the network and data where the shard's would be (its own draws on a device)
            Xd = X.to(device)
            dnd = dn if device == "cpu" else du2018.make_net("fc", Xd, m=c["m"], H=c["H"], act=act)

        def fast():
            smp = du2018.sample_init(torch.Generator(device).manual_seed(6), dnd, Xd[:c["R"]])
            return kernels.lambda_min(smp.gram_last)
        out = _run(benchmark, group, impl, fast if device == "cpu" else _on_device(fast, device), c["R"], rounds=3,
                   count_flops=True)
    assert bool((out > 0).all())


@pytest.mark.benchmark(group="RNN forward stability at init (allenzhu2018 Lemma B.3)")
@pytest.mark.parametrize("impl", DEVICE_IMPLS)
def test_bench_rnn_forward(benchmark, S, impl, request):
    device = _device_of(impl, request.config)
    c = S["rnn"]
    group = "RNN forward stability at init (allenzhu2018 Lemma B.3)"
    inputs = {"kind": "rnn-sequences", "n": "n", "L": "L", "dx": "dx", "separation": "delta", "tail": "random"}
    params = {"m": c["m"], "L": c["L"], "n": c["n"], "dx": c["dx"], "delta": 0.1}
    if impl == "straightforward":
        X = _ctx(params, c["base_R"], 7, inputs=inputs).inputs()
        out = _run(benchmark, group, impl,
                   lambda: loop_rnn_max_hidden_norm_ratio(torch.Generator().manual_seed(8), X, c["m"]), c["base_R"])
        # exact check on the same weights: the loop equals the batched network of src/
        g = torch.Generator().manual_seed(8)
        W = torch.randn(c["m"], c["m"], generator=g, dtype=torch.float64) * (2.0 / c["m"]) ** 0.5
        A = torch.randn(c["m"], c["dx"], generator=g, dtype=torch.float64) * (2.0 / c["m"]) ** 0.5
        fwd = rnn.forward(W[None], A[None], torch.zeros(1, 1, c["m"], dtype=torch.float64), X[:1])
        ell = torch.arange(c["L"], dtype=torch.float64)
        ref = (fwd.h.norm(dim=-1)[:, :, 1:] / (2 * ell + 4)).amax(dim=(-1, -2))
        torch.testing.assert_close(out[:1], ref, rtol=1e-10, atol=0)
    else:
        out = _run(benchmark, group, impl, _estimator("rnn-forward-norm-ratio", params, c["R"], 7, inputs=inputs, device=device,
                                                      args={"which": "h-upper"}), c["R"], rounds=3,
                   count_flops=True)
    assert bool(((out > 0) & (out < 1)).all())  # Lemma B.3's upper bound ||h_{l+1}|| <= 2l + 4 holds with room


def _gd_on(device: str, dn, Ws, a, X, y, r: int):
    """du2018's GD on the first r replicates as a shard on `device` runs it (the same weights: the same trajectory
    to rounding), timed until the device is done; the net rebuilt there from the data."""
    if device == "cpu":
        return dn, [w[:r] for w in Ws], a[:r], X[:r], y[:r]
    with _on(device):
        Xd = X.to(device)
        dnd = du2018.make_net("resnet", Xd, m=dn.m, H=dn.H, act=kernels.get_activation("softplus"))
        return dnd, [w[:r].to(device) for w in Ws], a[:r].to(device), Xd[:r], y[:r].to(device)


@pytest.mark.benchmark(group="GD trajectory (du2018 ResNet, Thm 4.1)")
@pytest.mark.parametrize("impl", DEVICE_IMPLS + ["gemm floor"])
def test_bench_du2018_gradient_descent(benchmark, S, impl, request):
    device = _device_of(impl, request.config)
    c = S["gd"]
    group = "GD trajectory (du2018 ResNet, Thm 4.1)"
    R = max(c["R"], c["base_R"])
    X = du2018.as_images(_unit(R, c["n"], c["d"], 9))
    dn = du2018.make_net("resnet", X, m=c["m"], H=c["H"], act=kernels.get_activation("softplus"))
    Ws, a = du2018.init(torch.Generator().manual_seed(10), R, dn, X.shape[2])
    y = torch.ones(R, c["n"], dtype=torch.float64)
    eta, T = 0.05, c["steps"]
    if impl == "gemm floor":
        # No implementation of GD can beat its own three BLAS passes per m×m weight and step (z = W x, δᵀW,
        # W ← W − η δ xᵀ) at these shapes: the same products on the same tensors with nothing else, so
        # straightforward / floor is the ceiling of the ratio on this machine.
        r = c["R"]
        mid = [w[:r].clone() for w in Ws[1:]]
        h = torch.randn(r, c["m"], c["n"], dtype=torch.float64, generator=torch.Generator().manual_seed(11))

        def floor():
            for _ in range(T):
                for w in mid:
                    torch.bmm(w, h)
                for w in mid:
                    torch.bmm(h.transpose(1, 2), w)
                for w in mid:
                    w.baddbmm_(h, h.transpose(1, 2), alpha=-1e-12)
            return mid[0]
        assert torch.isfinite(_run(benchmark, group, impl, floor, r)).all()
        return
    if impl == "straightforward":
        b = c["base_R"]
        loss = _run(benchmark, group, impl,
                    lambda: autograd_gradient_descent(dn, [w[:b] for w in Ws], a[:b], X[:b], y[:b], eta, T), b)
    else:
        # what Theorem 4.1's quantity (du2018-gd-loss-ratio) asks of the trajectory: the losses, as the baseline
        r = c["R"]
        dnd, Wd, ad, Xd, yd = _gd_on(device, dn, Ws, a, X, y, r)

        def gd():
            return du2018.gradient_descent(dnd, [w.clone() for w in Wd], ad, Xd, yd, eta, T, track_gram=False,
                                           track_movement=False, track_terms=False).loss
        loss = _run(benchmark, group, impl, gd if device == "cpu" else _on_device(gd, device), r, count_flops=True)
    # the same trajectory either way (deterministic GD from the same weights)
    ref = autograd_gradient_descent(dn, [w[:1] for w in Ws], a[:1], X[:1], y[:1], eta, min(T, 5))
    torch.testing.assert_close(loss[:1, :ref.shape[1]], ref, rtol=1e-9, atol=0)


@pytest.mark.benchmark(group="GD with eq. (7) terms (du2018 ResNet, Lemma B.6)")
@pytest.mark.parametrize("impl", DEVICE_IMPLS)
def test_bench_du2018_gd_second_order_terms(benchmark, S, impl, request):
    """What Lemma B.6's quantity (du2018-gd-second-order-ratio) reads along GD: I_1(k) = −η G(k)(u − y) needs the
    Gram of the per-sample gradients every step; ||I_2(k)|| = ||u(k+1) − u(k) − I_1(k)|| from both."""
    c = S["gd-terms"]
    group = "GD with eq. (7) terms (du2018 ResNet, Lemma B.6)"
    R = max(c["R"], c["base_R"])
    X = du2018.as_images(_unit(R, c["n"], c["d"], 9))
    dn = du2018.make_net("resnet", X, m=c["m"], H=c["H"], act=kernels.get_activation("softplus"))
    Ws, a = du2018.init(torch.Generator().manual_seed(10), R, dn, X.shape[2])
    y = torch.ones(R, c["n"], dtype=torch.float64)
    eta, T = 0.05, c["steps"]
    if impl == "straightforward":
        b = c["base_R"]
        i2 = _run(benchmark, group, impl,
                  lambda: autograd_gd_second_order(dn, [w[:b] for w in Ws], a[:b], X[:b], y[:b], eta, T), b)
    else:
        r = c["R"]
        device = _device_of(impl, request.config)
        dnd, Wd, ad, Xd, yd = _gd_on(device, dn, Ws, a, X, y, r)

        def fast():
            tr = du2018.gradient_descent(dnd, Wd, ad, Xd, yd, eta, T, track_gram=False, track_movement=False,
                                         track_terms=True)
            return (tr.du - tr.i1).norm(dim=-1)
        i2 = _run(benchmark, group, impl, fast if device == "cpu" else _on_device(fast, device), r, count_flops=True)
    ref = autograd_gd_second_order(dn, [w[:1] for w in Ws], a[:1], X[:1], y[:1], eta, min(T, 3))
    torch.testing.assert_close(i2[:1, :ref.shape[1]], ref, rtol=1e-6, atol=1e-15)

# --------------------------------------------------------------------------- batching and closed forms (small)


def _loop_forward(Ws, X):
    return torch.stack([net.forward([W[r:r + 1] for W in Ws], X[r:r + 1]).out[0] for r in range(X.shape[0])])


@pytest.mark.benchmark(group="forward, 64 replicates of m=64 L=4 n=16 (batching)")
@pytest.mark.parametrize("impl", ["loop-over-replicates", "batched"])
def test_bench_batched_forward(benchmark, impl):
    g = torch.Generator().manual_seed(2)
    X = _unit(64, 16, 32, 11)
    Ws = net.init(g, 64, [32, 64, 64, 64, 64])
    fn = _loop_forward if impl == "loop-over-replicates" else (lambda W, x: net.forward(W, x).out)
    out = benchmark(fn, Ws, X)
    torch.testing.assert_close(out, net.forward(Ws, X).out, rtol=1e-12, atol=1e-12)


def _autograd_grads(Ws, X, y):
    Wr = [W.clone().requires_grad_(True) for W in Ws]
    loss = net.logistic(y * net.forward(Wr, X).out).mean(-1).sum()
    return torch.autograd.grad(loss, Wr)


@pytest.mark.benchmark(group="loss gradients, m=256 L=3 n=32 R=8 (closed form)")
@pytest.mark.parametrize("impl", ["autograd", "closed-form"])
def test_bench_loss_gradients(benchmark, impl):
    g = torch.Generator().manual_seed(3)
    X = _unit(8, 32, 16, 12)
    Ws = net.init(g, 8, [16, 256, 256, 256])
    y = torch.ones(8, 32, dtype=torch.float64)
    fn = _autograd_grads if impl == "autograd" else (lambda W, x, t: net.loss_gradients(W, x, t)[0])
    grads = benchmark(fn, Ws, X, y)
    for a, b in zip(grads, _autograd_grads(Ws, X, y)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-14)
