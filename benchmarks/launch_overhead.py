"""Row 3: host cost of one launch from Python.

The kernel takes a pointer, two scalars (u32, f32) and a CUtensorMap by value; thread 0 stores
`a + int(b)` through the pointer (the map rides along unused). It is launched (1 CTA of 32
threads, legacy default stream) by:

- ptxdsl `Function.launch(1, 32, (buf, 7, 1.5, tmap))`, converting and checking every argument
  on every call, its driver call made from C (`ptxdsl._launch_c`), and the same with that call
  through cuda.bindings (what an install without a compiler, or PTXDSL_C_LAUNCH=0, gets);
- raw cuda.bindings `cuLaunchKernel` with the arguments packed once beforehand (the floor a
  binding-level caller gets), and `cuLaunchKernelEx` with the launch configuration built
  beforehand too (the call `Function.launch` makes);
- cuda.core `launch(stream, config, kernel, *args)`;
- CuPy: the same cubin through `RawModule(path=...).get_function(...)`, called with a CuPy
  array, NumPy scalars and the map as a NumPy structured scalar;
- PyTorch: `Function.launch` on `torch.cuda.current_stream()`, and the kernel as a
  `ptxdsl.torch.kernel_op` custom op, eager and under `torch.compile(fullgraph=True)` (the
  default mode, and mode="reduce-overhead", where each call replays a CUDA graph).

Each sample is the mean over 500 launches timed with perf_counter (the stream is synchronized
outside the timed region, and 500 stays below the launch queue depth so the host never waits
for the GPU); 40 samples per row after a warm-up. The launches (not the torch rows) are timed
in turn, one sample of each before the next of any, so the order they are listed in gives none
a warmer or colder host; the bare driver call from C, with everything prepared, is among them,
so what ptxdsl's own work costs reads off the same run.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from benchmarks.common import Section, host_us_interleaved, host_us_per_call

CALLS = 500
REPS = 40
OURS = "ptxdsl Function.launch (args converted and checked each call)"
RAW = "raw cuda.bindings cuLaunchKernel, args packed beforehand"
C_FLOOR = "the driver call alone from C (config and args prepared)"
CORE = "cuda.core launch(stream, config, kernel, *args)"


def build_module():
    from ptxdsl import Kernel, Module, t
    k = Kernel("launch_probe", maxntid=32)
    out = k.param_ptr("out")
    a = k.param(t.u32, "a")
    b = k.param(t.f32, "b")
    k.param_tensormap("tmap")
    with k.if_(k.tid.x == 0):
        value = k.add(k.ld_param(a), k.cvt(k.ld_param(b), t.u32))
        k.st(k.cvta(k.ld_param(out), "global", to=True), value, space="global")
    k.ret()
    return Module([k], name="launch_probe")


def run(section: Section, calls: int = CALLS, reps: int = REPS) -> None:
    from ptxdsl import runtime as rt
    from ptxdsl.runtime._driver import driver
    from ptxdsl.runtime.cluster import launch_config

    drv = driver()
    module = build_module()
    cubin = module.assemble("sm_90")   # the probe needs nothing newer; SASS for Hopper
    mod = rt.load_module(module, use_cubin=True)
    fn = mod["launch_probe"]
    out = rt.DeviceBuffer.zeros((1,), np.uint32)
    backing = rt.DeviceBuffer.zeros((64,), np.float32)
    tmap = rt.TensorMap.tiled(backing, (64,), np.float32, (16,))
    args = (out, 7, 1.5, tmap)

    def sync():
        rt.synchronize()

    def check_out(what: str) -> None:
        sync()
        got = int(out.to_numpy()[0])
        if got != 8:
            raise AssertionError(f"{what}: the kernel wrote {got}, expected 8")
        out.memset(0)

    # The launches compared, timed in turn (host_us_interleaved) so that none meets a colder
    # host than another; each is checked before and after its samples.
    contenders: dict[str, tuple] = {}

    def add(name: str, launch, note: str = "") -> None:
        launch()
        check_out(name)
        contenders[name] = (launch, note)

    def ours():
        fn.launch(1, 32, args)
    add(OURS, ours, f"driver call from {fn.launch_path}")
    if fn.launch_path == "C":
        # The same Function with the C call switched off: what PTXDSL_C_LAUNCH=0 (or an
        # install without a compiler) gives.
        bindings_fn = fn._through_bindings()
        add("ptxdsl Function.launch, driver call through cuda.bindings (no C module)",
            lambda: bindings_fn.launch(1, 32, args))

    # Raw cuda.bindings with arguments packed once.
    packer = rt.ArgPacker("launch_probe", fn.params)
    params = packer.pack(args)
    stream0 = drv.CUstream(0)
    handle = fn.handle
    cu_launch = drv.cuLaunchKernel

    def raw_bindings():
        cu_launch(handle, 1, 1, 1, 32, 1, 1, 0, stream0, params, 0)
    add(RAW, raw_bindings)
    cfg, _ = launch_config(drv, (1, 1, 1), (32, 1, 1), 0, stream0)
    cu_launch_ex = drv.cuLaunchKernelEx

    def raw_bindings_ex():
        cu_launch_ex(cfg, handle, params, 0)
    add("raw cuda.bindings cuLaunchKernelEx, config built and args packed beforehand",
        raw_bindings_ex)
    if fn.launch_path == "C":
        # The driver call alone, from C, with the config and the arguments prepared: what
        # Function.launch costs beyond it is ptxdsl's own work.
        c_cfg = next(iter(fn._configs.values()))
        c_launch, c_func = fn._c_launch, fn._func
        add(C_FLOOR, lambda: c_launch(c_cfg, c_func, params),
            "ptxdsl._launch_c.launch_ex, nothing converted or checked")

    try:
        add(CORE, *_cuda_core_launch(cubin, out, backing))
    except Exception as exc:  # noqa: BLE001 - an optional comparison
        section.skip(CORE, f"{type(exc).__name__}: {exc}")
    try:
        add("CuPy RawModule kernel call", *_cupy_launch(cubin, out, tmap))
    except Exception as exc:  # noqa: BLE001
        section.skip("CuPy RawModule kernel call", f"{type(exc).__name__}: {exc}")

    samples = host_us_interleaved({name: f for name, (f, _) in contenders.items()},
                                  calls=calls, reps=reps, after=sync)
    rows = {name: section.row(name, samples[name], "µs/launch", note)
            for name, (_, note) in contenders.items()}
    check_out("the launches timed in turn")
    ptxdsl_row, raw, core = rows[OURS], rows[RAW], rows.get(CORE)

    # PyTorch: a launch on torch's current stream, and the kernel as a ptxdsl.torch custom op.
    try:
        eager, compiled = _torch_rows(section, fn, args, tmap, calls, reps)
    except Exception as exc:  # noqa: BLE001 - an optional comparison
        section.skip("ptxdsl.torch kernel_op call", f"{type(exc).__name__}: {exc}")
    else:
        # The peer DSL for Python PTX reports about 14 µs eager and 14-22 µs compiled.
        for what, row in (("eager", eager), ("torch.compile(fullgraph=True)", compiled)):
            section.target(f"ptxdsl.torch op call, {what} (median, µs; peer DSL: 14)",
                           row["median"], "< 14", row["median"] < 14)

    # The argument packing alone (no driver call): in C where the module is built (what the
    # launch does for these arguments), and the generated Python pack (the path without it,
    # and for arguments the C packer leaves to Python).
    if fn.launch_path == "C" and fn._packer.c_spec is not None:
        from ptxdsl import _launch_c
        spec, into = fn._packer.c_spec, fn._packer.base
        section.row("part of it: argument conversion + checks in C (launch_packed's packing)",
                    host_us_per_call(lambda: _launch_c.pack(spec, args, into), calls=calls,
                                     reps=reps), "µs/call")
    pack = section.row("part of it: argument conversion + checks in Python (ArgPacker.pack)",
                       host_us_per_call(lambda: fn._packer.pack(args), calls=calls, reps=reps),
                       "µs/call", "the path without the C module, and for arguments C leaves "
                       "to Python (numpy scalars, arrays, dicts)")
    ratio = ptxdsl_row["median"] / raw["median"]
    section.target("ptxdsl / raw cuda.bindings cuLaunchKernel (medians)", ratio, "<= 1.10",
                   ratio <= 1.10)
    if core is not None:
        vs_core = ptxdsl_row["median"] / core["median"]
        section.target("ptxdsl / cuda.core launch (medians)", vs_core, "<= 1.00",
                       vs_core <= 1.00)
    floor = rows.get(C_FLOOR)
    if floor is not None:
        section.note(f"ptxdsl's own work per launch: {ptxdsl_row['median'] - floor['median']:.2f}"
                     f" µs over the bare driver call from C ({floor['median']:.2f} µs): the "
                     "thread's device check, the launch-configuration lookup, taking a free "
                     "argument buffer, and converting and range-checking four arguments in C "
                     "(the common cases: exact ints in range, floats, a DeviceBuffer, a "
                     "TensorMap; anything else goes to the generated Python pack, "
                     f"{pack['median']:.2f} µs here)"
                     + (f"; cuda.core spends {core['median'] - floor['median']:.2f} µs over "
                        "the same call" if core is not None else ""))
    section.note("The launches above are timed in turn, one sample of each before the next "
                 "sample of any, so that none meets a colder host than another")


def _cuda_core_launch(cubin, out, backing) -> tuple:
    try:
        from cuda.core import Device, LaunchConfig, ObjectCode, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, ObjectCode, launch
    dev = Device(0)
    dev.set_current()
    kernel = ObjectCode.from_cubin(cubin).get_kernel("launch_probe")
    try:
        from cuda.core import StridedMemoryView
    except ImportError:
        from cuda.core.utils import StridedMemoryView
    view = StridedMemoryView.from_cuda_array_interface(backing, stream_ptr=-1)
    desc = view.as_tensor_map(box_dim=(16,))
    stream = dev.default_stream
    config = LaunchConfig(grid=1, block=32)
    ptr, a, b = np.uint64(out.ptr), np.uint32(7), np.float32(1.5)

    def core():
        launch(stream, config, kernel, ptr, a, b, desc)
    return core, f"cuda.core {_ver('cuda-core')}; NumPy scalars and a TensorMapDescriptor"


def _torch_rows(section, fn, args, tmap, calls, reps) -> tuple[dict, dict]:
    """Function.launch with stream=torch.cuda.current_stream() (a new wrapper object on every
    call: the launch cache keys on its handle), then the same kernel as a ptxdsl.torch custom op,
    eager and under torch.compile(fullgraph=True). The op allocates its 1-element output each
    call (the custom-op contract); the kernel writes 8 into it."""
    import torch

    from ptxdsl.torch import kernel_op

    def on_torch_stream():
        fn.launch(1, 32, args, stream=torch.cuda.current_stream())
    section.row("ptxdsl Function.launch(..., stream=torch.cuda.current_stream())",
                host_us_per_call(on_torch_stream, calls=calls, reps=reps, warmup=2,
                                 after=torch.cuda.synchronize), "µs/launch",
                f"torch {torch.__version__}; configurations cached: {len(fn._configs)}")
    op = kernel_op("ptxdsl_bench::probe", fn, inputs=("x",),
                   outputs=lambda x: torch.empty_like(x),
                   launch=lambda x, out: dict(grid=1, block=32, args=(out, 7, 1.5, tmap)))
    x = torch.zeros(1, dtype=torch.int32, device=f"cuda:{fn.device}")
    got = int(op(x).item())
    if got != 8:
        raise AssertionError(f"ptxdsl.torch op: the kernel wrote {got}, expected 8")
    def per_call(f):
        return host_us_per_call(f, calls=calls, reps=reps, warmup=2, after=torch.cuda.synchronize)

    eager = section.row("ptxdsl.torch kernel_op call, eager (allocates its output)",
                        per_call(lambda: op(x)), "µs/call",
                        "torch.library operator dispatch + output allocation + Function.launch")
    compiled = torch.compile(lambda t: op(t), fullgraph=True)
    if int(compiled(x).item()) != 8:
        raise AssertionError("ptxdsl.torch op under torch.compile: wrong result")
    compiled_row = section.row("ptxdsl.torch kernel_op call, torch.compile(fullgraph=True)",
                               per_call(lambda: compiled(x)), "µs/call",
                               "the compiled wrapper's call, guards included")
    # What the op's eager call is made of, apart from Function.launch (rows above).
    section.row("part of it: torch.empty_like(x) alone", per_call(lambda: torch.empty_like(x)),
                "µs/call", "the output allocation")
    lib = torch.library.Library("ptxdsl_bench", "FRAGMENT")
    lib.define("alloc_only(Tensor x) -> Tensor")
    lib.impl("alloc_only", lambda t: torch.empty_like(t), "CUDA")
    alloc_only = torch.ops.ptxdsl_bench.alloc_only.default
    section.row("part of it: a torch.library op whose Python kernel only allocates",
                per_call(lambda: alloc_only(x)), "µs/call",
                "dispatch to a Python kernel + the allocation: the floor of any such op")
    plus_one = torch.compile(lambda t: t + 1, fullgraph=True)
    plus_one(x)
    section.row("for reference: torch.compile(fullgraph=True) of `t + 1`, no ptxdsl",
                per_call(lambda: plus_one(x)), "µs/call",
                "what any one-op compiled graph costs per call on this host")
    no_kernel = torch.compile(lambda t: t.view(-1), fullgraph=True)
    no_kernel(x)
    floor = section.row("for reference: torch.compile(fullgraph=True) of `t.view(-1)`, no "
                        "kernel at all", per_call(lambda: no_kernel(x)), "µs/call",
                        "torch.compile's own per-call cost on this host: guards, the "
                        "AOTAutograd and Inductor wrappers")
    section.note(f"torch.compile: the compiled op call costs {compiled_row['median']:.1f} µs, "
                 f"of which {floor['median']:.1f} µs is what a compiled graph with no kernel "
                 f"at all costs per call here (the row above), leaving "
                 f"{compiled_row['median'] - floor['median']:.1f} µs for the op, against "
                 f"{eager['median']:.1f} µs for its eager call. torch.compile's own floor is "
                 f"{floor['median'] / eager['median']:.1f}x the eager op by itself, so no op "
                 "can be called within 1.5x of its eager cost through a compiled graph on this "
                 f"host; what the op adds over that floor is "
                 f"{(compiled_row['median'] - floor['median']) / eager['median']:.2f}x its "
                 "eager call. mode='reduce-overhead' replays a CUDA graph per call and costs "
                 "more for a one-kernel graph (rows below)")
    # mode="reduce-overhead": the compiled graph is a CUDA graph, recorded after warm-up calls
    # and replayed (the op launches on the capturing stream like any other).
    replayed = torch.compile(lambda t: op(t), fullgraph=True, mode="reduce-overhead")
    for _ in range(3):
        got = int(replayed(x).item())
    if got != 8:
        raise AssertionError("ptxdsl.torch op under torch.compile(mode='reduce-overhead'): "
                             f"the replay wrote {got}, expected 8")
    section.row("ptxdsl.torch kernel_op call, torch.compile(fullgraph=True, "
                "mode='reduce-overhead')", per_call(lambda: replayed(x)), "µs/call",
                "a CUDA-graph replay per call, guards included")
    plus_one_ro = torch.compile(lambda t: t + 1, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):
        plus_one_ro(x)
    section.row("for reference: the same mode for `t + 1`, no ptxdsl",
                per_call(lambda: plus_one_ro(x)), "µs/call", "")
    return eager, compiled_row


def _cupy_launch(cubin, out, tmap) -> tuple:
    import cupy
    tmp = tempfile.mkdtemp()          # kept: CuPy may read the file when it first loads it
    path = os.path.join(tmp, "probe.cubin")
    with open(path, "wb") as f:
        f.write(cubin)
    module = cupy.RawModule(path=path)
    kernel = module.get_function("launch_probe")
    memptr = cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(out.ptr, 4, out), 0)
    out_cp = cupy.ndarray((1,), cupy.uint32, memptr)
    record = np.frombuffer(bytes(tmap), dtype=np.dtype([("q", "<u8", (16,))]))[0]
    a, b = np.uint32(7), np.float32(1.5)

    def cupy_call():
        kernel((1,), (32,), (out_cp, a, b, record))
    return cupy_call, f"CuPy {cupy.__version__}; map as a NumPy structured scalar"


def _ver(name: str) -> str:
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:  # noqa: BLE001
        return "?"
