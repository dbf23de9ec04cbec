"""ptxdsl kernels as PyTorch custom operators (`pip install ptxdsl[torch]`).

::

    from ptxdsl.torch import kernel_op

    vadd = kernel_op(
        "mylib::vadd", module_loader,                   # device index -> loaded Function
        inputs=("a", "b"),
        outputs=lambda a, b: torch.empty_like(a),       # the output-allocation rule
        launch=lambda a, b, out: dict(grid=-(-a.numel() // 256), block=256,
                                      args=(a, b, out, a.numel())))
    y = vadd(x1, x2)                  # eager, under torch.compile(fullgraph=True), in a graph

`kernel_op` defines the operator with `torch.library.Library` (schema `(Tensor a, Tensor b) ->
Tensor`), registers its real implementation for the CUDA dispatch key as a plain Python
function, and a fake (meta) implementation that runs the same `outputs` rule on fake tensors,
which is how torch.compile learns the output shapes without running anything. The real
implementation allocates the outputs with `outputs(*inputs)` and launches the kernel on the
current PyTorch stream of the inputs' device. Rules (see docs/torch.md): outputs are new
tensors (never an input or a view of one), allocated only from the inputs' shapes/dtypes/
devices; tensors in `launch(...)["args"]` are passed as their `data_ptr()` (each must be on the
inputs' GPU), so the kernel reads them as laid out (make them contiguous in `outputs`/the caller
when the kernel assumes it). Load (and launch once) before capturing a CUDA graph: loading a
module inside a capture is not a stream operation and is refused by the driver.

Why `Library` and not `torch.library.custom_op`: a custom_op call runs several Python layers
per call (its autograd wrapper, a redispatch, a device-type check, a `torch._dynamo.disable`
region); a `Library` kernel is reached straight from the C++ dispatcher. On a CPU stand-in
(BENCHMARKS.md section 3) that took the per-call dispatch from about 26 µs to 4 µs eager, and
the compiled call from about 150 µs to 50 µs. The op has no autograd formula (none is possible
for an arbitrary kernel): gradients do not flow through it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import torch

from ptxdsl.runtime.launch import Function

__all__ = ["kernel_op"]


class _PerDevice:
    """The loaded Function for a device: a fixed Function, or one loaded once per device."""

    def __init__(self, function):
        self._fixed = function if isinstance(function, Function) else None
        self._load: Callable[[int], object] | None = (
            None if self._fixed is not None else function)
        # device -> Function, read directly by the op's hot path (`loaded.get(index)`).
        self.loaded: dict[int, Function] = {}
        if self._fixed is not None:
            self.loaded[self._fixed.device] = self._fixed
        self._lock = threading.Lock()

    def __call__(self, index: int) -> Function:
        if self._fixed is not None:
            if self._fixed.device != index:
                raise ValueError(f"kernel '{self._fixed.name}' is loaded on device "
                                 f"{self._fixed.device} but the inputs are on cuda:{index}; "
                                 "pass a loader (device index -> Function) to kernel_op")
            return self._fixed
        fn = self.loaded.get(index)
        if fn is None:
            with self._lock:
                fn = self.loaded.get(index)
                if fn is None:
                    load = self._load
                    assert load is not None   # set whenever no fixed Function is
                    made = load(index)
                    if not isinstance(made, Function):
                        raise TypeError(f"the loader given to kernel_op returned "
                                        f"{type(made).__name__}, not a ptxdsl Function")
                    self.loaded[index] = fn = made
        return fn


def _raw_stream():
    """index -> the current PyTorch stream's handle on that device, without building a
    torch.cuda.Stream object (the function inductor's generated code uses)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda index: torch.cuda.current_stream(index).cuda_stream


_LIBRARIES: dict = {}   # name -> the torch.library.Library holding its registrations


def kernel_op(name: str, function: Function | Callable[[int], Function], *,
              inputs: Sequence[str], outputs: Callable, launch: Callable,
              n_outputs: int = 1):
    """Register `name` ("namespace::op") as a PyTorch operator running a ptxdsl kernel.

    `function`: a loaded ptxdsl `Function`, or a loader `device index -> Function` (called once
    per device, e.g. `lambda d: module.load(device=d)["k"]`). `inputs`: the tensor parameter
    names, in order. `outputs(*inputs)`: the allocation rule, returning `n_outputs` new tensors
    (also run on fake tensors under torch.compile). `launch(*inputs, *outputs)`: a dict with
    `grid`, `block`, `args` and optionally `shared_mem`, `cluster`.

    Returns the operator, `torch.ops.<namespace>.<op>.default`."""
    if not isinstance(name, str) or name.count("::") != 1:
        raise ValueError(f"kernel_op name must be 'namespace::op', got {name!r}")
    names = tuple(inputs)
    if not names or not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise ValueError(f"kernel_op inputs must be parameter names, got {inputs!r}")
    if n_outputs < 1:
        raise ValueError("kernel_op needs at least one output")
    namespace, op_name = name.split("::")
    ret = "Tensor" if n_outputs == 1 else "(" + ", ".join(["Tensor"] * n_outputs) + ")"
    schema = op_name + "(" + ", ".join(f"Tensor {n}" for n in names) + ") -> " + ret
    per_device = _PerDevice(function)
    tensor = torch.Tensor
    raw_stream = _raw_stream()

    def allocate(tensors) -> tuple:
        outs = outputs(*tensors)
        if type(outs) is not tuple:
            outs = tuple(outs) if isinstance(outs, list) else (outs,)
        for o in outs:
            if not isinstance(o, tensor):
                break
        else:
            if len(outs) == n_outputs:
                return outs
        raise TypeError(f"{name}: the outputs rule must return {n_outputs} tensor(s), got "
                        f"{[type(o).__name__ for o in outs]}")

    def pointer(t, index: int) -> int:
        if t.get_device() != index:
            raise ValueError(f"{name}: a tensor in launch(...)['args'] is on {t.device}, not "
                             f"on cuda:{index} with the inputs")
        return t.data_ptr()

    plain = (int, float)       # passed as they are, without the (slower) isinstance(Tensor)
    loaded = per_device.loaded

    def real(*tensors):
        outs = allocate(tensors)
        cfg = launch(*tensors, *outs)
        index = tensors[0].get_device()
        args = tuple([a if type(a) in plain else pointer(a, index) if isinstance(a, tensor)
                      else a for a in cfg["args"]])
        fn = loaded.get(index) or per_device(index)
        # The current stream of the inputs' device: what eager PyTorch, torch.compile's
        # generated code and CUDA-graph capture all launch on.
        fn.launch(cfg["grid"], cfg["block"], args, shared_mem=cfg.get("shared_mem", 0),
                  stream=raw_stream(index), cluster=cfg.get("cluster"))
        return outs[0] if n_outputs == 1 else outs

    def fake(*tensors):
        outs = allocate(tensors)
        return outs[0] if n_outputs == 1 else outs

    lib = torch.library.Library(namespace, "FRAGMENT")
    lib.define(schema)
    lib.impl(op_name, real, _DISPATCH_KEY)
    torch.library.register_fake(name, fake, lib=lib)
    _LIBRARIES[name] = lib
    return getattr(getattr(torch.ops, namespace), op_name).default


# The dispatch key of the real implementation (a CPU test stand-in may patch it).
_DISPATCH_KEY = "CUDA"
