"""ptxdsl kernels as PyTorch custom operators (`pip install ptxdsl[torch]`).

    from ptxdsl.torch import kernel_op

    vadd = kernel_op(
        "mylib::vadd", module_loader,                   # device index -> loaded Function
        inputs=("a", "b"),
        outputs=lambda a, b: torch.empty_like(a),       # the output-allocation rule
        launch=lambda a, b, out: dict(grid=-(-a.numel() // 256), block=256,
                                      args=(a, b, out, a.numel())))
    y = vadd(x1, x2)                  # eager, under torch.compile(fullgraph=True), in a graph

`kernel_op` registers a `torch.library.custom_op` whose real implementation allocates the
outputs with `outputs(*inputs)`, and launches the kernel on the current PyTorch stream of the
inputs' device; its fake (meta) implementation runs the same `outputs` rule on fake tensors,
which is how torch.compile learns the output shapes without running anything. Rules (see
docs/torch.md): outputs are new tensors (never an input or a view of one), allocated only from
the inputs' shapes/dtypes/devices; tensors in `launch(...)["args"]` are passed as their
`data_ptr()`, so the kernel reads them as laid out (make them contiguous in `outputs`/the caller
when the kernel assumes it). Load (and launch once) before capturing a CUDA graph: loading a
module inside a capture is not a stream operation and is refused by the driver.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import torch

from ptxdsl.runtime.launch import Function

__all__ = ["kernel_op"]


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class _PerDevice:
    """The loaded Function for a device: a fixed Function, or one loaded once per device."""

    def __init__(self, function):
        self._fixed = function if isinstance(function, Function) else None
        self._load = None if self._fixed is not None else function
        self._by_device: dict[int, Function] = {}
        self._lock = threading.Lock()

    def __call__(self, index: int) -> Function:
        if self._fixed is not None:
            if self._fixed.device != index:
                raise ValueError(f"kernel '{self._fixed.name}' is loaded on device "
                                 f"{self._fixed.device} but the inputs are on cuda:{index}; "
                                 "pass a loader (device index -> Function) to kernel_op")
            return self._fixed
        fn = self._by_device.get(index)
        if fn is None:
            with self._lock:
                fn = self._by_device.get(index)
                if fn is None:
                    fn = self._load(index)
                    if not isinstance(fn, Function):
                        raise TypeError(f"the loader given to kernel_op returned "
                                        f"{type(fn).__name__}, not a ptxdsl Function")
                    self._by_device[index] = fn
        return fn


def kernel_op(name: str, function: Function | Callable[[int], Function], *,
              inputs: Sequence[str], outputs: Callable, launch: Callable,
              n_outputs: int = 1):
    """Register `name` ("namespace::op") as a PyTorch custom operator running a ptxdsl kernel.

    `function`: a loaded ptxdsl `Function`, or a loader `device index -> Function` (called once
    per device, e.g. `lambda d: module.load(device=d)["k"]`). `inputs`: the tensor parameter
    names, in order. `outputs(*inputs)`: the allocation rule, returning `n_outputs` new tensors
    (also run on fake tensors under torch.compile). `launch(*inputs, *outputs)`: a dict with
    `grid`, `block`, `args` and optionally `shared_mem`, `cluster`.

    Returns the operator (`torch.ops.<namespace>.<op>` is the same one)."""
    if not isinstance(name, str) or name.count("::") != 1:
        raise ValueError(f"kernel_op name must be 'namespace::op', got {name!r}")
    names = tuple(inputs)
    if not names or not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise ValueError(f"kernel_op inputs must be parameter names, got {inputs!r}")
    if n_outputs < 1:
        raise ValueError("kernel_op needs at least one output")
    ret = "Tensor" if n_outputs == 1 else "(" + ", ".join(["Tensor"] * n_outputs) + ")"
    schema = "(" + ", ".join(f"Tensor {n}" for n in names) + ") -> " + ret
    per_device = _PerDevice(function)
    tensor = torch.Tensor

    def allocate(tensors) -> tuple:
        outs = _as_tuple(outputs(*tensors))
        if len(outs) != n_outputs or not all(isinstance(o, tensor) for o in outs):
            raise TypeError(f"{name}: the outputs rule must return {n_outputs} tensor(s), got "
                            f"{[type(o).__name__ for o in outs]}")
        return outs

    def real(*tensors):
        outs = allocate(tensors)
        device = tensors[0].device
        cfg = launch(*tensors, *outs)
        args = tuple(a.data_ptr() if isinstance(a, tensor) else a for a in cfg["args"])
        fn = per_device(device.index if device.index is not None else 0)
        # The current stream of the inputs' device: what eager PyTorch, torch.compile's
        # generated code and CUDA-graph capture all launch on.
        stream = torch.cuda.current_stream(device).cuda_stream
        fn.launch(cfg["grid"], cfg["block"], args, shared_mem=cfg.get("shared_mem", 0),
                  stream=stream, cluster=cfg.get("cluster"))
        return outs[0] if n_outputs == 1 else outs

    def fake(*tensors):
        outs = allocate(tensors)
        return outs[0] if n_outputs == 1 else outs

    op = torch.library.custom_op(name, real, mutates_args=(), device_types="cuda",
                                 schema=schema)
    op.register_fake(fake)
    return op
