"""Fixtures shared by the unit tests: tiny, fast claim files written into a temporary claims/ folder."""

from pathlib import Path

import numpy.fft  # noqa: F401
import pytest
import scipy.linalg
import scipy.optimize
import scipy.special
import scipy.stats  # noqa: F401
from plugins import CLAIMS, paper

# lemmacheck imports these lazily (start-up). pytester's in-process runs drop every module first imported inside
# them, and a C extension (numpy.fft's) cannot be loaded twice in one process: import them once, out here.

# In-process tests build toy claims on zou2018's network in temporary folders: load that plugin once here, so a
# test file passes alone as well as in the suite (subprocess tests get TOY_EXTENSION beside their claims).
paper("zou2018")

# The toy claims below use zou2018's network and quantities: a plugin of the toy folder reuses that paper's
# plugin, as a user's paper may reuse a shipped one (lemmacheck.claims.load_extension).
TOY_EXTENSION = f'''from pathlib import Path

from lemmacheck.claims import load_extension

load_extension(Path({str(CLAIMS / "zou2018")!r}))
'''

# A minimal valid claim: cheap quantity, two configurations, explicit constants.
NORM_CLAIM = '''
id        = "toy/lemma-1/norm"
paper     = "toy"
result    = "Lemma 1"
title     = "A toy norm bound"
statement = '\\|x_{l,i}\\|_2 \\le B'
kind      = "norm-at-init"
network   = "zou2018"
inputs    = { kind = "unit-sphere", n = "n", d = "d" }

[params]
m = { values = [16, 64] }
L = { min = 1, max = 4 }
n = { value = 3 }
d = { value = 8 }
B = { values = [1.5, 100.0, 0.5] }
delta = { value = 0.1 }

[check]
quantity    = "max-layer-output-norm"
relation    = "<="
bound       = "B"
probability = "1 - delta"
requires    = "m >= 32"

[profiles.quick]
replicates = 100
shard_size = 10
configs = [ { m = 16, L = 2, B = 100.0 }, { m = 64, L = 2, B = 100.0 } ]

[profiles.full]
replicates = 40
shard_size = 10
grid = { m = [16, 64], L = [1, 2] }
'''


@pytest.fixture
def claims_dir(tmp_path: Path) -> Path:
    d = tmp_path / "claims" / "toy"
    d.mkdir(parents=True)
    (d / "extension.py").write_text(TOY_EXTENSION)
    return d


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """Unit tests use small matrices: one BLAS thread is faster on a shared 2-core box and keeps timings
    out of each other's way (shards already run single-threaded in the runner)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_addoption(parser):
    # tests/test_benchmarks.py: the "lemmacheck (cuda)" rows run where CUDA exists (auto), or never (cpu); on a
    # machine without CUDA they are skipped with the reason either way, or run on the stand-in device (standin:
    # tests/standin_device.py, which fails where CUDA would: the rows' code checked, their times meaningless).
    parser.addoption("--bench-device", choices=("auto", "cpu", "cuda", "standin"), default="auto",
                     help="benchmarks: also time each device-capable estimator on CUDA (auto: where available; "
                     "standin: on the CPU's stand-in device, a check of the rows)")
