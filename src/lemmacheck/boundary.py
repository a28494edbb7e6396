"""The one place where tensors leave torch: numpy arrays and Python scalars, moved to the CPU explicitly.

Estimators run on whatever device `--device` names; `Tensor.numpy()` and `float(t)`/`t.item()` on a CUDA tensor
either fail ("can't convert cuda:0 device type tensor to numpy") or silently synchronise. Every read of a tensor
into numpy or Python in the engine and in the papers' plugins goes through these helpers, and tests/test_device.py
runs every claim under a stand-in device on which any other read fails.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

HOST = torch.device("cpu")


def on_host(t: torch.Tensor) -> bool:
    """Whether t lives in host memory, where the LAPACK/numpy fast paths apply. Compared with the whole device,
    not its type: tests/standin_device.py stands in for a GPU as cpu:0, and so takes the paths a GPU takes."""
    return t.device == HOST


def to_numpy(t: Any, dtype: torch.dtype | None = None) -> np.ndarray:
    """A numpy array of t (tensor, array or scalar) on the CPU, detached; `dtype` converts first (on the CPU)."""
    if isinstance(t, torch.Tensor):
        t = t.detach().to("cpu")
        if dtype is not None:
            t = t.to(dtype)
        return t.numpy()
    return np.asarray(t)


def to_float(t: Any) -> float:
    """A Python float of a one-element tensor (or any number), moved to the CPU first."""
    if isinstance(t, torch.Tensor):
        return float(t.detach().to("cpu").reshape(()).item())
    return float(t)


def to_int(t: Any) -> int:
    """A Python int of a one-element tensor (or any number), moved to the CPU first."""
    if isinstance(t, torch.Tensor):
        return int(t.detach().to("cpu").reshape(()).item())
    return int(t)


def to_list(t: Any) -> list:
    """t.tolist() of a tensor moved to the CPU first (a list passes through)."""
    if isinstance(t, torch.Tensor):
        return t.detach().to("cpu").tolist()
    return list(t)
