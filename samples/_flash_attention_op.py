"""FlashAttention as a PyTorch operator: `flash_attention(q, k, v, ...)` runs the forward
kernels of flash_attention.py and, under autograd, the backward kernels of
flash_attention_bwd.py, eagerly, under `torch.compile(fullgraph=True)` and in CUDA graphs.

Not a sample of its own (the leading underscore keeps it out of `python -m ptxdsl demo` and
the sample tests): a library module beside the samples it launches. Import it from a
checkout with the samples folder on `sys.path` (`from _flash_attention_op import
flash_attention`), or from an installed ptxdsl as `ptxdsl.samples._flash_attention_op`.

::

    out = flash_attention(q, k, v, causal=True)             # q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D]
    out.float().sum().backward()                            # dq, dk, dv by the backward kernels
    out, lse = flash_attention(q, k, v, cu_seqlens=cu, max_seqlen=m, return_lse=True)  # packed

Two operators, `ptxdsl_fa::fwd` (O and the LSE) and `ptxdsl_fa::bwd` (dQ, dK, dV), each with a
fake implementation (the output shapes, for torch.compile and meta tensors); the backward is
registered as fwd's autograd formula. They are `torch.library.custom_op`s rather than
`ptxdsl.torch.kernel_op`s: kernel_op's schema takes tensors only (these take `causal`,
`scale`, `max_seqlen` and an optional `cu_seqlens`), and it launches one loaded Function per
call, where the forward picks one of twelve kernels by dtype, head dim and layout and launches
two for a packed batch (the tensor maps first), the backward three. custom_op's Python layers
cost about 30 µs a call (docs/torch.md), small beside an attention launch.

The kernels of one (dtype, head dim) are built on first use, once per process, and loaded once
per device; every launch goes on the current PyTorch stream of the inputs' device, and the
workspaces come from PyTorch's allocator, so they are freed in stream order and can be captured
in a CUDA graph.
"""

from __future__ import annotations

import math
import sys
import threading
from typing import TYPE_CHECKING, Any, Literal, overload

import torch

from ptxdsl.errors import SourceLoc, _is_library
from ptxdsl.operands import as_int
from ptxdsl.sample_runner import sibling_sample
from ptxdsl.torch import KernelOpError

__all__ = ["flash_attention"]


if TYPE_CHECKING:       # mypy reads the samples as the top-level modules they are as scripts
    import flash_attention as fa
    import flash_attention_bwd as fab

    from ptxdsl import Module
    from ptxdsl.runtime import LoadedModule
else:
    fa = sibling_sample(__file__, "flash_attention")
    fab = sibling_sample(__file__, "flash_attention_bwd")

DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16"}
FORWARD_DIMS = tuple(sorted(fa.BLOCKS))      # 64, 128, 256
BACKWARD_DIMS = tuple(fab.HEAD_DIMS)         # 64, 128
_FWD_SCHEMA = ("(Tensor q, Tensor k, Tensor v, Tensor? cu_seqlens, int? max_seqlen, bool causal, "
               "float scale) -> (Tensor, Tensor)")
_BWD_SCHEMA = ("(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, bool causal, "
               "float scale) -> (Tensor, Tensor, Tensor)")


# -- refusals -----------------------------------------------------------------------------------
def _caller() -> SourceLoc:
    """The user's line: the first frame outside this file, PyTorch and the standard library
    (the checks run inside the operator, below torch's dispatcher and torch.compile)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and (frame.f_globals is globals()
                                        or _is_library(frame.f_code.co_filename)):
        frame = frame.f_back
    return SourceLoc(frame.f_code.co_filename, frame.f_lineno)


def _refuse(message: str) -> KernelOpError:
    return KernelOpError(f"flash_attention: {message}", _caller())


def _arguments(q: Any, k: Any, v: Any, cu_seqlens: Any, max_seqlen: Any, causal: Any,
               scale: Any, return_lse: Any) -> int | None:
    """What the operator's schema would take only by converting it (causal=0.5 ran the causal
    kernel, scale=True a scale of 1, max_seqlen=True one row) or refuse with its own
    RuntimeError, refused at the caller's line; returns max_seqlen as an int (numpy's too)."""
    for name, x in (("q", q), ("k", k), ("v", v), ("cu_seqlens", cu_seqlens)):
        if not isinstance(x, torch.Tensor) and not (name == "cu_seqlens" and x is None):
            raise _refuse(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    for name, flag in (("causal", causal), ("return_lse", return_lse)):
        if type(flag) is not bool:
            raise _refuse(f"{name} must be True or False, got {flag!r}"[:200])
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, int | float)
                              and not hasattr(scale, "__float__") or not math.isfinite(scale)):
        raise _refuse(f"scale must be None (1/sqrt(D)) or a finite number, got {scale!r}"[:200])
    n = as_int(max_seqlen)
    if max_seqlen is not None and n is None:
        raise _refuse(f"max_seqlen must be None or an int (the longest sequence's length), got "
                      f"{max_seqlen!r}"[:200])
    return n


def _layout(x: torch.Tensor) -> tuple[int, ...] | None:
    """x's strides but the last, in elements, as the kernels take them; None where TMA cannot
    read x: its last dimension must be contiguous, its other strides positive multiples of 8
    elements and its start 16-byte aligned (TMA's rules). A dimension of length 1 is never
    stepped over, so it gets the stride a contiguous tensor would have whatever it has."""
    if x.stride(-1) != 1 or x.storage_offset() % 8:
        return None
    strides: list[int] = []
    inner = x.shape[-1]
    for n, s in zip(reversed(x.shape[:-1]), reversed(x.stride()[:-1]), strict=True):
        if n == 1:
            s = inner
        elif s <= 0 or s % 8:
            return None
        strides.append(s)
        inner *= n
    return tuple(reversed(strides))


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor | None,
           max_seqlen: int | None) -> None:
    """What the kernels take, on real and fake tensors alike; KernelOpError naming the argument
    otherwise."""
    if q.dtype not in DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise _refuse(f"q, k and v must be bfloat16 or float16, all three the same; got "
                      f"{q.dtype}, {k.dtype}, {v.dtype}")
    varlen = cu_seqlens is not None
    want = "packed [total, H, D] (with cu_seqlens)" if varlen else "[B, S, H, D]"
    if q.dim() != (3 if varlen else 4) or k.dim() != q.dim() or k.shape != v.shape \
            or k.shape[0] != q.shape[0]:
        same = "rows as q (one cu_seqlens serves all three)" if varlen else "batch as q"
        raise _refuse(f"q, k and v must be {want}, k and v of one shape with the same {same}; "
                      f"got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    d, hq, hkv = q.shape[-1], q.shape[-2], k.shape[-2]
    if d not in FORWARD_DIMS or k.shape[-1] != d:
        raise _refuse(f"head dim (the last dimension of q, k and v) must be one of "
                      f"{FORWARD_DIMS} and the same in all three; got q {d}, k {k.shape[-1]}")
    if hkv < 1 or hq % hkv:
        raise _refuse(f"q's heads (Hq = {hq}) must be a multiple of k's and v's (Hkv = {hkv}): "
                      "each K/V head serves Hq / Hkv query heads")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if _layout(x) is None:
            raise _refuse(f"{name} must have its last dimension contiguous (stride 1), its other "
                          "strides positive multiples of 8 elements and its first element "
                          f"16-byte aligned, as TMA reads it; got strides {x.stride()}, storage "
                          f"offset {x.storage_offset()}. A transposed [B, H, S, D] view is "
                          f"fine; otherwise pass {name}.contiguous()")
    for name, x in (("k", k), ("v", v), ("cu_seqlens", cu_seqlens)):
        if x is not None and x.device != q.device:
            raise _refuse(f"{name} is on {x.device}, q on {q.device}: all inputs must be on "
                          "one GPU")
    if cu_seqlens is None:
        if max_seqlen is not None:
            raise _refuse("max_seqlen is for packed batches (with cu_seqlens); a dense batch's "
                          "lengths are q's and k's shapes")
        if q.shape[0] * q.shape[1] and not k.shape[1]:
            raise _refuse("k and v have no keys (Sk = 0): the softmax over no keys is undefined")
        return
    if cu_seqlens.dtype != torch.int32 or cu_seqlens.dim() != 1 or cu_seqlens.shape[0] < 2:
        raise _refuse(f"cu_seqlens must be a 1-D int32 tensor of nseq + 1 >= 2 offsets; got "
                      f"{cu_seqlens.dtype} of shape {tuple(cu_seqlens.shape)}")
    total = q.shape[0]
    if max_seqlen is None:
        raise _refuse("max_seqlen= (the longest sequence's length, an int) is needed with "
                      "cu_seqlens: the grid is sized on the host, and reading the lengths "
                      "from cu_seqlens would copy from the GPU and wait for it on every call "
                      "(and could not be captured in a CUDA graph)")
    if total and not 1 <= max_seqlen <= total:
        raise _refuse(f"max_seqlen must be the longest sequence's length, between 1 and q's "
                      f"{total} rows; got {max_seqlen}")


def _on_gpu(q: torch.Tensor) -> int:
    """q's CUDA device index; the real implementation runs only there."""
    if q.device.type != "cuda":
        raise _refuse(f"the inputs are on {q.device}; the kernels run on a CUDA GPU "
                      "(Hopper, sm_90a)")
    return q.get_device()


# -- building and loading ---------------------------------------------------------------------
_BUILT: dict[tuple[str, str, int], Module] = {}
_LOADED: dict[tuple[str, str, int, int], LoadedModule] = {}
_LOCK = threading.Lock()


def _kernels(kind: str, dtype: str, d: int, device: int) -> LoadedModule:
    """The forward ("fwd": dense, varlen and the maps kernel) or backward ("bwd") kernels of
    one dtype and head dim: built on first use, once per process, loaded once per device."""
    key = (kind, dtype, d, device)
    mod = _LOADED.get(key)
    if mod is None:
        with _LOCK:
            mod = _LOADED.get(key)
            if mod is None:
                built = _BUILT.get((kind, dtype, d))
                if built is None:
                    built = (fa.build_module((dtype,), (d,)) if kind == "fwd"
                             else fab.build_module(configs=(fab.CONFIGS[dtype, d],)))
                    _BUILT[kind, dtype, d] = built
                mod = _LOADED[key] = built.load(device=device)
    return mod


def _stream(device: int) -> int:
    return int(torch.cuda.current_stream(device).cuda_stream)


# -- the forward operator -----------------------------------------------------------------------
def _forward_outputs(q: torch.Tensor, cu_seqlens: torch.Tensor | None
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """O, contiguous in q's shape whatever q's strides, and the f32 LSE: [B, Hq, Sq] dense,
    [Hq, total] packed."""
    lse = (q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
           if cu_seqlens is None else q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32))
    return q.new_empty(q.shape), lse


def _forward_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  cu_seqlens: torch.Tensor | None, max_seqlen: int | None, causal: bool,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    _check(q, k, v, cu_seqlens, max_seqlen)
    return _forward_outputs(q, cu_seqlens)


def _forward_real(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  cu_seqlens: torch.Tensor | None, max_seqlen: int | None, causal: bool,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    _check(q, k, v, cu_seqlens, max_seqlen)
    device = _on_gpu(q)
    o, lse = _forward_outputs(q, cu_seqlens)
    if not o.numel():
        return o, lse
    dtype, d = DTYPES[q.dtype], q.shape[-1]
    mod = _kernels("fwd", dtype, d, device)
    ptr = {n: x.data_ptr() for n, x in (("q", q), ("k", k), ("v", v), ("o", o))}
    strides: dict[str, Any] = {n: _layout(x) for n, x in (("q", q), ("k", k), ("v", v), ("o", o))}
    hq, hkv = q.shape[-2], k.shape[-2]
    if cu_seqlens is None:
        b, sq, sk = q.shape[0], q.shape[1], k.shape[1]
        fa.forward(mod, ptr["q"], ptr["k"], ptr["v"], ptr["o"], lse.data_ptr(),
                   shape=(b, sq, sk, hq, hkv, d), strides=strides, causal=causal, scale=scale,
                   dtype=dtype, stream=_stream(device))
    else:
        assert max_seqlen is not None      # _check refused a packed batch without it
        nseq = cu_seqlens.shape[0] - 1
        cu = cu_seqlens.contiguous()
        # the per-sequence tensor maps and the tile list the first kernels write and the
        # attention kernel reads
        maps = torch.empty(fa.workspace_bytes(nseq, q.shape[0], hq), dtype=torch.uint8,
                           device=q.device)
        fa.forward_varlen(mod, ptr["q"], ptr["k"], ptr["v"], ptr["o"], lse.data_ptr(),
                          cu.data_ptr(), maps.data_ptr(),
                          shape=(nseq, max_seqlen, q.shape[0], hq, hkv, d), strides=strides,
                          causal=causal, scale=scale, dtype=dtype, stream=_stream(device))
    return o, lse


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, ...]) -> None:
    """Runs after the forward when a gradient will be wanted: refuses what the backward
    kernels do not take there, at the user's forward call rather than at `.backward()`."""
    q, k, v, cu_seqlens, _, causal, scale = inputs
    o, lse = output
    if cu_seqlens is not None:
        raise _refuse("no backward for packed (varlen) batches: the backward kernels take "
                      "dense [B, S, H, D] batches only; pad the batch, or call flash_attention "
                      "under torch.no_grad() (or on detached inputs) for the forward alone")
    if q.shape[-1] not in BACKWARD_DIMS:
        raise _refuse(f"no backward for head dim {q.shape[-1]}: the backward kernels exist for "
                      f"head dims {BACKWARD_DIMS}; call flash_attention under torch.no_grad() "
                      "(or on detached inputs) for the forward alone")
    # The LSE is a by-product the backward reads, not a differentiable result: a loss that
    # used it would otherwise get no gradient through it, silently.
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.causal, ctx.scale = causal, scale


def _backward(ctx: Any, dout: torch.Tensor, _dlse: torch.Tensor | None
              ) -> tuple[torch.Tensor | None, ...]:
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.ptxdsl_fa.bwd(dout, q, k, v, o, lse, ctx.causal, ctx.scale)
    return dq, dk, dv, None, None, None, None


# -- the backward operator ----------------------------------------------------------------------
def _check_backward(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    out: torch.Tensor, lse: torch.Tensor) -> None:
    _check(q, k, v, None, None)
    if q.shape[-1] not in BACKWARD_DIMS:
        raise _refuse(f"no backward for head dim {q.shape[-1]}: the backward kernels exist "
                      f"for head dims {BACKWARD_DIMS}")
    b, sq, hq, _ = q.shape
    if dout.shape != q.shape or out.shape != q.shape or dout.dtype != q.dtype \
            or out.dtype != q.dtype or lse.shape != (b, hq, sq) or lse.dtype != torch.float32:
        raise _refuse(f"the backward takes dout and out of q's shape and dtype and the f32 "
                      f"LSE [B, Hq, Sq] of the forward; got dout {tuple(dout.shape)}, out "
                      f"{tuple(out.shape)}, lse {tuple(lse.shape)} {lse.dtype}")


def _backward_fake(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   out: torch.Tensor, lse: torch.Tensor, causal: bool, scale: float
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_backward(dout, q, k, v, out, lse)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _backward_real(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   out: torch.Tensor, lse: torch.Tensor, causal: bool, scale: float
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_backward(dout, q, k, v, out, lse)
    device = _on_gpu(q)
    dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    if not dq.numel():          # no queries: nothing reads the keys
        return dq, dk.zero_(), dv.zero_()
    # autograd's incoming gradient may have any layout (an expanded one from .sum())
    dout, out = (x if _layout(x) is not None else x.contiguous() for x in (dout, out))
    lse = lse.contiguous()
    tensors = {"q": q, "k": k, "v": v, "o": out, "do": dout, "dq": dq, "dk": dk, "dv": dv}
    strides: dict[str, Any] = {n: _layout(x) for n, x in tensors.items()}
    dtype = DTYPES[q.dtype]
    workspace = fab.Workspace(
        b, hq, sq, d, empty=lambda shape: torch.empty(shape, dtype=torch.float32,
                                                      device=q.device))
    p = {n: x.data_ptr() for n, x in tensors.items()}
    fab.backward(_kernels("bwd", dtype, d, device), p["q"], p["k"], p["v"], p["o"], p["do"],
                 lse.data_ptr(), p["dq"], p["dk"], p["dv"], B=b, Sq=sq, Sk=sk, Hq=hq, Hkv=hkv,
                 D=d, causal=causal, scale=scale, dtype=dtype, strides=strides,
                 stream=_stream(device), workspace=workspace)
    return dq, dk, dv


def _register() -> None:
    """Defines the two operators, once per process: a second copy of this file (loaded under
    another name) finds them defined and uses them."""
    if hasattr(torch.ops.ptxdsl_fa, "fwd"):
        return
    fwd = torch.library.custom_op("ptxdsl_fa::fwd", _forward_real, mutates_args=(),
                                  schema=_FWD_SCHEMA)
    fwd.register_fake(_forward_fake)
    fwd.register_autograd(_backward, setup_context=_setup_context)
    bwd = torch.library.custom_op("ptxdsl_fa::bwd", _backward_real, mutates_args=(),
                                  schema=_BWD_SCHEMA)
    bwd.register_fake(_backward_fake)


_register()


@overload
def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = ...,
                    scale: float | None = ..., cu_seqlens: torch.Tensor | None = ...,
                    max_seqlen: int | None = ..., return_lse: Literal[False] = ...
                    ) -> torch.Tensor: ...


@overload
def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = ...,
                    scale: float | None = ..., cu_seqlens: torch.Tensor | None = ...,
                    max_seqlen: int | None = ..., return_lse: Literal[True]
                    ) -> tuple[torch.Tensor, torch.Tensor]: ...


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                    scale: float | None = None, cu_seqlens: torch.Tensor | None = None,
                    max_seqlen: int | None = None, return_lse: bool = False
                    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """softmax(scale q k^T) v on a Hopper GPU, differentiable (head dims 64 and 128, dense).

    Dense: q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D]. Packed: q, k, v [total, H, D] with
    `cu_seqlens` (int32 [nseq + 1] on the GPU, the sequences' offsets, the same for q and k:
    each sequence attends to itself) and `max_seqlen` (the longest sequence's length, an int:
    the grid is sized on the host; rows of a longer sequence would be left unwritten, as
    rows past `cu_seqlens[-1]` are). bfloat16 or float16; D 64, 128 or 256 (the backward:
    64 and 128, dense only); Hq a multiple of Hkv (grouped-query, multi-query); any lengths;
    strides free but for a contiguous last dimension and multiples of 8 elements (a
    transposed [B, H, S, D] view is taken as it is). `causal`: key j is visible to query i
    iff j <= i (torch SDPA's `is_causal`, top-left); `scale` defaults to 1/sqrt(D).

    Returns O (contiguous, q's shape and dtype) and, with `return_lse`, the f32 log-sum-exp
    of each row ([B, Hq, Sq] dense, [Hq, total] packed), which carries no gradient."""
    max_seqlen = _arguments(q, k, v, cu_seqlens, max_seqlen, causal, scale, return_lse)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    out, lse = torch.ops.ptxdsl_fa.fwd(q, k, v, cu_seqlens, max_seqlen, causal, scale)
    return (out, lse) if return_lse else out
