"""A stand-in for a GPU on a CPU-only machine: a TorchFunctionMode that tracks which tensors would live on the
device and fails where a real device would.

Under `StandInDevice()` every tensor created inside (factories, random draws, results of operations on such
tensors) is marked as a device tensor; a tensor moved explicitly (`.cpu()`, `.to("cpu")`, a factory with
device="cpu") is marked as a CPU tensor, and so is every tensor the mode never saw made (module constants,
`torch.from_numpy`), as it would be on a GPU machine. Then, as on CUDA:
- `.numpy()` or `numpy.asarray(t)` (scipy calls it) of a device tensor raises TypeError("can't convert stand-in
  device tensor to numpy");
- `t.device` of a device tensor is the stand-in device (cpu:0), so `torch.zeros(.., device=t.device)` and
  `.to(t.device)` go to the device as they would on a GPU;
- an operation mixing a device tensor with a CPU tensor of one element or more raises RuntimeError("Expected all
  tensors to be on the same device") (CUDA allows 0-dim CPU tensors there, and so does the stand-in).
Python scalar reads (`.item()`, `float(t)`, `.tolist()`, `bool(t)`) work on CUDA tensors (they synchronise), so
they are allowed here too; `lemmacheck.boundary` is the explicit form of all these reads.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

DEV, CPU = "_standin_device", "_standin_cpu"
STANDIN = torch.device("cpu", 0)  # what `t.device` of a device tensor returns and what a shard runs on: not "cpu"
_DEVICE_ATTR = torch._C.TensorBase.device
_NUMPY = {torch.Tensor.numpy, torch.Tensor.__array__}
_MOVES = {torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda}
# no tensor comes out of these, or they only look at metadata
_NEUTRAL = {torch.Tensor.__repr__, torch.Tensor.__format__, torch.Tensor.dim, torch.Tensor.size,
            torch.Tensor.numel, torch.Tensor.__len__, torch.Tensor.element_size, torch.Tensor.get_device,
            torch.Tensor.is_floating_point, torch.Tensor.is_contiguous, torch.Tensor.data_ptr}


def _where(t: torch.Tensor) -> str:
    """"device" or "cpu": a tensor the stand-in never saw made (a module constant, torch.from_numpy, which bypasses
    torch functions) is a CPU tensor, as it would be on a GPU machine."""
    return "device" if getattr(t, "__dict__", {}).get(DEV) else "cpu"


def _mark(out, kind: str) -> None:
    for t in tree_flatten(out)[0]:
        if isinstance(t, torch.Tensor):
            try:
                t.__dict__.pop(CPU if kind == DEV else DEV, None)
                setattr(t, kind, True)
            except (AttributeError, RuntimeError):
                pass


def _is_cpu(x) -> bool:
    """Names the CPU itself (not the stand-in device, cpu:0)."""
    return x == "cpu" or (isinstance(x, torch.device) and x.type == "cpu" and x.index is None)


class StandInDevice(TorchFunctionMode):
    """Fails like a CUDA device on CPU-only machines (see the module's docstring); `.seen` counts conversions."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__self__", None) is _DEVICE_ATTR:  # t.device: the stand-in's own for its tensors
            return STANDIN if args and _where(args[0]) == "device" else func(*args, **kwargs)
        if func in _NEUTRAL or getattr(func, "__name__", "") == "__set__":
            return func(*args, **kwargs)
        if getattr(func, "__name__", "") == "__get__":  # a property: a tensor it gives (t.T, t.mT, t.grad) lives
            out = func(*args, **kwargs)                # where its owner does, as on CUDA
            if isinstance(out, torch.Tensor) and args and isinstance(args[0], torch.Tensor):
                _mark(out, DEV if _where(args[0]) == "device" else CPU)
            return out
        flat = tree_flatten((args, kwargs))[0]
        tensors = [t for t in flat if isinstance(t, torch.Tensor)]
        where = [_where(t) for t in tensors]
        if func in _NUMPY:
            self.seen += 1
            if where and where[0] == "device":
                raise TypeError("can't convert stand-in device tensor to numpy. Use Tensor.cpu() to copy the tensor "
                                "to host memory first (lemmacheck.boundary.to_numpy)")
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        if func is torch.Tensor.__iter__:  # the rows of a device tensor are on the device
            rows = list(out)
            _mark(rows, DEV if where and where[0] == "device" else CPU)
            return iter(rows)
        if func in _MOVES:
            rest = list(args[1:]) + list(kwargs.values())
            if func is torch.Tensor.cpu or any(_is_cpu(x) for x in rest):
                _mark(out, CPU)
            elif func is torch.Tensor.cuda or any(isinstance(x, (str, torch.device)) and not isinstance(x, bool)
                                                  for x in rest):
                _mark(out, DEV)
            else:
                others = [_where(x) for x in rest if isinstance(x, torch.Tensor)]
                kind = others[0] if others else where[0]
                _mark(out, DEV if kind == "device" else CPU)
            return out
        if func is torch.from_numpy:
            _mark(out, CPU)
            return out
        if not tensors:  # a factory: on the device unless it names the CPU
            _mark(out, CPU if _is_cpu(kwargs.get("device")) else DEV)
            return out
        on_dev = "device" in where
        cpu_big = any(w == "cpu" and t.dim() > 0 for w, t in zip(where, tensors))
        if on_dev and cpu_big:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"stand-in device and cpu! (in {getattr(func, '__name__', func)})")
        _mark(out, DEV if on_dev else CPU)
        return out


class NumpyBoundaryOnly:
    """The cheap form of the check, for every claim: while active, `Tensor.numpy()` and `numpy.asarray(tensor)`
    raise unless called from lemmacheck.boundary (to_numpy moves to the CPU first). Device-agnostic code never
    reads a tensor into numpy any other way, so this catches every read that fails on CUDA, without the per-operation
    cost of `StandInDevice` (which also catches device mixing, and runs on the planted bugs)."""

    ALLOWED = ("lemmacheck.boundary",)

    def __enter__(self):
        import sys

        self._saved = (torch.Tensor.numpy, torch.Tensor.__array__)
        numpy_, array_ = self._saved
        allowed = self.ALLOWED

        def check(what: str) -> None:
            caller = sys._getframe(2).f_globals.get("__name__", "")
            if caller not in allowed and not caller.startswith("torch."):  # torch re-dispatching an allowed call
                raise TypeError(f"can't convert stand-in device tensor to numpy ({what} in {caller}): read tensors "
                                "through lemmacheck.boundary.to_numpy, which moves them to the CPU first")

        def numpy(self, *a, **k):
            check(".numpy()")
            return numpy_(self, *a, **k)

        def array(self, *a, **k):
            check("numpy.asarray")
            return array_(self, *a, **k)

        torch.Tensor.numpy, torch.Tensor.__array__ = numpy, array
        return self

    def __exit__(self, *exc):
        torch.Tensor.numpy, torch.Tensor.__array__ = self._saved
        return False
