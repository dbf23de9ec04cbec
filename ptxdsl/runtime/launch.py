"""A loaded kernel and its launch through cuLaunchKernelEx.

`Function.launch` packs arguments with the kernel's precomputed `ArgPacker` and calls
cuda.bindings' `cuLaunchKernelEx` with a CUlaunchConfig built and checked the first time a
(grid, block, shared memory, stream, cluster) combination is seen: the grid and block against
the device and kernel limits, the cluster shape (a CLUSTER_DIMENSION attribute), the shared
memory against the device's opt-in limit (raising the kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES
attribute the first time more than the default 48 KB is asked for).

The hot path of a launch is: the thread's device check, one dict lookup for the configuration,
the packer's generated `pack` (every argument converted and checked) and the driver call.
cuLaunchKernelEx with a prepared config is used for every launch, clusters or not. The call is
made from C (`ptxdsl._launch_c`, built at install when a compiler is there) through the entry
point cuGetProcAddress gives, with the addresses ptxdsl holds (the config's struct, the
function, the packed parameters); without that module, through cuda.bindings'
`cuLaunchKernelEx`, which converts its four arguments on every call (BENCHMARKS.md section 3
has both).
"""

from __future__ import annotations

import copy
import functools
import threading
import types
from collections.abc import Mapping, Sequence
from typing import Any, SupportsIndex

from ptxdsl import settings
from ptxdsl.operands import as_int
from ptxdsl.runtime._driver import check, driver, error_for
from ptxdsl.runtime.args import ArgPacker
from ptxdsl.runtime.cluster import (
    PORTABLE_CLUSTER_SIZE,
    Dim3,
    allow_non_portable,
    check_cluster,
    dim3,
    launch_config,
    max_active_clusters,
    max_cluster_rank,
)
from ptxdsl.runtime.device import (
    _tls,
    device_info,
    device_ordinal,
    enter_device,
    leave_device,
    on_device,
    primary_context,
)
from ptxdsl.runtime.errors import LaunchError, SharedMemoryError
from ptxdsl.runtime.memory import stream_key

_CONFIG_CACHE_MAX = 64
# What cuLaunchKernelEx returns for a kernel of another context: CUDA_ERROR_INVALID_HANDLE,
# CUDA_ERROR_INVALID_CONTEXT.
_OTHER_CONTEXT = frozenset({400, 201})


# (the driver it was looked up for, ptxdsl._launch_c.launch_ex with its entry set, or False:
# not built, disabled or no entry)
_c_launch: tuple[Any, Any] | None = None


def c_launcher(drv):
    """`ptxdsl._launch_c.launch_ex` with the driver's cuLaunchKernelEx entry point set, or None:
    when the module is not built, PTXDSL_C_LAUNCH=0 turns it off, or the driver gives no entry
    (then cuda.bindings' call is used). The entry is the one cuda.bindings itself would call:
    the ABI of its CUDA version, and the per-thread default stream where
    CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM asks for it (cuda.bindings' switch). Looked up
    once, for that driver: another one (a test's stand-in, whose handles are not the
    driver's) never gets the C call."""
    global _c_launch
    if _c_launch is not None and _c_launch[0] is drv:
        return _c_launch[1] or None
    query = getattr(drv, "cuGetProcAddress", None)
    if query is None:                  # a stand-in driver (the CPU tests'): cuda.bindings' call
        return None
    if _c_launch is not None:          # looked up for another driver
        return None
    _c_launch = (drv, False)
    if not settings.C_LAUNCH.get():
        return None
    try:
        from ptxdsl import _launch_c
    except ImportError:
        return None
    flags = drv.CUdriverProcAddress_flags
    per_thread = settings.PER_THREAD_STREAM.get()
    version = min(int(getattr(drv, "CUDA_VERSION", 12000)),
                  int(check(drv.cuDriverGetVersion(), "cuDriverGetVersion")))
    err, pfn, _status = query(b"cuLaunchKernelEx", version,
                              flags.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM if per_thread
                              else flags.CU_GET_PROC_ADDRESS_LEGACY_STREAM)
    if int(err) == 0 and int(pfn):
        _launch_c.set_entry(int(pfn))
        _c_launch = (drv, _launch_c.launch_ex)
    return _c_launch[1] or None


def _shared_bytes(value, kernel: str) -> int:
    n = as_int(value)
    if n is None or n < 0:
        raise LaunchError(f"kernel '{kernel}': shared_mem must be a non-negative int "
                          f"(bytes), got {value!r}")
    return n


def _key_exact(v) -> bool:
    """Whether a grid, block or cluster as given may be looked up in the config cache: None, an
    int, or a tuple of ints (numpy integers included, bool not). 1.0, True and 1+0j equal 1 as
    dict keys, so a float or bool shape would hit a config cached for an int and skip the
    checks that refuse it."""
    if type(v) is int or v is None:
        return True
    if type(v) is tuple:
        return all(type(x) is int or as_int(x) is not None for x in v)
    return as_int(v) is not None


class Function:
    """One `.entry` of a loaded module. Call `launch(grid, block, args, ...)`.

    Attributes read from the driver (cuFuncGetAttribute): `num_regs`, `static_shared_bytes`,
    `max_threads_per_block`, `local_bytes`.
    """

    def __init__(self, module, name: str, handle, params):
        self.module = module  # keeps the CUmodule loaded while the function lives
        self.name = name
        self.handle = handle
        self.device = module.device
        self.params = tuple(params)
        self._packer = ArgPacker(name, self.params)
        # Packers not in use. A packer's buffer must not change between its pack and the
        # driver's return, so a launch takes one from here and puts it back; a thread that
        # finds none free (another thread is between the two) makes its own. list.pop and
        # list.append are atomic: no lock on the hot path.
        self._free_packers = [self._packer]
        self._config_lock = threading.Lock()
        self._configs: dict = {}      # (grid, block, shared_mem, stream handle, cluster) -> cfg
        self._pinned: list = []       # launch attributes the cached configs point into
        drv = driver()
        self._launch_ex = drv.cuLaunchKernelEx
        # From C when ptxdsl._launch_c is built: the config cache then holds the addresses of
        # the configs' structs (the objects stay in _pinned) and the function is its address.
        self._c_launch = c_launcher(drv)
        self._c_packed: Any = None
        self._c_spec = self._packer.c_spec if self._c_launch is not None else None
        self._func = int(handle) if self._c_launch is not None else handle
        if self._c_spec is not None:
            # The common launch (int grid and block, the default stream or an int handle, a
            # known configuration, arguments C packs) runs in C with no Python frame;
            # everything else reaches the method below with the same arguments
            # (ptxdsl/_launch_c.c, fast_launch).
            from ptxdsl import _launch_c
            self._c_packed = _launch_c.launch_packed
            # mypy: an instance attribute over the method is deliberate (the C fast path)
            self.launch = functools.partial(  # type: ignore[method-assign]
                _launch_c.fast_launch, (types.MethodType(Function.launch, self), _tls,
                                        self.device, self._configs, self._func, self._c_spec))
        F = drv.CUfunction_attribute

        def attr(a) -> int:
            return int(check(drv.cuFuncGetAttribute(a, handle), "cuFuncGetAttribute",
                             f"kernel '{name}'"))

        self.num_regs = attr(F.CU_FUNC_ATTRIBUTE_NUM_REGS)
        self.static_shared_bytes = attr(F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        self.max_threads_per_block = attr(F.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        self.local_bytes = attr(F.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)
        self._dyn_limit = attr(F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
        self._success = drv.CUresult.CUDA_SUCCESS
        # .explicitcluster / .reqnctapercluster, as the driver read them from the module
        # (CUDA 12+ attributes; absent ones read as "no requirement").
        self.cluster_must_be_set = bool(self._opt_attr(drv, "CLUSTER_SIZE_MUST_BE_SET"))
        self.required_cluster = (self._opt_attr(drv, "REQUIRED_CLUSTER_WIDTH"),
                                 self._opt_attr(drv, "REQUIRED_CLUSTER_HEIGHT"),
                                 self._opt_attr(drv, "REQUIRED_CLUSTER_DEPTH"))
        self.max_cluster_rank = max_cluster_rank(getattr(module, "ptx", "") or "", name)
        self._non_portable = False
        self._check_params(drv)

    def _opt_attr(self, drv, name: str) -> int:
        a = getattr(drv.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}", None)
        if a is None:
            return 0
        err, value = drv.cuFuncGetAttribute(a, self.handle)
        return int(value) if int(err) == 0 else 0

    def _check_cluster(self, grid, cluster, info):
        """The cluster shape to launch `grid` with (`ptxdsl.runtime.cluster.check_cluster`),
        refusing what the driver would refuse with a bare CUDA_ERROR_INVALID_CLUSTER_SIZE."""
        return check_cluster(self.name, grid, cluster, required=self.required_cluster,
                             must_be_set=self.cluster_must_be_set,
                             max_rank=self.max_cluster_rank,
                             cluster_launch=info.cluster_launch, device=info.name)

    def _check_params(self, drv) -> None:
        """Compare declared parameter sizes with the loaded function's (cuFuncGetParamInfo,
        driver 12.4+), so a Module/kernel mismatch fails here and not as garbage values."""
        get = getattr(drv, "cuFuncGetParamInfo", None)
        if get is None:
            return
        for i, p in enumerate(self.params):
            try:
                res = get(self.handle, i)
            except Exception:  # older driver without the entry point
                return
            if int(res[0]) != 0:
                if int(res[0]) == 801:  # CUDA_ERROR_NOT_SUPPORTED
                    return
                raise LaunchError(f"kernel '{self.name}': declares {len(self.params)} "
                                  f"parameters but the loaded function has only {i}")
            size = int(res[2])
            if size != p.size:
                raise LaunchError(f"kernel '{self.name}': parameter '{p.name}' is declared "
                                  f"with {p.size} bytes but the loaded function takes {size}")
        (err, *_rest) = get(self.handle, len(self.params))
        if int(err) == 0:
            raise LaunchError(f"kernel '{self.name}': the loaded function takes more than the "
                              f"{len(self.params)} declared parameters")

    def signature(self) -> str:
        """The kernel's parameters as `name(p: kind, ...)`, in declaration order."""
        return self._packer.signature()

    def _config(self, grid, block, shared_mem: int, stream, cluster):
        """The CUlaunchConfig of a configuration not seen before: everything about the launch
        but its arguments is checked here, once, and the result cached."""
        skey = stream_key(stream)
        sdev = device_ordinal(getattr(stream, "device", self.device))
        if isinstance(sdev, int) and sdev != self.device:
            raise LaunchError(f"kernel '{self.name}' is loaded on device {self.device} but the "
                              f"stream belongs to device {sdev}: load the module there too "
                              f"(load_module(..., device={sdev})) or use a stream of device "
                              f"{self.device}")
        drv = driver()
        shared_mem = _shared_bytes(shared_mem, self.name)
        g = dim3(grid, "grid", self.name)
        b = dim3(block, "block", self.name)
        info = device_info(self.device)
        threads = b[0] * b[1] * b[2]
        limit = min(self.max_threads_per_block, info.max_threads_per_block)
        if threads > limit or any(x > m for x, m in zip(b, info.max_block_dim, strict=True)):
            raise LaunchError(f"kernel '{self.name}': block {b} ({threads} threads) exceeds the "
                              f"limit of {limit} threads per block (max block dims "
                              f"{info.max_block_dim}) for this kernel on {info.name}")
        if any(x > m for x, m in zip(g, info.max_grid_dim, strict=True)):
            raise LaunchError(f"kernel '{self.name}': grid {g} exceeds the device's max grid "
                              f"dims {info.max_grid_dim}")
        self._ensure_shared(shared_mem, info)
        c = self._check_cluster(g, cluster, info)
        # A CUstream of our own: the cache must not pin the caller's stream object.
        hstream = drv.CUstream(skey)
        if c is not None:
            if c[0] * c[1] * c[2] > PORTABLE_CLUSTER_SIZE and not self._non_portable:
                allow_non_portable(drv, self.handle, self.name, c[0] * c[1] * c[2])
                self._non_portable = True
            max_active_clusters(drv, self.handle, self.name, g, b, shared_mem, hstream, c)
        # A .reqnctapercluster kernel carries its cluster shape: launched without the attribute.
        attr_cluster = None if cluster is None or c == self.required_cluster else c
        cfg, attr = launch_config(drv, g, b, shared_mem, hstream, attr_cluster)
        if len(self._configs) >= _CONFIG_CACHE_MAX:
            self._configs.clear()
            self._pinned.clear()
        if attr is not None:
            self._pinned.append(attr)
        if self._c_launch is not None:      # the C call takes the struct's address
            self._pinned.append(cfg)
            cfg = cfg.getPtr()
        # Keyed by the stream's handle, never by the caller's object: a stream destroyed and its
        # handle reused is the same launch target.
        self._configs[grid, block, shared_mem, stream if stream is None or type(stream) is int
                      else skey, cluster] = cfg
        return cfg

    def _ensure_shared(self, shared_mem: SupportsIndex, info) -> None:
        nbytes = _shared_bytes(shared_mem, self.name)
        if nbytes <= self._dyn_limit:
            return
        optin = info.max_shared_per_block_optin
        if nbytes + self.static_shared_bytes > optin:
            raise SharedMemoryError(
                f"kernel '{self.name}': {nbytes} bytes of dynamic shared memory + "
                f"{self.static_shared_bytes} static exceed {info.name}'s limit of {optin} bytes "
                f"per block (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN); at most "
                f"{optin - self.static_shared_bytes} bytes of dynamic shared memory fit")
        drv = driver()
        check(drv.cuFuncSetAttribute(
            self.handle, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            nbytes), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
            f"kernel '{self.name}'")
        self._dyn_limit = nbytes

    @property
    def launch_path(self) -> str:
        """How `launch` calls the driver: "C" (ptxdsl._launch_c) or "cuda.bindings"."""
        return "C" if self._c_launch is not None else "cuda.bindings"

    def _through_bindings(self) -> Function:
        """A copy of this function whose launches call cuda.bindings' cuLaunchKernelEx, as
        without ptxdsl._launch_c (for comparing the two paths in one process): its config
        cache starts empty, since the C path caches struct addresses."""
        twin = copy.copy(self)
        twin.__dict__.pop("launch", None)      # the C fast path of this function's state
        twin._c_launch, twin._c_packed, twin._c_spec, twin._func = None, None, None, self.handle
        twin._configs, twin._pinned, twin._free_packers = {}, [], [ArgPacker(self.name,
                                                                             self.params)]
        twin._config_lock = threading.Lock()
        return twin

    def max_active_clusters(self, block: Dim3, *, shared_mem: SupportsIndex = 0,
                            cluster: Dim3 | None = None) -> int | None:
        """How many clusters of this kernel fit on the GPU at once with `block` threads and
        `shared_mem` bytes of dynamic shared memory per CTA (cuOccupancyMaxActiveClusters):
        the grid, in clusters, of a persistent cluster kernel. `cluster` defaults to the
        kernel's `.reqnctapercluster` shape. None when the driver cannot say; a LaunchError
        when no such cluster fits."""
        with on_device(self.device):
            return self._max_active_clusters(block, shared_mem, cluster)

    def _max_active_clusters(self, block: Dim3, shared_mem: SupportsIndex,
                             cluster: Dim3 | None) -> int | None:
        c = cluster if cluster is not None else (
            self.required_cluster if all(self.required_cluster) else None)
        if c is None:
            raise LaunchError(f"kernel '{self.name}': max_active_clusters needs a cluster "
                              "shape (cluster=...; the kernel declares no .reqnctapercluster)")
        info = device_info(self.device)
        c = dim3(c, "cluster", self.name)
        b = dim3(block, "block", self.name)
        c = self._check_cluster(c, c, info)
        self._ensure_shared(shared_mem, info)
        drv = driver()
        return max_active_clusters(drv, self.handle, self.name, c, b,
                                   _shared_bytes(shared_mem, self.name), drv.CUstream(0), c)

    def launch(self, grid: Dim3, block: Dim3,
               args: Sequence[object] | Mapping[str, object] = (), *,
               shared_mem: SupportsIndex = 0, stream: object = None,
               cluster: Dim3 | None = None) -> None:
        """Launch on `grid` x `block` (ints or 1-3 tuples) with `args` in declaration order
        (or a dict by parameter name); `shared_mem` bytes of dynamic shared memory; `stream`
        a ptxdsl Stream, None (legacy default stream) or a foreign stream; `cluster` the
        cluster shape (cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION). The
        kernel's device's context is current for the launch: where another one was current
        before, it is current again after it (`device.on_device`); where the thread's record
        says the kernel's is current (the common case), nothing is switched."""
        if _tls.device != self.device:
            caller = enter_device(self.device)
            if caller is not None:
                try:
                    return Function.launch(self, grid, block, args, shared_mem=shared_mem,
                                           stream=stream, cluster=cluster)
                finally:
                    leave_device(caller)
        skey = stream if stream is None or type(stream) is int else stream_key(stream)
        cfg = None
        # The exact-int tests first: they spare the common launch three calls.
        if ((type(grid) is int or _key_exact(grid)) and (type(block) is int or _key_exact(block))
                and (cluster is None or _key_exact(cluster))
                and (type(shared_mem) is int or as_int(shared_mem) is not None)):
            cfg = self._configs.get((grid, block, shared_mem, skey, cluster))
        if cfg is None:     # a new configuration, a list shape, or a value to refuse
            cfg = self._new_config(grid, block, shared_mem, stream, skey, cluster)
        err = -1
        if self._c_spec is not None:
            # Packed (on the C call's own stack) and launched in one call where every argument
            # is a common case; -1: nothing launched, the Python pack converts (or refuses).
            err = self._c_packed(cfg, self._func, self._c_spec, args)
        if err < 0:
            err = self._launch_python_packed(cfg, skey, args)
        if err:     # a CUresult, or the C call's int
            if int(err) in _OTHER_CONTEXT and self._context_was_switched():
                # Another library made another context current behind this thread's record
                # (the hot path trusts the record): launch once more, switching (and back).
                return self.launch(grid, block, args, shared_mem=shared_mem, stream=stream,
                                   cluster=cluster)
            raise error_for("cuLaunchKernelEx",
                            err if self._c_launch is None else driver().CUresult(err),
                            f"kernel '{self.name}' grid={grid} block={block} "
                            f"shared_mem={shared_mem} cluster={cluster}")

    def _launch_python_packed(self, cfg, skey, args) -> Any:
        """The launch with the arguments converted by a packer's generated Python `pack`: its
        CUresult (or the C call's int). A packer's buffer must not change between its pack and
        the driver's return, so each launch takes a free one from the pool."""
        free = self._free_packers
        try:
            packer = free.pop()
        except IndexError:              # every packer is in a launch on another thread
            packer = ArgPacker(self.name, self.params)
        try:
            packer.stream = skey or 0
            if self._c_launch is not None:
                return self._c_launch(cfg, self._func, packer.pack(args))
            (err,) = self._launch_ex(cfg, self.handle, packer.pack(args), 0)
            return 0 if err is self._success else err
        finally:
            free.append(packer)

    def _context_was_switched(self) -> bool:
        """After a launch failed as one made from the wrong context does: whether the current
        context is another than this kernel's device's (the thread's record was stale: it is
        dropped, so the launch again switches, and back); False when it was ours (the error
        is the launch's own)."""
        ours = primary_context(self.device)
        if int(check(driver().cuCtxGetCurrent(), "cuCtxGetCurrent")) == int(ours):
            return False
        _tls.device = None
        return True

    def _new_config(self, grid, block, shared_mem, stream, skey, cluster):
        grid, block, cluster = (tuple(v) if type(v) is list else v
                                for v in (grid, block, cluster))
        # Refused before the cache is consulted: a float or bool equals the int it rounds to
        # as a key, so it would find that int's config (see _key_exact).
        if not _key_exact(grid):
            dim3(grid, "grid", self.name)
        if not _key_exact(block):
            dim3(block, "block", self.name)
        if not _key_exact(cluster):
            dim3(cluster, "cluster", self.name)
        if as_int(shared_mem) is None:
            _shared_bytes(shared_mem, self.name)
        with self._config_lock:
            cfg = self._configs.get((grid, block, shared_mem, skey, cluster))
            return cfg if cfg is not None else self._config(grid, block, shared_mem, stream,
                                                            cluster)

    __call__ = launch

    def __repr__(self) -> str:
        return f"<Function {self.signature()} regs={self.num_regs}>"
