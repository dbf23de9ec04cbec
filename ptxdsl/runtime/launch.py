"""A loaded kernel and its launch through cuLaunchKernelEx.

`Function.launch` packs arguments with the kernel's precomputed `ArgPacker`, reuses a cached
CUlaunchConfig per (grid, block, shared memory, stream, cluster), raises the kernel's
MAX_DYNAMIC_SHARED_SIZE_BYTES attribute the first time more than the default 48 KB is asked
for, and checks the request against the device's opt-in limit before the driver sees it.
"""

from __future__ import annotations

import threading

from ptxdsl.runtime._driver import check, driver, error_for
from ptxdsl.runtime.args import ArgPacker
from ptxdsl.runtime.device import device_info, use_device
from ptxdsl.runtime.errors import LaunchError, SharedMemoryError
from ptxdsl.runtime.memory import stream_handle

_CONFIG_CACHE_MAX = 64


def _dim3(value, what: str, kernel: str) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise LaunchError(f"kernel '{kernel}': {what} must be a positive int or a tuple of 1 to "
                          f"3 positive ints, got {value!r}")
    return tuple(dims) + (1,) * (3 - len(dims))


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
        self._lock = threading.Lock()
        self._configs: dict = {}
        drv = driver()
        F = drv.CUfunction_attribute

        def attr(a) -> int:
            return int(check(drv.cuFuncGetAttribute(a, handle), "cuFuncGetAttribute",
                             f"kernel '{name}'"))

        self.num_regs = attr(F.CU_FUNC_ATTRIBUTE_NUM_REGS)
        self.static_shared_bytes = attr(F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        self.max_threads_per_block = attr(F.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        self.local_bytes = attr(F.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)
        self._dyn_limit = attr(F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
        self._check_params(drv)

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
        return self._packer.signature()

    def _config(self, grid, block, shared_mem: int, stream, cluster):
        key = (grid, block, shared_mem, stream if stream is None or isinstance(
            stream, int) else id(stream), cluster)
        cfg = self._configs.get(key)
        if cfg is not None:
            return cfg
        drv = driver()
        g = _dim3(grid, "grid", self.name)
        b = _dim3(block, "block", self.name)
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
        cfg = drv.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = g
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = b
        cfg.sharedMemBytes = shared_mem
        cfg.hStream = stream_handle(stream)
        attrs_ = []
        if cluster is not None:
            c = _dim3(cluster, "cluster", self.name)
            if any(gd % cd for gd, cd in zip(g, c, strict=True)):
                raise LaunchError(f"kernel '{self.name}': grid {g} is not a whole number of "
                                  f"clusters {c} in every dimension")
            if not info.cluster_launch:
                raise LaunchError(f"kernel '{self.name}': {info.name} cannot launch clusters")
            a = drv.CUlaunchAttribute()
            a.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = c
            attrs_.append(a)
        cfg.attrs = attrs_
        cfg.numAttrs = len(attrs_)
        if len(self._configs) >= _CONFIG_CACHE_MAX:
            self._configs.clear()
        # A stream object is keyed by id(): keep it alive as long as its config is cached.
        self._configs[key] = (cfg, attrs_, stream)
        return self._configs[key]

    def _ensure_shared(self, shared_mem: int, info) -> None:
        if not isinstance(shared_mem, int) or shared_mem < 0:
            raise LaunchError(f"kernel '{self.name}': shared_mem must be a non-negative int "
                              f"(bytes), got {shared_mem!r}")
        if shared_mem <= self._dyn_limit:
            return
        optin = info.max_shared_per_block_optin
        if shared_mem + self.static_shared_bytes > optin:
            raise SharedMemoryError(
                f"kernel '{self.name}': {shared_mem} bytes of dynamic shared memory + "
                f"{self.static_shared_bytes} static exceed {info.name}'s limit of {optin} bytes "
                f"per block (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN); at most "
                f"{optin - self.static_shared_bytes} bytes of dynamic shared memory fit")
        drv = driver()
        check(drv.cuFuncSetAttribute(
            self.handle, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            shared_mem), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
            f"kernel '{self.name}'")
        self._dyn_limit = shared_mem

    def launch(self, grid, block, args=(), *, shared_mem: int = 0, stream=None,
               cluster=None) -> None:
        """Launch on `grid` x `block` (ints or 1-3 tuples) with `args` in declaration order
        (or a dict by parameter name); `shared_mem` bytes of dynamic shared memory; `stream`
        a ptxdsl Stream, None (legacy default stream) or a foreign stream; `cluster` the
        cluster shape for cuLaunchKernelEx's CLUSTER_DIMENSION attribute."""
        use_device(self.device)
        if type(grid) is list:
            grid = tuple(grid)
        if type(block) is list:
            block = tuple(block)
        if type(cluster) is list:
            cluster = tuple(cluster)
        with self._lock:
            cfg = self._configs.get((grid, block, shared_mem, stream if stream is None or
                                     isinstance(stream, int) else id(stream), cluster))
            if cfg is None:
                cfg = self._config(grid, block, shared_mem, stream, cluster)
            params = self._packer.pack(args)
            (err,) = driver().cuLaunchKernelEx(cfg[0], self.handle, params, 0)
        if int(err) != 0:
            raise error_for("cuLaunchKernelEx", err, f"kernel '{self.name}' grid={grid} "
                            f"block={block} shared_mem={shared_mem} cluster={cluster}")

    __call__ = launch

    def __repr__(self) -> str:
        return f"<Function {self.signature()} regs={self.num_regs}>"
