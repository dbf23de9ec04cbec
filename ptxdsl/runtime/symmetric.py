"""Symmetric memory: one buffer and one signal pad per rank, each rank's kernels addressing
every peer's (issue 33). The kernels' side is `ptxdsl.signals`.

`SymmetricBuffers` holds what a kernel needs, for one rank: its `rank` and `world_size`, every
rank's buffer and signal-pad address (`buffer_ptrs`, `signal_pad_ptrs`) and device arrays of
them (`buffer_ptrs_dev`, `signal_pad_ptrs_dev`: `world_size` 64-bit pointers in this rank's
device memory, what `signals.peer_pointer` and `signals.barrier_all_ranks` read). It is made

- from PyTorch's symmetric memory, under `torchrun` (one process per GPU)::

      handle = torch.distributed._symmetric_memory.rendezvous(tensor, group)
      bufs = SymmetricBuffers.from_torch(handle)
      bufs.launch(fn, grid, block, (bufs.buffer_ptrs_dev, bufs.signal_pad_ptrs_dev, ...))

  (torch is imported only there, never when ptxdsl is), and launches on the current PyTorch
  stream of the rank's device;
- or from ptxdsl's own memory, one process driving N GPUs: `SymmetricBuffers.allocate(nbytes,
  devices=[0, 1])` allocates a buffer and a zeroed signal pad on each device, enables peer
  access between every pair, and returns one `SymmetricBuffers` per rank (rank i on
  devices[i]), launching on the default stream.

`tensor_maps(...)` encodes one tensor map per rank over the same region of every rank's
buffer, for this rank's device: TMA loads and stores to a peer. `put` and `signal` are the
host's side: a copy engine's copy into a peer's buffer and a write to a peer's signal pad,
ordered on a stream, so a kernel can wait for data that no SM copies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from ptxdsl.runtime.errors import SymmetricMemoryError
from ptxdsl.runtime.tensormap_enums import Dims, TmaDType

#: What a torch symmetric-memory handle (`_SymmetricMemory`) must have, read by `from_torch`.
HANDLE_ATTRIBUTES = ("rank", "world_size", "buffer_ptrs", "signal_pad_ptrs", "buffer_ptrs_dev",
                     "signal_pad_ptrs_dev", "buffer_size", "signal_pad_size")
#: The signal pad `allocate` gives each rank by default (torch's default size too).
DEFAULT_SIGNAL_PAD_BYTES = 2048
_MAX_WORLD = 8       # the GPUs of one host


def _int(what: str, value: Any, low: int = 0, bits: int = 64) -> int:
    """A non-negative (>= low) Python int below 2^bits from an int-like value (numpy ints,
    torch's): addresses, sizes and offsets are 64-bit for the driver and the kernels (an
    address of 2^64 or more was kept, and wrapped or overflowed only in the driver call or the
    kernel); a device ordinal is a 32-bit int."""
    try:
        n = value.__index__() if not isinstance(value, bool) else None
    except (AttributeError, TypeError):
        n = None
    if n is None or n < low:
        raise SymmetricMemoryError(f"SymmetricBuffers: {what} must be an integer >= {low}, "
                                   f"got {value!r}")
    if n >= 1 << bits:
        raise SymmetricMemoryError(f"SymmetricBuffers: {what} must be below 2^{bits}, got "
                                   f"{n}")
    return int(n)


def _pointers(what: str, value: Any, world: int) -> tuple[int, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
        raise SymmetricMemoryError(f"SymmetricBuffers: {what} must be a sequence of "
                                   f"{world} device addresses, got {type(value).__name__}")
    ptrs = tuple(_int(f"{what}[{i}]", p, 1) for i, p in enumerate(value))
    if len(ptrs) != world:
        raise SymmetricMemoryError(f"SymmetricBuffers: {what} has {len(ptrs)} addresses but "
                                   f"world_size is {world} (one per rank)")
    return ptrs


def _fits(what: str, ptrs: tuple[int, ...], size_name: str, size: int) -> None:
    """Every rank's region [ptr, ptr + size) lies below 2^64."""
    last = max(ptrs)
    if last + size > 1 << 64:
        raise SymmetricMemoryError(f"SymmetricBuffers: {what} {last:#x} + {size_name} {size} "
                                   "runs past the 64-bit address space")


@attrs.frozen
class SymmetricBuffers:
    """One rank's view of symmetric memory (see the module doc). Every field is checked:
    `world_size` in 1..8, `rank` in [0, world_size), one non-null address per rank in
    `buffer_ptrs` and `signal_pad_ptrs`, non-null device arrays. `owner` keeps the memory
    alive (the torch handle, or what `allocate` made)."""

    rank: int
    world_size: int
    device: int
    buffer_ptrs: tuple[int, ...]
    signal_pad_ptrs: tuple[int, ...]
    buffer_ptrs_dev: int
    signal_pad_ptrs_dev: int
    buffer_size: int
    signal_pad_size: int
    owner: Any = attrs.field(default=None, eq=False, repr=False)
    torch_stream: bool = False

    def __attrs_post_init__(self) -> None:
        world = _int("world_size", self.world_size, 1)
        if world > _MAX_WORLD:
            raise SymmetricMemoryError(f"SymmetricBuffers: world_size {world} is more than "
                                       f"the {_MAX_WORLD} GPUs of one host")
        rank = _int("rank", self.rank)
        if rank >= world:
            raise SymmetricMemoryError(f"SymmetricBuffers: rank {rank} is not in [0, {world})")
        buffers = _pointers("buffer_ptrs", self.buffer_ptrs, world)
        pads = _pointers("signal_pad_ptrs", self.signal_pad_ptrs, world)
        size = _int("buffer_size", self.buffer_size, 1)
        pad = _int("signal_pad_size", self.signal_pad_size, 4)
        _fits("buffer_ptrs", buffers, "buffer_size", size)
        _fits("signal_pad_ptrs", pads, "signal_pad_size", pad)
        values = {"world_size": world, "rank": rank, "device": _int("device", self.device,
                                                                     bits=31),
                  "buffer_ptrs": buffers, "signal_pad_ptrs": pads,
                  "buffer_ptrs_dev": _int("buffer_ptrs_dev", self.buffer_ptrs_dev, 1),
                  "signal_pad_ptrs_dev": _int("signal_pad_ptrs_dev", self.signal_pad_ptrs_dev,
                                              1),
                  "buffer_size": size, "signal_pad_size": pad}
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_torch(cls, handle: Any, *, device: int | None = None,
                   world_size: int | None = None) -> SymmetricBuffers:
        """From a `torch.distributed._symmetric_memory.rendezvous(...)` handle (its
        `HANDLE_ATTRIBUTES`). `device` defaults to the handle's, else torch's current device;
        `world_size=`, when given, must match the handle's (the group you meant)."""
        missing = [a for a in HANDLE_ATTRIBUTES if not hasattr(handle, a)]
        if missing:
            raise SymmetricMemoryError(
                f"SymmetricBuffers.from_torch: the handle ({type(handle).__name__}) has no "
                f"{', '.join(missing)}; pass what torch.distributed._symmetric_memory."
                "rendezvous(tensor, group) returns")
        got = {a: getattr(handle, a) for a in HANDLE_ATTRIBUTES}
        if world_size is not None and _int("world_size", world_size, 1) != got["world_size"]:
            raise SymmetricMemoryError(
                f"SymmetricBuffers.from_torch: the handle's world_size is "
                f"{got['world_size']!r}, not the {world_size} expected")
        return cls(device=_device_of(handle) if device is None else device, owner=handle,
                   torch_stream=True, **got)

    @classmethod
    def allocate(cls, buffer_size: int, *, devices: Sequence[int] | None = None,
                 signal_pad_size: int = DEFAULT_SIGNAL_PAD_BYTES) -> tuple[SymmetricBuffers, ...]:
        """ptxdsl's own symmetric memory for one process over `devices` (default: every
        visible one, 2 to 8): on each device a buffer of `buffer_size` bytes and a zeroed
        signal pad, the two pointer arrays, and peer access between every pair
        (`PeerAccessError` where the hardware has none). Returns one `SymmetricBuffers` per
        rank, rank i on devices[i]; they share the memory (freed when all are dropped)."""
        from ptxdsl.runtime.device import device_count
        from ptxdsl.runtime.memory import DeviceBuffer
        from ptxdsl.runtime.peer import enable_peer_access
        devs = list(range(device_count())) if devices is None else [
            _int("devices[i]", d) for d in devices]
        if not 1 <= len(devs) <= _MAX_WORLD or len(set(devs)) != len(devs):
            raise SymmetricMemoryError(f"SymmetricBuffers.allocate: devices must be 1 to "
                                       f"{_MAX_WORLD} distinct device ordinals, got {devs}")
        size, pad = _int("buffer_size", buffer_size, 1), _int("signal_pad_size",
                                                              signal_pad_size, 4)
        for d in devs:
            for p in devs:
                if d != p:
                    enable_peer_access(d, p)
        owned: list[Any] = []
        bufs = [DeviceBuffer.zeros(size, device=d) for d in devs]
        pads = [DeviceBuffer.zeros(pad, device=d) for d in devs]
        owned += bufs + pads
        buffer_ptrs = np.array([b.ptr for b in bufs], dtype=np.uint64)
        pad_ptrs = np.array([p.ptr for p in pads], dtype=np.uint64)
        out = []
        for rank, d in enumerate(devs):
            arrays = (DeviceBuffer.from_numpy(buffer_ptrs, device=d),
                      DeviceBuffer.from_numpy(pad_ptrs, device=d))
            owned += arrays
            out.append(cls(rank, len(devs), d, tuple(int(p) for p in buffer_ptrs),
                           tuple(int(p) for p in pad_ptrs), arrays[0].ptr, arrays[1].ptr,
                           size, pad, owned))
        return tuple(out)

    def tensor_maps(self, shape: Dims, dtype: TmaDType, box: Dims, *, byte_offset: int = 0,
                    **kwargs: Any) -> tuple[Any, ...]:
        """One tiled tensor map per rank (index = rank) over `shape` of `dtype` at
        `byte_offset` into that rank's buffer, encoded for this rank's device; the other
        arguments as `TensorMap.tiled`'s. Refused when the region does not fit the buffer."""
        from ptxdsl.runtime.tensormap import TensorMap
        from ptxdsl.runtime.tensormap_desc import TiledDesc
        off = _int("byte_offset", byte_offset)
        maps = []
        for r, base in enumerate(self.buffer_ptrs):
            desc = TiledDesc.from_numpy_order(base + off, shape, dtype, box, **kwargs)
            if r == 0:
                end = off + _extent(desc)
                if end > self.buffer_size:
                    raise SymmetricMemoryError(
                        f"SymmetricBuffers.tensor_maps: the map's region ends at byte {end} "
                        f"of each rank's buffer, which has {self.buffer_size}")
            maps.append(TensorMap.from_desc(desc, device=self.device))
        return tuple(maps)

    def put(self, peer: int, offset: int, src: int, nbytes: int, *,
            stream: object = None) -> None:
        """Copy `nbytes` from `src` (a device address this rank's device can read) to byte
        `offset` of rank `peer`'s buffer with a copy engine (cuMemcpyDtoDAsync on `stream`,
        default `self.stream()`): no SM does the copy, so it overlaps a kernel that computes
        meanwhile. Refused when the region does not fit the buffer."""
        peer, offset = self._peer("put", peer), _int("offset", offset)
        nbytes, src = _int("nbytes", nbytes, 1), _int("src", src, 1)
        if offset + nbytes > self.buffer_size:
            raise SymmetricMemoryError(
                f"SymmetricBuffers.put: bytes [{offset}, {offset + nbytes}) of rank {peer}'s "
                f"buffer, which has {self.buffer_size}")
        self._on_stream("cuMemcpyDtoDAsync", stream, lambda drv, s: drv.cuMemcpyDtoDAsync(
            self.buffer_ptrs[peer] + offset, src, nbytes, s))

    def signal(self, peer: int, index: int, value: int, *, stream: object = None) -> None:
        """Write the 32-bit `value` to word `index` of rank `peer`'s signal pad from `stream`
        (cuStreamWriteValue32, default `self.stream()`) once the stream's earlier work is
        done, after a system-scope memory barrier: a kernel on the peer that reads the word
        with `signals.signal_wait` (an `ld.acquire.sys` spin) then sees everything the
        stream's earlier copies wrote (what `put` then `signal` rely on)."""
        peer, index = self._peer("signal", peer), _int("index", index)
        value = _int("value", value)
        if 4 * index + 4 > self.signal_pad_size:
            raise SymmetricMemoryError(
                f"SymmetricBuffers.signal: word {index} of a {self.signal_pad_size}-byte "
                "signal pad")
        if value >= 1 << 32:
            raise SymmetricMemoryError(f"SymmetricBuffers.signal: value {value} does not fit "
                                       "32 bits")
        self._on_stream("cuStreamWriteValue32", stream, lambda drv, s: drv.cuStreamWriteValue32(
            s, self.signal_pad_ptrs[peer] + 4 * index, value,
            drv.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT))

    def _peer(self, what: str, peer: Any) -> int:
        peer = _int("peer", peer)
        if peer >= self.world_size:
            raise SymmetricMemoryError(f"SymmetricBuffers.{what}: peer {peer} is not a rank "
                                       f"of [0, {self.world_size})")
        return peer

    def _on_stream(self, call: str, stream: object, op: Callable[[Any, Any], Any]) -> None:
        from ptxdsl.runtime._driver import check, driver
        from ptxdsl.runtime.device import on_device
        from ptxdsl.runtime.memory import stream_handle
        with on_device(self.device):
            check(op(driver(), stream_handle(self.stream() if stream is None else stream)),
                  call)

    def stream(self) -> int | None:
        """The stream this rank's kernels launch on: PyTorch's current stream of the rank's
        device for memory from torch, else None (the default stream)."""
        if not self.torch_stream:
            return None
        return int(torch_raw_stream()(self.device))

    def launch(self, fn: Any, grid: Any, block: Any, args: Sequence[Any] = (),
               **kwargs: Any) -> None:
        """`fn.launch(grid, block, args, stream=self.stream(), ...)`; `fn` must be loaded on
        this rank's device."""
        if getattr(fn, "device", self.device) != self.device:
            raise SymmetricMemoryError(f"SymmetricBuffers.launch: kernel "
                                       f"'{getattr(fn, 'name', fn)}' is loaded "
                                       f"on device {fn.device}, rank {self.rank}'s memory is "
                                       f"on device {self.device}")
        if not callable(getattr(fn, "launch", None)):
            raise SymmetricMemoryError(f"SymmetricBuffers.launch: fn must be a loaded kernel "
                                       f"(module.load(device=...)['name']), got "
                                       f"{type(fn).__name__}")
        fn.launch(grid, block, args, stream=self.stream(), **kwargs)


def torch_raw_stream() -> Callable[[int], int]:
    """device index -> the handle of PyTorch's current stream on that device, without building
    a torch.cuda.Stream object (the function inductor's generated code uses); imports torch.
    `ptxdsl.torch`'s operators launch on it too."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda index: torch.cuda.current_stream(index).cuda_stream


def _extent(desc: Any) -> int:
    """Bytes from a map's base to the end of its last element (driver order: dimension 0
    innermost, strides in bytes for dimensions 1 and up)."""
    dims, strides = desc.global_dim, desc.global_strides
    return (dims[0] * desc.data_type.bits + 7) // 8 + sum(
        (n - 1) * s for n, s in zip(dims[1:], strides, strict=False))


def _device_of(handle: Any) -> int:
    """The handle's device ordinal (an int, or a torch.device's index), else torch's current
    device."""
    dev = getattr(handle, "device", None)
    index = getattr(dev, "index", dev)
    if isinstance(index, int) and not isinstance(index, bool):
        return index
    import torch
    return int(torch.cuda.current_device())
