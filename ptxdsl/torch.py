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
inputs' GPU, and contiguous unless `contiguous=False`). Load (and launch once) before
capturing a CUDA graph: loading a module inside a capture is not a stream operation and is
refused by the driver.

Why `Library` and not `torch.library.custom_op`: a custom_op call runs several Python layers
per call (its autograd wrapper, a redispatch, a device-type check, a `torch._dynamo.disable`
region); a `Library` kernel is reached straight from the C++ dispatcher. On a CPU stand-in
(BENCHMARKS.md section 3) that took the per-call dispatch from about 26 µs to 4 µs eager, and
the compiled call from about 150 µs to 50 µs. An arbitrary kernel has no autograd formula:
inputs that require grad are refused unless `backward=` registers one.
"""

from __future__ import annotations

import inspect
import operator
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import SupportsIndex

import torch

from ptxdsl.errors import PtxdslError, SourceLoc, _is_internal, _is_library
from ptxdsl.runtime.launch import Function
from ptxdsl.runtime.symmetric import torch_raw_stream

__all__ = ["KernelOpError", "kernel_op"]


class KernelOpError(PtxdslError, TypeError, ValueError):
    """A `kernel_op` registration or call refused; names the op and the argument. Also a
    TypeError and a ValueError, the exceptions these refusals raised before."""


class _Strided(Exception):
    """A non-contiguous tensor met while packing; the op's call, which knows the inputs and
    outputs, names it."""

    def __init__(self, tensor):
        self.tensor = tensor


def _caller() -> SourceLoc:
    """The user's line that called the op, past ptxdsl's and torch's own frames."""
    frame = sys._getframe(1)
    while frame.f_back is not None and (_is_internal(frame.f_code.co_filename)
                                        or _is_library(frame.f_code.co_filename)):
        frame = frame.f_back
    return SourceLoc(frame.f_code.co_filename, frame.f_lineno)


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
                raise KernelOpError(f"kernel '{self._fixed.name}' is loaded on device "
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
                        raise KernelOpError(f"the loader given to kernel_op returned "
                                        f"{type(made).__name__}, not a ptxdsl Function")
                    self.loaded[index] = fn = made
        return fn


def _raw_stream():
    """index -> the current PyTorch stream's handle on that device (one definition, shared
    with symmetric memory's launches: `runtime.symmetric.torch_raw_stream`)."""
    return torch_raw_stream()


_LIBRARIES: dict = {}   # name -> the torch.library.Library holding its registrations


def kernel_op(name: str, function: Function | Callable[[int], Function], *,
              inputs: Sequence[str], outputs: Callable, launch: Callable,
              n_outputs: int = 1, backward: Callable | None = None,
              setup_context: Callable | None = None, contiguous: bool = True):
    """Register `name` ("namespace::op") as a PyTorch operator running a ptxdsl kernel.

    `function`: a loaded ptxdsl `Function`, or a loader `device index -> Function` (called once
    per device, e.g. `lambda d: module.load(device=d)["k"]`). `inputs`: the tensor parameter
    names, in order. `outputs(*inputs)`: the allocation rule, returning `n_outputs` new tensors
    (also run on fake tensors under torch.compile). `launch(*inputs, *outputs)`: a dict with
    `grid`, `block`, `args` and optionally `shared_mem`, `cluster`.

    Gradients: without `backward`, an input that requires grad (with grad mode on) is refused
    (`KernelOpError` naming the op and the input): PyTorch would otherwise only warn, at
    backward time, that the result may be "silently incorrect". `backward(ctx, *grads)` and
    `setup_context(ctx, inputs, output)` are registered with `torch.library.register_autograd`
    and have its semantics (a backward that runs a kernel calls another `kernel_op`).

    `contiguous=True` (the default) refuses a non-contiguous tensor in `launch(...)["args"]`:
    the kernel gets only its `data_ptr()` and would read other elements. Pass False for a
    kernel that takes the strides as arguments.

    Returns the operator, `torch.ops.<namespace>.<op>.default`."""
    # Checked here: the callables are only called at the op's first use, far from this line
    # (what torch's schema parser refuses is named below).
    if not isinstance(name, str) or name.count("::") != 1 or not all(name.split("::")):
        raise KernelOpError(f"kernel_op name must be 'namespace::op', got {name!r}")
    if name in _LIBRARIES:
        raise KernelOpError(f"kernel_op: {name} is already registered in this process (an "
                            "operator is defined once; give this one another name)")
    # a str is iterable too: inputs="ab" would define the inputs a and b
    names = () if isinstance(inputs, str) or not isinstance(inputs, Iterable) else tuple(inputs)
    if not names or not all(isinstance(n, str) and n.isidentifier() for n in names) \
            or len(set(names)) != len(names):
        raise KernelOpError(f"kernel_op inputs must be distinct parameter names (a tuple of "
                            f"str), got {inputs!r}"[:300])
    count = operator.index(n_outputs) if isinstance(n_outputs, SupportsIndex) else None
    if isinstance(n_outputs, bool) or count is None or count < 1:
        raise KernelOpError(f"kernel_op needs at least one output: n_outputs must be an int >= "
                            f"1, got {n_outputs!r}")
    n_outputs = count
    for arg, value, optional in (("function", function, False), ("outputs", outputs, False),
                                 ("launch", launch, False), ("backward", backward, True),
                                 ("setup_context", setup_context, True)):
        if not (value is None and optional or callable(value) or isinstance(value, Function)):
            raise KernelOpError(f"kernel_op: {arg} must be callable, got "
                                f"{type(value).__name__}")
    if type(contiguous) is not bool:
        raise KernelOpError(f"kernel_op: contiguous must be True or False, got {contiguous!r}")
    if setup_context is not None and backward is None:
        raise KernelOpError(f"{name}: setup_context= is given without backward=; it only "
                            "saves what a backward formula reads")
    namespace, op_name = name.split("::")
    if "." in op_name:      # torch reads "op.x" as op's overload x: torch.ops has no "op.x"
        raise KernelOpError(f"kernel_op name must be 'namespace::op' without a '.' in the op "
                            f"(torch reads what follows it as an overload name), got {name!r}")
    # Called only at the op's first use, far from this line: a rule taking another count of
    # tensors than the op passes it failed there inside the op, with Python's TypeError.
    _check_arity(name, "outputs", outputs, names, ())
    _check_arity(name, "launch", launch, names, tuple(f"output {i}" for i in range(n_outputs)))
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
        raise KernelOpError(f"{name}: the outputs rule must return {n_outputs} tensor(s), got "
                            f"{[type(o).__name__ for o in outs]}", _caller())

    def pointer(t, index: int) -> int:
        if t.get_device() != index:
            raise KernelOpError(f"{name}: a tensor in launch(...)['args'] is on {t.device}, "
                                f"not on cuda:{index} with the inputs", _caller())
        if contiguous and not t.is_contiguous():
            raise _Strided(t)
        return t.data_ptr()

    def strided(t, tensors, outs, args) -> KernelOpError:
        which = (next((f"input '{n}'" for n, x in zip(names, tensors, strict=True) if x is t), None)
                 or next((f"output {i}" for i, x in enumerate(outs) if x is t), None)
                 or next(f"launch(...)['args'][{i}]" for i, x in enumerate(args) if x is t))
        return KernelOpError(
            f"{name}: {which} is not contiguous (shape {tuple(t.shape)}, strides "
            f"{t.stride()}); the kernel gets only its data_ptr() and would read other "
            "elements. Pass x.contiguous(), or kernel_op(..., contiguous=False) for a kernel "
            "that takes the strides", _caller())

    plain = (int, float)       # passed as they are, without the (slower) isinstance(Tensor)
    loaded = per_device.loaded
    grad_enabled = torch.is_grad_enabled
    refuse_grad = backward is None

    def no_grad_needed(tensors) -> None:
        for t in tensors:       # on the hot path: the name is looked up only to refuse
            if t.requires_grad:
                n = next(n for n, x in zip(names, tensors, strict=True) if x is t)
                raise KernelOpError(
                    f"{name}: input '{n}' requires grad and the op has no backward formula, "
                    "so its gradient would be silently wrong; register one (kernel_op(..., "
                    f"backward=..., setup_context=...)), or pass {n}.detach() or call the op "
                    "under torch.no_grad()", _caller())

    def real(*tensors):
        if refuse_grad and grad_enabled():
            no_grad_needed(tensors)
        outs = allocate(tensors)
        cfg = launch(*tensors, *outs)
        if type(cfg) is not dict or not _LAUNCH_NEEDS <= cfg.keys() <= _LAUNCH_KEYS \
                or not isinstance(cfg["args"], tuple | list):
            cfg = _launch_config(name, cfg)
        index = tensors[0].get_device()
        try:
            args = tuple([a if type(a) in plain else pointer(a, index)
                          if isinstance(a, tensor) else a for a in cfg["args"]])
        except _Strided as e:
            raise strided(e.tensor, tensors, outs, cfg["args"]) from None
        fn = loaded.get(index) or per_device(index)
        # The current stream of the inputs' device: what eager PyTorch, torch.compile's
        # generated code and CUDA-graph capture all launch on.
        fn.launch(cfg["grid"], cfg["block"], args, shared_mem=cfg.get("shared_mem", 0),
                  stream=raw_stream(index), cluster=cfg.get("cluster"))
        return outs[0] if n_outputs == 1 else outs

    def fake(*tensors):
        if refuse_grad and grad_enabled():  # torch.compile traces here, not through `real`
            no_grad_needed(tensors)
        outs = allocate(tensors)
        return outs[0] if n_outputs == 1 else outs

    def on_cpu(*tensors):
        # Without it, torch's dispatcher answers inputs on the CPU with a NotImplementedError
        # ("Could not run ... with arguments from the 'CPU' backend") that names no argument.
        where = ", ".join(f"'{n}' on {x.device}" for n, x in zip(names, tensors, strict=True)
                          if isinstance(x, tensor))
        raise KernelOpError(f"{name}: the op runs a CUDA kernel on its inputs' GPU, got {where}; "
                            "move them to the GPU (x.cuda())", _caller())

    try:
        lib = torch.library.Library(namespace, "FRAGMENT")
        lib.define(schema)
        lib.impl(op_name, real, _DISPATCH_KEY)
        if _DISPATCH_KEY != "CPU":      # the tests' CPU stand-in runs `real` there
            lib.impl(op_name, on_cpu, "CPU")
        torch.library.register_fake(name, fake, lib=lib)
    except RuntimeError as e:   # the schema parser's message, e.g. an input named 'def'
        raise KernelOpError(f"kernel_op: torch refused the operator {name} with schema "
                            f"{schema!r}: {str(e).splitlines()[0]}") from None
    if backward is not None:
        torch.library.register_autograd(name, backward, setup_context=setup_context, lib=lib)
    _LIBRARIES[name] = lib
    return getattr(getattr(torch.ops, namespace), op_name).default


# What `launch(...)` returns: a dict of these keys (the first three required).
_LAUNCH_NEEDS = frozenset({"grid", "block", "args"})
_LAUNCH_KEYS = _LAUNCH_NEEDS | {"shared_mem", "cluster"}


def _launch_config(name: str, cfg: object) -> dict:
    """`launch(...)`'s result checked (the op's slow path: the hot path takes a dict of the
    right keys and an args tuple or list as it is). A misspelt key (`smem=`) was ignored, so
    the kernel ran without the shared memory it needs; a missing one raised KeyError."""
    want = ("a dict of grid, block, args (a tuple or list) and optionally shared_mem, "
            "cluster")
    if not isinstance(cfg, Mapping):
        raise KernelOpError(f"{name}: launch(...) must return {want}, got "
                            f"{type(cfg).__name__}", _caller())
    cfg = dict(cfg)
    missing, unknown = sorted(_LAUNCH_NEEDS - cfg.keys()), sorted(map(str, cfg.keys() -
                                                                       _LAUNCH_KEYS))
    if missing or unknown:
        got = "; ".join(([f"missing {', '.join(missing)}"] if missing else []) +
                        ([f"unknown {', '.join(unknown)}"] if unknown else []))
        raise KernelOpError(f"{name}: launch(...) must return {want}, got {got}"[:400],
                            _caller())
    args = cfg["args"]
    if isinstance(args, str | bytes | Mapping) or not isinstance(args, Iterable):
        raise KernelOpError(f"{name}: launch(...)['args'] must be the kernel's arguments (a "
                            f"tuple or list), got {type(args).__name__}", _caller())
    cfg["args"] = tuple(args)
    return cfg


def _check_arity(name: str, what: str, rule: Callable, inputs: tuple[str, ...],
                 outputs: tuple[str, ...]) -> None:
    """Refuse a rule that cannot take the op's inputs (and outputs) as positional arguments."""
    try:
        signature = inspect.signature(rule)
    except (TypeError, ValueError):      # a builtin or a C callable: nothing to read
        return
    try:
        signature.bind(*inputs, *outputs)
    except TypeError as e:
        n = len(inputs) + len(outputs)
        passed = ", ".join((*(f"'{x}'" for x in inputs), *outputs))
        raise KernelOpError(f"kernel_op {name}: {what} is called with {n} tensor"
                            f"{'s' * (n != 1)} ({passed}), but {e}") from None


# The dispatch key of the real implementation (a CPU test stand-in may patch it).
_DISPATCH_KEY = "CUDA"
