"""A test-only quantity that can kill the process running it, and claims using it (for the fault tests).

The quantity draws |N(0, 1)| values from the shard's generator, so a shard's values depend on its seed alone,
optionally sleeps (so a run can be killed mid-way), and SIGKILLs its own process the first time it runs a
configuration with k == kill_at (a marker file makes it happen once): a worker dying in the middle of a shard.
"""

from pathlib import Path

EXTENSION = '''
import os
import signal
import time
from pathlib import Path

import torch

from lemmacheck.context import Observation
from lemmacheck.registry import QUANTITIES


@QUANTITIES.register("{name}", "test only: |N(0,1)| draws; may kill its own process once", networks=("scalar",))
def draws(ctx):
    marker = ctx.arg("kill_marker", "")
    if marker and ctx.i("k") == ctx.arg("kill_at") and not Path(marker).exists():
        Path(marker).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(float(ctx.arg("sleep", 0.0)))
    fixed = ctx.arg("bug_fixed", "")
    if ctx.i("k") == ctx.arg("bug_at", -1) and not (fixed and Path(fixed).exists()):
        torch.zeros(2).numpy()[ctx.replicates + 5]  # a planted estimator bug: IndexError, until "fixed"
    return Observation(torch.randn(ctx.replicates, generator=ctx.generator, dtype=torch.float64).abs())
'''

CLAIM = '''
id = "fault/fact-1/draws"
paper = "fault"
result = "Fact 1"
title = "|N(0,1)| <= B with probability 1 - delta"
statement = '|g| \\\\le B'
kind = "test"
network = "scalar"
expect = "inconclusive"  # 8 draws cannot bound a violation rate below 1/2 at alpha = 1e-4
[params]
k = {{ min = 0, max = 100 }}
B = {{ value = 2.5 }}
delta = {{ value = 0.5 }}
[check]
quantity = "{name}"
relation = "<="
bound = "B"
probability = "1 - delta"
args = {{ kill_at = {kill_at}, kill_marker = "{marker}", sleep = {sleep}, bug_at = {bug_at}, bug_fixed = "{bug_fixed}" }}
[profiles.quick]
early_stop = false  # the fault tests count fixed shard sets (early stop would draw them one wave at a time)
replicates = {replicates}
shard_size = {shard_size}
grid = {{ k = {ks} }}
[profiles.full]
early_stop = false
replicates = 8
shard_size = 4
grid = {{ k = [0, 1] }}
'''


def write_fault_claim(root: Path, name: str, *, configs: int = 3, replicates: int = 8, shard_size: int = 2,
                      kill_at: int = -1, marker: str = "", sleep: float = 0.0, bug_at: int = -1,
                      bug_fixed: str = "") -> Path:
    """claims/fault/{extension.py, draws.toml} under `root`; returns the claims folder. `bug_at`: the configuration
    with k == bug_at raises an IndexError (a planted estimator bug) until the file `bug_fixed` exists."""
    d = root / "claims" / "fault"
    d.mkdir(parents=True, exist_ok=True)
    (d / "extension.py").write_text(EXTENSION.format(name=name))
    (d / "draws.toml").write_text(CLAIM.format(name=name, kill_at=kill_at, marker=marker, sleep=sleep,
                                               bug_at=bug_at, bug_fixed=bug_fixed,
                                               replicates=replicates, shard_size=shard_size,
                                               ks=list(range(configs))))
    return root / "claims"
