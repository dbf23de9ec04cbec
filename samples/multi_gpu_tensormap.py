"""Tensor maps shared across GPUs: one GPU encodes a map on the device and releases it with
`.sys` scope; a kernel on another GPU acquires it with `.sys` scope and TMA-loads tiles of a
tensor in its own memory.

Seeds: CUDA Programming Guide §10.30.1 (device-side encoding from a template) and §10.30.2 ("If
the two threads participating in the release-acquire pattern are on the same device, the .gpu
scope suffices. If the threads are on different devices, the .sys scope must be used").

- `encode_map` (one warp, on the producer GPU P): lane 0 copies the template into shared memory
  and replaces the address, rank, box, dims, stride, element strides and type; `__syncwarp()`;
  the warp copies the map to global memory with `tensormap.cp_fenceproxy ... .release.sys`.
- `consume_tiles` (one CTA per tile, on the consumer GPU C): thread 0 runs
  `fence.proxy.tensormap::generic.acquire.sys [map], 128`, then every tile is TMA-loaded and
  copied out. Ordered after the encode by an event of P waited on by C's stream (no host sync).
  Each flow runs twice on the same map: a first tensor, then the map updated again on P (another
  address, shape and stride) and re-acquired on C. The map lives in C's memory (P writes it
  through peer access), in P's memory (C reads it through peer access: the TMA unit fetches the
  descriptor over NVLink), or in host-pinned memory mapped on both; directions P=0 -> C=1 and
  P=1 -> C=0.
- `producer_rounds` / `consumer_rounds` run at the same time on the two GPUs: each round P points
  the map (in P's memory) at the next tensor of C, releases it (.sys) and raises a flag in C's
  memory (`st.release.sys`); C waits for the flag (`ld.acquire.sys`), re-acquires the map (.sys),
  loads a tile and acknowledges in P's memory. Spins give up after 2 s (status words say so).

With fewer than two Hopper GPUs (with peer access) the sample says so, writes and assembles its
PTX, and runs the same flows with producer and consumer on device 0 (no GPU: offline only).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from ptxdsl import Addr, Kernel, Module, Reg, Symbol, ptx, sample_runner, t
from ptxdsl.sample_runner import POISON, SYNC_TIMEOUT_S, Report, random_array, sample_main

space_shared = ptx.space_shared   # cuda::ptx's tag, as the CUDA code spells it

BOX_ROWS, BOX_COLS = 16, 32           # u16 tiles: 1 KiB
BOX_BYTES = BOX_ROWS * BOX_COLS * 2
THREADS = 32
SHAPES = {"A": (40, 96), "B": (24, 136)}   # (rows, cols) of u16; B is the updated map's tensor
ROUNDS, ROUND_AT = 4, (64, 32)             # handoff: rounds, tile (x, y) (overhangs the bottom)
SPIN_TIMEOUT_NS = 2_000_000_000


# -- kernels -------------------------------------------------------------------------------------
def emit_fields(k: Kernel, smap: Symbol, width: Reg, height: Reg, row_stride: Reg) -> None:
    """Every field but the address, for a 2-D u16 map with a BOX_ROWS x BOX_COLS box."""
    ptx.tensormap_replace_rank(k, space_shared, smap, rank=2)
    ptx.tensormap_replace_box_dim(k, space_shared, smap, 0, BOX_COLS)
    ptx.tensormap_replace_box_dim(k, space_shared, smap, 1, BOX_ROWS)
    ptx.tensormap_replace_global_dim(k, space_shared, smap, 0, width)
    ptx.tensormap_replace_global_dim(k, space_shared, smap, 1, height)
    ptx.tensormap_replace_global_stride(k, space_shared, smap, 0, row_stride)
    for i in range(2):
        ptx.tensormap_replace_element_stride(k, space_shared, smap, i, 1)
    ptx.tensormap_replace_elemtype(k, space_shared, smap, "u16")
    ptx.tensormap_replace_interleave_layout(k, space_shared, smap, "none")
    ptx.tensormap_replace_swizzle_mode(k, space_shared, smap, "none")
    ptx.tensormap_replace_fill_mode(k, space_shared, smap, "zero")


def shape_params(k: Kernel) -> tuple[Symbol, Symbol, Symbol]:
    return k.param(t.u32, "width"), k.param(t.u32, "height"), k.param(t.u64, "row_stride")


def build_encode() -> Kernel:
    k = Kernel("encode_map", reqntid=THREADS)      # one warp: cp_fenceproxy is collective
    template = k.param_tensormap("template")
    address = k.param(t.u64, "global_address")
    width, height, row_stride = shape_params(k)
    out = k.param_ptr("out")                       # 128 bytes: the consumer GPU reads them
    smap = k.shared_array(t.b8, 128, align=128, name="smem_tmap")
    with k.if_(k.tid.x == 0):
        k.copy(smap, template, 128)
        ptx.tensormap_replace_global_address(k, space_shared, smap, k.ld_param(address))
        emit_fields(k, smap, k.ld_param(width), k.ld_param(height), k.ld_param(row_stride))
    k.syncwarp()
    # The map is used on another device: release at system scope.
    ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, ptx.scope_sys, out, smap, 128)
    k.ret()
    return k


def emit_load(k: Kernel, tmap: Reg, coords: tuple[Reg, Reg], tile: Symbol, bar: Symbol,
              wait: Callable[[], object]) -> None:
    with k.if_(k.tid.x == 0):
        ptx.cp_async_bulk_tensor(k, "shared::cluster", "global", tile, tmap, coords, bar)
        ptx.mbarrier_arrive_expect_tx(k, "release", "cta", "shared::cta", bar, BOX_BYTES,
                                      dst="_")
    wait()


def emit_copy_out(k: Kernel, tile: Symbol, dst: Reg) -> None:
    base = k.mov(tile)
    with k.for_range(k.shl(k.tid.x, 4), BOX_BYTES, THREADS * 16) as off:
        chunk = k.ld(Addr(k.add(base, off)), type=t.b32, space="shared::cta", vec=4)
        k.st(Addr(k.add(dst, k.cvt(off, t.u64))), chunk, type=t.b32, space="global")


def build_consume() -> Kernel:
    k = Kernel("consume_tiles", reqntid=THREADS)
    tensor_map, out = k.param_ptr("tensor_map"), k.param_ptr("out")
    tile = k.shared_array(t.b8, BOX_BYTES, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    tmap = k.ld_param(tensor_map)
    with k.if_(k.tid.x == 0):
        # Written by another GPU: acquire at system scope.
        ptx.fence_proxy_tensormap_generic(k, "acquire", "sys", tmap)
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
    k.bar_sync(0)
    bx, by = k.ctaid.x, k.ctaid.y
    emit_load(k, tmap, (k.mul(bx, BOX_COLS), k.mul(by, BOX_ROWS)), tile, bar,
              lambda: ptx.mbarrier_wait(k, bar, 0))
    index = k.mad(by, k.nctaid.x, bx)
    dst = k.add(k.cvta(k.ld_param(out), "global", to=True), k.mul(index, BOX_BYTES, mode="wide"))
    emit_copy_out(k, tile, dst)
    k.ret()
    return k


def emit_spin(k: Kernel, word: Reg, target: Reg | int, status: Reg, stop: Symbol) -> None:
    """(one thread) Wait until `ld.acquire.sys [word] >= target`; after SPIN_TIMEOUT_NS store
    `target` to `status` and 1 to the shared `stop` instead."""
    start = k.read_special("globaltimer")
    head, done = k.fresh_label("spin"), k.fresh_label("spun")
    k.place(head)
    seen = k.ld(Addr(word), type=t.u32, space="global", sem="acquire", scope="sys")
    k.bra(done, when=k.setp("ge", seen, target))
    elapsed = k.sub(k.read_special("globaltimer"), start)
    k.bra(head, when=k.setp("lt", elapsed, SPIN_TIMEOUT_NS))
    k.st(Addr(status), target, type=t.u32, space="global")
    k.st(Addr(stop), 1, type=t.u32, space="shared::cta")
    k.place(done)


def handoff_params(k: Kernel) -> tuple[Symbol, list[Reg]]:
    rounds = k.param(t.u32, "rounds")
    ptrs = [k.cvta(k.ld_param(k.param_ptr(n)), "global", to=True)
            for n in ("flag", "ack", "status")]
    return rounds, ptrs


def build_producer_rounds() -> Kernel:
    k = Kernel("producer_rounds", reqntid=THREADS)
    template = k.param_tensormap("template")
    tensor_map, addresses = k.param_ptr("tensor_map"), k.param_ptr("addresses")
    width, height, row_stride = shape_params(k)
    rounds, (flag, ack, status) = handoff_params(k)
    smap = k.shared_array(t.b8, 128, align=128, name="smem_tmap")
    stop = k.shared_array(t.u32, 1, align=4, name="stop")
    map_global = k.cvta(k.ld_param(tensor_map), "global", to=True)
    table = k.cvta(k.ld_param(addresses), "global", to=True)
    lane0 = k.tid.x == 0
    with k.if_(lane0):
        k.copy(smap, template, 128)
        emit_fields(k, smap, k.ld_param(width), k.ld_param(height), k.ld_param(row_stride))
        k.st(Addr(stop), 0, type=t.u32, space="shared::cta")
    k.syncwarp()
    with k.for_range(0, k.ld_param(rounds)) as r:
        with k.if_(lane0):   # the consumer is done with the previous round's map
            emit_spin(k, ack, r, status, stop)
        k.syncwarp()
        k.break_(when=k.setp("ne", k.ld(stop, type=t.u32, space="shared::cta"), 0))
        with k.if_(lane0):
            entry = k.add(table, k.mul(r, 8, mode="wide"))
            address = k.ld(Addr(entry), type=t.u64, space="global")
            ptx.tensormap_replace_global_address(k, space_shared, smap, address)
        k.syncwarp()
        ptx.tensormap_cp_fenceproxy(k, ptx.sem_release, ptx.scope_sys, map_global, smap, 128)
        k.syncwarp()
        with k.if_(lane0):
            k.st(Addr(flag), k.add(r, 1), type=t.u32, space="global", sem="release",
                 scope="sys")
    k.ret()
    return k


def build_consumer_rounds() -> Kernel:
    k = Kernel("consumer_rounds", reqntid=THREADS)
    tensor_map = k.param_ptr("tensor_map")
    x, y = k.param(t.s32, "x"), k.param(t.s32, "y")
    out = k.param_ptr("out")                  # [rounds][BOX_ROWS][BOX_COLS] u16
    rounds, (flag, ack, status) = handoff_params(k)
    tile = k.shared_array(t.b8, BOX_BYTES, align=128, name="tile")
    bar = k.shared_array(t.b64, 1, align=8, name="bar")
    stop = k.shared_array(t.u32, 1, align=4, name="stop")
    tmap = k.ld_param(tensor_map)
    out_global = k.cvta(k.ld_param(out), "global", to=True)
    coords = (k.ld_param(x), k.ld_param(y))
    lane0 = k.tid.x == 0
    with k.if_(lane0):
        ptx.mbarrier_init(k, bar, 1)
        ptx.fence_proxy_async(k, "shared::cta")
        k.st(Addr(stop), 0, type=t.u32, space="shared::cta")
    k.bar_sync(0)
    phase = ptx.MbarrierPhase(k, bar)
    with k.for_range(0, k.ld_param(rounds)) as r:
        r1 = k.add(r, 1)
        with k.if_(lane0):   # the producer has released round r's map
            emit_spin(k, flag, r1, status, stop)
        k.bar_sync(0)
        k.break_(when=k.setp("ne", k.ld(stop, type=t.u32, space="shared::cta"), 0))
        with k.if_(lane0):
            ptx.fence_proxy_tensormap_generic(k, "acquire", "sys", tmap)
        emit_load(k, tmap, coords, tile, bar, phase.wait)
        emit_copy_out(k, tile, k.add(out_global, k.mul(r, BOX_BYTES, mode="wide")))
        k.bar_sync(0)        # the load (and its read of the map) and the copy are complete
        with k.if_(lane0):
            k.st(Addr(ack), r1, type=t.u32, space="global", sem="release", scope="sys")
    with k.if_(lane0):
        ptx.mbarrier_inval(k, bar)
    k.ret()
    return k


def build_module() -> Module:
    return Module([build_encode(), build_consume(), build_producer_rounds(),
                   build_consumer_rounds()], name="multi_gpu_tensormap")


# -- host side -----------------------------------------------------------------------------------
def tile_at(a: np.ndarray, x: int, y: int) -> np.ndarray:
    tile = np.zeros((BOX_ROWS, BOX_COLS), a.dtype)
    part = a[y:y + BOX_ROWS, x:x + BOX_COLS]
    tile[:part.shape[0], :part.shape[1]] = part
    return tile


def all_tiles(a: np.ndarray) -> np.ndarray:
    ty, tx = -(-a.shape[0] // BOX_ROWS), -(-a.shape[1] // BOX_COLS)
    return np.stack([np.stack([tile_at(a, bx * BOX_COLS, by * BOX_ROWS) for bx in range(tx)])
                     for by in range(ty)])


def shape_args(a: np.ndarray) -> tuple[int, int, int]:
    return a.shape[1], a.shape[0], a.strides[0]


class Flows:
    def __init__(self, rt: ModuleType, devices: tuple[int, int], report: Report) -> None:
        self.rt, self.report = rt, report
        self.devices = sorted(set(devices))
        # Every kernel is resolved (loaded onto its device) before any launch: with CUDA's lazy
        # loading, resolving producer_rounds while consumer_rounds spins on the same GPU would
        # wait for it, so the two would never run at the same time.
        self.mods = {d: m.preload() for d, m in
                     rt.load_on_devices(build_module(), self.devices).items()}
        self.streams = {d: rt.Stream(device=d) for d in self.devices}
        self.rng = np.random.default_rng(2009)
        # The template: a minimal 1-D u8 map; every field the kernels use is replaced.
        self.placeholders = {d: rt.DeviceBuffer.zeros((16,), np.uint8, device=d)
                             for d in self.devices}
        self.templates = {d: rt.TensorMap.tiled(self.placeholders[d], (16,), np.uint8, (16,),
                                                device=d) for d in self.devices}

    def map_memory(self, placement: str, p: int, c: int) -> tuple[Any, int, int]:
        """(buffer, address on p, address on c) of 128 poisoned bytes for the map."""
        rt = self.rt
        if placement == "host":
            buf = rt.HostBuffer(128, device=p)
            buf.array[...] = POISON
            return buf, buf.device_ptr(p), buf.device_ptr(c)
        buf = rt.DeviceBuffer.empty((128,), np.uint8, device=c if placement == "consumer" else p)
        buf.memset(POISON)
        return buf, buf.ptr, buf.ptr

    def flow(self, placement: str, p: int, c: int) -> None:
        rt = self.rt
        buf, map_p, map_c = self.map_memory(placement, p, c)
        where = {"host": "host-pinned memory", "consumer": f"GPU {c}'s memory (written via peer)",
                 "producer": f"GPU {p}'s memory (read via peer)",
                 "device": f"GPU {p}'s memory"}[placement]
        for name, how in (("A", "encoded"), ("B", "updated again")):
            host = random_array(self.rng, SHAPES[name], np.uint16)
            tensor = rt.DeviceBuffer.from_numpy(host, device=c)
            tiles = all_tiles(host)
            out = rt.DeviceBuffer.empty(tiles.shape, np.uint16, device=c)
            out.memset(POISON)
            self.mods[p]["encode_map"].launch(1, THREADS, args=(
                self.templates[p], tensor.ptr, *shape_args(host), map_p), stream=self.streams[p])
            done = rt.Event(timing=False, device=p).record(self.streams[p])
            self.streams[c].wait(done)          # C's kernel starts after P's encode
            self.mods[c]["consume_tiles"].launch(tiles.shape[1::-1], THREADS,
                                                 args=(map_c, out), stream=self.streams[c])
            self.streams[c].synchronize(SYNC_TIMEOUT_S)
            done.close()
            self.report.check_equal(
                f"GPU {p} -> GPU {c}, map in {where}, {how} (.release.sys / .acquire.sys): "
                f"all {tiles.shape[0] * tiles.shape[1]} tiles of {name} "
                f"{list(host.shape)} on GPU {c}", out.to_numpy(), tiles)
        del buf

    def handoff(self, p: int, c: int) -> None:
        rt = self.rt
        hosts = [random_array(self.rng, SHAPES["A"], np.uint16) for _ in range(ROUNDS)]
        tensors = [rt.DeviceBuffer.from_numpy(h, device=c) for h in hosts]
        table = rt.DeviceBuffer.from_numpy(np.array([b.ptr for b in tensors], np.uint64),
                                           device=p)
        map_buf = rt.DeviceBuffer.empty((128,), np.uint8, device=p)
        map_buf.memset(POISON)
        flag = rt.DeviceBuffer.zeros((1,), np.uint32, device=c)    # P raises it, C spins on it
        ack = rt.DeviceBuffer.zeros((1,), np.uint32, device=p)     # C raises it, P spins on it
        status = {d: rt.DeviceBuffer.zeros((1,), np.uint32, device=d) for d in (p, c)}
        out = rt.DeviceBuffer.empty((ROUNDS, BOX_ROWS, BOX_COLS), np.uint16, device=c)
        out.memset(POISON)
        sc = self.streams[c] if p != c else rt.Stream(device=c)    # concurrent on one GPU too
        self.mods[c]["consumer_rounds"].launch(1, THREADS, args=(
            map_buf, *ROUND_AT, out, ROUNDS, flag, ack, status[c]), stream=sc)
        self.mods[p]["producer_rounds"].launch(1, THREADS, args=(
            self.templates[p], map_buf, table, *shape_args(hosts[0]), ROUNDS, flag, ack,
            status[p]), stream=self.streams[p])
        sc.synchronize(SYNC_TIMEOUT_S)
        self.streams[p].synchronize(SYNC_TIMEOUT_S)
        got = out.to_numpy()
        words = [int(w.to_numpy()[0]) for w in (flag, ack, status[p], status[c])]
        self.report.check(f"handoff GPU {p} -> GPU {c}: flag, ack = {ROUNDS}, no spin timed out",
                          words == [ROUNDS, ROUNDS, 0, 0],
                          f"flag={words[0]} ack={words[1]} producer status={words[2]} "
                          f"consumer status={words[3]}")
        for r in range(ROUNDS):
            self.report.check_equal(
                f"handoff GPU {p} -> GPU {c}, concurrent kernels, round {r}: map re-pointed on "
                f"GPU {p}, re-acquired on GPU {c}: tile at {ROUND_AT}", got[r],
                tile_at(hosts[r], *ROUND_AT))


def run(devices: tuple[int, int] | None = None) -> Report:
    from ptxdsl import runtime as rt
    if devices is None:
        devices = (0, 1) if rt.multi_gpu_skip_reason(2) is None else (0, 0)
    p, c = devices
    report = Report("multi_gpu_tensormap")
    if p == c:
        report.note(f"one device: producer and consumer both on GPU {p} (the cross-device flows "
                    "were not run)")
        pairs, placements = [(p, c)], ("device", "host")
    else:
        for a, b in ((p, c), (c, p)):
            rt.enable_peer_access(a, b)
        report.note(f"GPU {p}: {rt.device_info(p)}")
        report.note(f"GPU {c}: {rt.device_info(c)}")
        report.note(f"peer access enabled both ways: {rt.peer_access_enabled(p, c)}, "
                    f"{rt.peer_access_enabled(c, p)}")
        pairs, placements = [(p, c), (c, p)], ("consumer", "producer", "host")
    flows = Flows(rt, (p, c), report)
    phases = [(f"flow {a} -> {b} ({pl})", functools.partial(flows.flow, pl, a, b))
              for pl in placements for a, b in pairs]
    phases += [(f"handoff {a} -> {b}", functools.partial(flows.handoff, a, b)) for a, b in pairs]
    for i, (name, fn) in enumerate(phases):
        try:
            fn()
        except Exception as exc:  # report it, and what could not run after it
            report.check(f"{name} raised", False, f"{type(exc).__name__}: {exc}")
            rest = [n for n, _ in phases[i + 1:]]
            if rest:
                report.check("phases not run after the failure", False, ", ".join(rest))
            break
    return report


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a.startswith("--ptx") or a in ("-h", "--help") for a in argv):
        return sample_main(argv, __doc__, build_module, run)
    from ptxdsl.runtime import gpu_skip_reason, multi_gpu_skip_reason
    reason = multi_gpu_skip_reason(2)
    if reason is None:
        return sample_main(argv, __doc__, build_module, run)
    print("  multi_gpu_tensormap needs 2 Hopper GPUs with peer access: "
          + sample_runner.said_once(reason))
    # The fallback keeps the PTX: under the demo's --save-ptx path, else out/.
    if not any(a.startswith("--save-ptx") for a in argv):
        argv += ["--save-ptx", str(sample_runner.PTX_DIR / "multi_gpu_tensormap.ptx")]
    if gpu_skip_reason() is not None:   # no GPU: the shared offline path assembles it
        return sample_main(argv, __doc__, build_module, run)
    try:
        cubin = build_module().assemble()
        print(f"  assembled with nvJitLink for {cubin.arch}: {len(cubin)} bytes of cubin")
    except Exception as exc:  # no nvJitLink here: the driver's JIT assembles it below
        print(f"  not assembled offline ({type(exc).__name__}: {exc})")
    print("  running the single-GPU part (producer and consumer on device 0)")
    return sample_main(argv, __doc__, build_module, functools.partial(run, (0, 0)))


if __name__ == "__main__":
    raise SystemExit(main())
