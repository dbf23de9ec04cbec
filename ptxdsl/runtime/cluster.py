"""Thread-block cluster launches: the shape checks made before the driver sees a launch.

A kernel states its cluster in PTX (`.reqnctapercluster X, Y, Z`, `.explicitcluster`,
`.maxclusterrank N`; the driver reports the first two as function attributes) and a launch
passes `cluster=(x, y, z)` (cuLaunchKernelEx, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION). The
driver answers a mismatch with a bare CUDA_ERROR_INVALID_CLUSTER_SIZE or, for a cluster that
cannot be co-scheduled, a failed launch; `check_cluster` says which rule was broken first:

- an `.explicitcluster` kernel needs a cluster shape at launch;
- a `.reqnctapercluster` kernel launches with exactly that shape (or none);
- the grid is a whole number of clusters in every dimension;
- at most 8 CTAs per cluster are portable; 9 to 16 need the kernel's
  CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (set on demand by
  `allow_non_portable`); more than 16 never launch on sm_90;
- at most `.maxclusterrank` CTAs.

`max_active_clusters` asks cuOccupancyMaxActiveClusters whether at least one cluster of that
shape, block and shared-memory size fits the GPU at all (0 means the launch cannot run).
"""

from __future__ import annotations

import math
import re
from typing import SupportsIndex, TypeAlias

from ptxdsl.operands import as_int
from ptxdsl.runtime.errors import LaunchError
from ptxdsl.types import MAX_CLUSTER_CTAS as MAX_CLUSTER_SIZE

PORTABLE_CLUSTER_SIZE = 8
_MAXCLUSTERRANK = re.compile(r"\.maxclusterrank\s+(\d+)")


# A grid, block or cluster shape: an int, or 1 to 3 of them (numpy integers too).
Dim3: TypeAlias = SupportsIndex | tuple[SupportsIndex, ...] | list[SupportsIndex]


def dim3(value: Dim3, what: str, kernel: str) -> tuple[int, int, int]:
    # numpy integers count as ints (a grid computed with numpy is common).
    one = as_int(value)
    given = (one,) if one is not None else tuple(
        as_int(d) for d in value) if isinstance(value, tuple | list) else ()
    dims = [d for d in given if d is not None and d >= 1]
    if not 1 <= len(given) <= 3 or len(dims) != len(given):
        raise LaunchError(f"kernel '{kernel}': {what} must be a positive int or a tuple of 1 to "
                          f"3 positive ints, got {value!r}")
    dims += [1] * (3 - len(dims))
    return dims[0], dims[1], dims[2]


def max_cluster_rank(ptx: str, kernel: str) -> int | None:
    """The `.maxclusterrank` of entry `kernel` in PTX text (None when it has none)."""
    m = re.search(r"\.entry\s+" + re.escape(kernel) + r"\s*(?:\([^)]*\))?([^{]*)\{", ptx)
    if m is None:
        return None
    rank = _MAXCLUSTERRANK.search(m.group(1))
    return int(rank.group(1)) if rank else None


def check_cluster(kernel: str, grid: tuple[int, int, int], cluster, *,
                  required: tuple[int, int, int] | None = None, must_be_set: bool = False,
                  max_rank: int | None = None, cluster_launch: bool = True,
                  device: str = "this device") -> tuple[int, int, int] | None:
    """The cluster shape a launch of `grid` runs with (None: no cluster), or a LaunchError
    naming the rule it breaks. `required`: the kernel's `.reqnctapercluster` (None or zeros:
    none); `must_be_set`: `.explicitcluster`; `max_rank`: `.maxclusterrank`."""
    if required is not None and not all(required):
        required = None
    if cluster is None:
        if required is None:
            if must_be_set:
                raise LaunchError(f"kernel '{kernel}' is declared .explicitcluster: launch it "
                                  "with cluster=(x, y, z)")
            return None
        c = required
    else:
        c = dim3(cluster, "cluster", kernel)
        if required is not None and c != required:
            raise LaunchError(f"kernel '{kernel}' declares .reqnctapercluster "
                              f"{', '.join(map(str, required))}; the launch asked for cluster "
                              f"{c}: leave cluster=None or pass {required}")
    if any(gd % cd for gd, cd in zip(grid, c, strict=True)):
        raise LaunchError(f"kernel '{kernel}': grid {grid} is not a whole number of clusters "
                          f"{c} in every dimension")
    size = math.prod(c)
    if size > MAX_CLUSTER_SIZE:
        raise LaunchError(f"kernel '{kernel}': a cluster of {size} CTAs {c} exceeds the "
                          f"hardware limit of {MAX_CLUSTER_SIZE} (portable: "
                          f"{PORTABLE_CLUSTER_SIZE})")
    if max_rank is not None and size > max_rank:
        raise LaunchError(f"kernel '{kernel}' declares .maxclusterrank {max_rank}; the launch "
                          f"asked for a cluster of {size} CTAs {c}")
    if size > 1 and not cluster_launch:
        raise LaunchError(f"kernel '{kernel}': {device} cannot launch clusters "
                          "(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH is 0)")
    return c


def allow_non_portable(drv, handle, kernel: str, size: int) -> None:
    """Set CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED for a cluster of 9-16 CTAs."""
    attr = getattr(drv.CUfunction_attribute,
                   "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED", None)
    err = (drv.cuFuncSetAttribute(handle, attr, 1) if attr is not None else (None,))[0]
    if err is None or int(err) != 0:
        raise LaunchError(f"kernel '{kernel}': a cluster of {size} CTAs is above the portable "
                          f"{PORTABLE_CLUSTER_SIZE} and this driver/device does not allow "
                          "non-portable cluster sizes (cuFuncSetAttribute("
                          f"NON_PORTABLE_CLUSTER_SIZE_ALLOWED) returned {err})")


def launch_config(drv, grid, block, shared_mem: int, hstream, cluster=None):
    """A CUlaunchConfig for cuLaunchKernelEx, with the CLUSTER_DIMENSION attribute when
    `cluster` is given (and the attribute object, which must outlive the config; else None)."""
    cfg = drv.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
    cfg.sharedMemBytes = shared_mem
    cfg.hStream = hstream
    if cluster is None:
        cfg.numAttrs = 0
        return cfg, None
    a = drv.CUlaunchAttribute()
    a.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = cluster
    cfg.attrs = [a]
    cfg.numAttrs = 1
    return cfg, a


def max_active_clusters(drv, handle, kernel: str, grid, block, shared_mem: int, hstream,
                        cluster) -> int | None:
    """cuOccupancyMaxActiveClusters for this launch; a LaunchError when it is 0 (no cluster
    of this shape, block and shared memory fits the GPU). None when the driver cannot say."""
    query = getattr(drv, "cuOccupancyMaxActiveClusters", None)
    if query is None:
        return None
    cfg, _keep = launch_config(drv, grid, block, shared_mem, hstream, cluster)
    err, n = query(handle, cfg)
    if int(err) != 0:
        return None
    if int(n) == 0:
        threads = math.prod(block)
        raise LaunchError(f"kernel '{kernel}': no cluster of {math.prod(cluster)} CTAs "
                          f"{tuple(cluster)} with {threads} threads and {shared_mem} bytes of "
                          "dynamic shared memory each fits on one GPC of this GPU "
                          "(cuOccupancyMaxActiveClusters = 0): use a smaller cluster, block "
                          "or shared memory size")
    return int(n)
