"""ptxdsl's runtime: the only layer that talks to the CUDA driver (cuda.bindings.driver).

Importing this package never touches the driver; the first call that needs it runs cuInit.
`gpu_skip_reason()` says why GPU tests cannot run here (None when they can).

Main entry points::

  load_module(module, *, device=0, use_cubin=False, cache=True, cache_dir=None) -> LoadedModule
  load_ptx(text, *, name="<ptx>", ...)                                        -> LoadedModule
  load_object_code(cuda.core ObjectCode, *, ptx=None, device=0)               -> LoadedModule
  LoadedModule[name] -> Function;  Function.launch(grid, block, args, *, shared_mem=0,
                                                   stream=None, cluster=None)
  (cluster launches are checked first: `runtime.cluster.check_cluster`, the non-portable
   attribute above 8 CTAs, cuOccupancyMaxActiveClusters)
  DeviceBuffer, Stream, Event, synchronize(timeout=None)
  TensorMap.tiled / encode_tiled / TensorMap.from_array, TiledDesc, validate (no GPU needed)
  device_info(device=0) -> DeviceInfo

More than one device (every object belongs to the device it was made on, `device=N`)::

  load_on_devices(module, devices=None) -> {device: LoadedModule}
  enable_peer_access(device, peer) / disable_peer_access / can_access_peer /
  enable_all_peer_access, copy_peer(dst, src), HostBuffer (pinned, mapped on every device),
  Stream.wait(event) (cross-device ordering), pointer_device(ptr), multi_gpu_skip_reason(n)
  SymmetricBuffers.from_torch(handle) / SymmetricBuffers.allocate(nbytes, devices=...):
  every rank's buffer and signal pad (symmetric memory), tensor maps per peer
"""

from __future__ import annotations

from ptxdsl.runtime.args import ArgPacker
from ptxdsl.runtime.cache import CubinCache, cache_key, cached_assemble, default_cache_dir
from ptxdsl.runtime.compat import check_module_compat, max_ptx_version, runs_on
from ptxdsl.runtime.device import DeviceInfo, device_count, device_info, use_device
from ptxdsl.runtime.errors import (
    ArgumentError,
    CacheError,
    CompatibilityError,
    DLPackExportError,
    DriverError,
    JitError,
    KernelNotFoundError,
    LaunchError,
    NoDriverError,
    ObjectCodeError,
    PeerAccessError,
    SharedMemoryError,
    SymmetricMemoryError,
    SyncTimeoutError,
    TensorMapRuleError,
)
from ptxdsl.runtime.launch import Function
from ptxdsl.runtime.loader import (
    LoadedModule,
    load_module,
    load_object_code,
    load_on_devices,
    load_ptx,
    parse_jit_log,
)
from ptxdsl.runtime.memory import DeviceBuffer, Event, Stream, synchronize
from ptxdsl.runtime.peer import (
    HostBuffer,
    can_access_peer,
    copy_peer,
    disable_peer_access,
    enable_all_peer_access,
    enable_peer_access,
    multi_gpu_skip_reason,
    peer_access_enabled,
    pointer_device,
)
from ptxdsl.runtime.ptx_params import PtxParam, parse_entries
from ptxdsl.runtime.symmetric import SymmetricBuffers
from ptxdsl.runtime.tensormap import TensorMap, encode_tiled
from ptxdsl.runtime.tensormap_desc import (
    DataType,
    Interleave,
    L2Promotion,
    OobFill,
    Swizzle,
    TiledDesc,
    Violation,
    validate,
)

__all__ = [
    "ArgPacker", "ArgumentError", "CacheError", "CompatibilityError", "CubinCache",
    "DLPackExportError", "DataType",
    "DeviceBuffer", "DeviceInfo", "DriverError", "Event", "Function", "Interleave",
    "JitError", "KernelNotFoundError", "L2Promotion", "LaunchError", "LoadedModule",
    "NoDriverError", "ObjectCodeError", "OobFill", "PtxParam", "SharedMemoryError", "Stream",
    "Swizzle",
    "SyncTimeoutError", "TensorMap", "TensorMapRuleError", "TiledDesc", "Violation",
    "cache_key", "cached_assemble", "check_module_compat", "default_cache_dir", "device_count",
    "device_info", "encode_tiled", "gpu_skip_reason", "load_module", "load_object_code", "load_ptx",
    "max_ptx_version", "parse_entries", "parse_jit_log", "runs_on", "synchronize",
    "use_device", "validate",
    # more than one device
    "HostBuffer", "PeerAccessError", "can_access_peer", "copy_peer", "disable_peer_access",
    "enable_all_peer_access", "enable_peer_access", "load_on_devices", "multi_gpu_skip_reason",
    "peer_access_enabled", "pointer_device",
    # symmetric memory (a buffer and a signal pad per rank)
    "SymmetricBuffers", "SymmetricMemoryError",
]

_skip_reason: list[str | None] = []


def gpu_skip_reason() -> str | None:
    """None when the driver initialises and device 0 is compute capability 9.x (Hopper);
    otherwise why GPU tests cannot run here. Computed once."""
    if _skip_reason:
        return _skip_reason[0]
    from ptxdsl.runtime._driver import init_error

    reason = init_error()
    if reason is None:
        try:
            if device_count() == 0:
                reason = "no CUDA device visible"
            else:
                info = device_info(0)
                if info.compute_capability[0] != 9:
                    cc = info.compute_capability
                    reason = (f"device 0 is {info.name} (compute capability {cc[0]}.{cc[1]}); "
                              "the GPU tests need a Hopper GPU (compute capability 9.x)")
        except Exception as exc:  # any driver failure means: cannot run GPU tests
            reason = f"CUDA device unusable ({type(exc).__name__}: {exc})"
    _skip_reason.append(reason)
    return reason
