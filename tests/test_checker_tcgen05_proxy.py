"""Checker: `tcgen05-smem-no-proxy-fence` (`ptxdsl/checker/hazards_proxy.py`, issue 35).
tcgen05.mma reads A and B, and tcgen05.cp its source, from shared memory through their
descriptors in the async proxy: a generic write there (st.shared, stmatrix) needs
fence.proxy.async and a barrier first. Kernels built with the builders (tests/tmem_kernels.py's
`Tile` with its descriptors pointing at shared tiles) and hand-written PTX through the front
end, each with its clean twin."""

from __future__ import annotations

import sys

import pytest

from ptxdsl import Addr, Kernel, Module, Reg, ptx, t
from ptxdsl.checker import Hazard, check_kernel, check_module
from ptxdsl.checker.tmem_ops import tcgen05_ops, typed
from ptxdsl.frontend import parse_ptx
from ptxdsl.instructions.tcgen05 import CpShape, Tcgen05Cp
from ptxdsl.instructions.tcgen05_desc import smem_descriptor
from ptxdsl.instructions.tcgen05_mma import Tcgen05Mma, Tcgen05MmaWs
from ptxdsl.instructions.wgmma_desc import SmemLayout
from ptxdsl.testing import assemble_declared
from tests import tmem_kernels as tk
from tests.checker_kernels import clean, ids

_LAYOUT = SmemLayout(t.bf16, 64, 64, "K", "128B")   # 8 KiB, A and B alike
LINES: dict[str, int] = {}


def _mark(name: str) -> None:
    """Remember the caller's next line as `LINES[name]`."""
    LINES[name] = sys._getframe(1).f_lineno + 1


def _tile(name: str) -> tuple[tk.Tile, object, object]:
    """`tk.Tile` whose mma reads tiles A and B of shared memory (its descriptors built from
    their addresses, as a real kernel's are); returns it and the two symbols."""
    s = tk.Tile(name)
    k = s.k
    a = k.shared_array(t.b8, _LAYOUT.nbytes, align=1024, name="A")
    b = k.shared_array(t.b8, _LAYOUT.nbytes, align=1024, name="B")
    s.a, s.b = smem_descriptor(k, _LAYOUT, a), smem_descriptor(k, _LAYOUT, b)
    return s, a, b


def _finish(s: tk.Tile) -> Kernel:
    s.mma()
    s.wait()
    s.load()
    s.free()
    return s.k


def _st(k: Kernel, sym) -> None:
    """Every thread writes its 4 bytes of the tile (generic proxy)."""
    k.st(k.add(k.mov(sym), k.shl(k.tid.x, 2)), k.tid.x, type=t.u32, space="shared::cta")


def st_then_mma(variant: str) -> Kernel:
    """The threads write A with st.shared, then (the alloc's publishing barrier between) thread
    0's mma reads it: `fence` fences first (clean), `none` does not, `one_branch` only when a
    parameter says so, `other_tile` writes a buffer no descriptor names (clean)."""
    s, a, _b = _tile(f"st_mma_{variant}")
    k = s.k
    s.alloc()
    _mark(f"st_{variant}")
    _st(k, k.shared_array(t.b8, 512, name="C") if variant == "other_tile" else a)
    if variant == "fence":
        ptx.fence_proxy_async(k, "shared::cta")
    if variant == "one_branch":
        with k.if_(k.ld_param(k.param(t.u32, "go")) == 1):
            ptx.fence_proxy_async(k, "shared::cta")
    s.publish()
    return _finish(s)


def stmatrix_then_cp(variant: str) -> Kernel:
    """The threads write tile S with stmatrix; thread 0 copies it into tensor memory with
    tcgen05.cp (its source descriptor names S, which the mma does not read) before the mma:
    `fence` fences first."""
    s, _a, _b = _tile(f"stmatrix_cp_{variant}")
    k = s.k
    src = k.shared_array(t.b8, _LAYOUT.nbytes, align=1024, name="S")
    s_desc = smem_descriptor(k, _LAYOUT, src)
    s.alloc()
    regs = [k.mov(0, type=t.b32) for _ in range(4)]
    _mark(f"stmatrix_{variant}")
    k.stmatrix(k.add(k.mov(src), k.shl(k.tid.x, 4)), regs)
    if variant == "fence":
        ptx.fence_proxy_async(k, "shared::cta")
    s.publish()
    with k.if_(k.tid.x == 0):
        _mark(f"cp_{variant}")
        ptx.tcgen05_cp_128x256b(k, ptx.cta_group_1, s.taddr, s_desc)
    return _finish(s)


def tma_then_mma(variant: str) -> Kernel:
    """Thread 0 loads A and B with bulk copies (async proxy writes), every thread waits on
    their mbarrier, thread 0's mma reads them: no generic write, no fence needed (`ok`).
    `st_after` then also writes A with st.shared, unfenced, before the mma."""
    s, a, b = _tile(f"tma_mma_{variant}")
    k = s.k
    src = k.ld_param(k.param_ptr("src"))
    full = k.shared_array(t.b64, 1, align=8, name="full")
    s.alloc()
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_init(k, full, 1)
    s.publish()
    with k.if_(k.tid.x == 0):
        ptx.mbarrier_arrive_expect_tx(k, full, 2 * _LAYOUT.nbytes)
        for sym in (a, b):
            ptx.cp_async_bulk(k, "shared::cluster", "global", sym, src, _LAYOUT.nbytes, full)
    ptx.mbarrier_wait(k, full, 0)
    if variant == "st_after":
        _mark("st_after_tma")
        _st(k, a)
        k.bar_sync(0)
    ptx.tcgen05_fence_after_thread_sync(k)
    return _finish(s)


def _lines(site) -> list[tuple[str, int]]:
    """A site's line and those of the calls that led to it (`_st` is called from the kernel's
    function, which a test calls)."""
    out, loc = [], site.loc
    while loc is not None:
        out.append((loc.file, loc.line))
        loc = loc.caller
    return out


def _only(found, mark: str, where: str) -> None:
    """One `tcgen05-smem-no-proxy-fence`, at the reader, naming the write at `LINES[mark]`."""
    assert ids(found) == [Hazard.TCGEN05_SMEM_NO_PROXY_FENCE.value], [f.format() for f in found]
    (f,) = found
    assert f.sites[0].ptx.startswith(where), f.format()
    assert (__file__, LINES[mark]) in _lines(f.sites[1]), f.format()


def _parsed(k: Kernel) -> list[str]:
    return ids(check_module(parse_ptx(Module([k]).emit())))


@pytest.mark.parametrize("build, variant", [(st_then_mma, "fence"), (st_then_mma, "other_tile"),
                                            (stmatrix_then_cp, "fence"), (tma_then_mma, "ok")])
def test_built_clean_twins_check_clean_and_assemble(build, variant):
    k = build(variant)
    clean(k)
    assert _parsed(k) == []
    Module([k]).assemble()


@pytest.mark.parametrize("build, variant, mark, where", [
    (st_then_mma, "none", "st_none", "tcgen05.mma"),
    (st_then_mma, "one_branch", "st_one_branch", "tcgen05.mma"),
    (stmatrix_then_cp, "none", "stmatrix_none", "tcgen05.cp"),
    (tma_then_mma, "st_after", "st_after_tma", "tcgen05.mma")])
def test_built_generic_write_read_unfenced_is_reported(build, variant, mark, where):
    k = build(variant)
    found = check_kernel(k)
    _only(found, mark, where)
    assert "no fence.proxy.async.shared::cta follows it" in found[0].message
    assert f"the {where} reads shared memory through the async proxy" in found[0].message
    assert _parsed(k) == ids(found)


def test_fenced_by_other_threads_without_a_barrier_is_reported():
    # the fence alone orders only the writing thread's own writes for the async proxy
    s, a, _b = _tile("fenced_no_barrier")
    k = s.k
    s.alloc()
    s.publish()
    _mark("st_late")
    _st(k, a)
    ptx.fence_proxy_async(k, "shared::cta")
    k = _finish(s)
    found = check_kernel(k)
    _only(found, "st_late", "tcgen05.mma")
    assert "no barrier orders it before the tcgen05.mma" in found[0].message


def ring_writers_then_mma(variant: str) -> Kernel:
    """The same hazard another way: warps 1-3 (not the issuing warp 0) write stage i % 2 of a
    two-stage A buffer in a loop of a run-time count, a CTA barrier, then thread 0's mma reads
    that stage through a descriptor built from the run-time stage address, commits, and every
    thread waits on the commit before the next turn. `fence`: the writers fence before the
    barrier (clean for this rule); `none`: they do not."""
    s = tk.Tile(f"ring_writers_{variant}")
    k = s.k
    stages = k.shared_array(t.b8, 2 * _LAYOUT.nbytes, align=1024, name="A")
    s.b = smem_descriptor(k, _LAYOUT, k.shared_array(t.b8, _LAYOUT.nbytes, align=1024,
                                                     name="B"))
    s.alloc()
    s.publish()
    with k.for_range(0, k.ld_param(k.param(t.u32, "n"))) as i:
        stage = k.mad(k.and_(i, 1), _LAYOUT.nbytes, k.mov(stages))
        with k.if_(s.warp != 0):
            _mark(f"ring_st_{variant}")
            k.st(k.add(stage, k.shl(k.tid.x, 2)), k.tid.x, type=t.u32, space="shared::cta")
            if variant == "fence":
                ptx.fence_proxy_async(k, "shared::cta")
        k.bar_sync(0)
        ptx.tcgen05_fence_after_thread_sync(k)
        with k.if_(k.tid.x == 0):
            ptx.tcgen05_mma(k, ptx.kind_f16, ptx.cta_group_1, s.taddr,
                            smem_descriptor(k, _LAYOUT, stage), s.b, tk._IDESC, 0)
            ptx.tcgen05_commit(k, ptx.cta_group_1, s.bar)
        ptx.mbarrier_wait(k, s.bar, k.and_(i, 1))
        ptx.tcgen05_fence_after_thread_sync(k)
    s.load()
    s.free()
    return k


def _proxy(found) -> list:
    return [f for f in found if f.hazard is Hazard.TCGEN05_SMEM_NO_PROXY_FENCE]


def test_ring_writers_in_a_loop_unfenced_is_reported_and_fenced_is_not():
    k = ring_writers_then_mma("none")
    (f,) = _proxy(check_kernel(k))
    assert f.sites[0].ptx.startswith("tcgen05.mma"), f.format()
    assert (__file__, LINES["ring_st_none"]) in _lines(f.sites[1]), f.format()
    assert _proxy(check_kernel(ring_writers_then_mma("fence"))) == []
    Module([ring_writers_then_mma("fence")]).assemble()


def test_ring_writers_fenced_check_clean():
    assert ids(check_kernel(ring_writers_then_mma("fence"))) == []


# -- hand-written PTX through the front end ----------------------------------------------------
# tests/tmem_kernels.py's CLEAN_PTX with the mma's descriptors built from tileA, and a
# tcgen05.cp from tileB; the threads write tileA with st.shared (reader 'mma') or tileB with
# stmatrix (reader 'cp') before the alloc's publishing barrier.
_DECL = "\t.shared .align 8 .b8 bar[8];\n"
_TILES = _DECL + ("\t.shared .align 1024 .b8 tileA[8192];\n"
                  "\t.shared .align 1024 .b8 tileB[8192];\n")
_PUBLISH = "\tbar.sync \t0;\n\ttcgen05.fence::after_thread_sync;\n"
_ADDRS = ("\tmov.u32 \t%r20, tileA;\n\tshl.b32 \t%r21, %r1, 2;\n\tadd.s32 \t%r22, %r20, %r21;\n"
          "\tmov.u32 \t%r23, tileB;\n\tshl.b32 \t%r24, %r1, 4;\n\tadd.s32 \t%r25, %r23, %r24;\n")
_WRITES = {"mma": "\tst.shared.u32 \t[%r22], %r1;\n",
           "cp": "\tstmatrix.sync.aligned.m8n8.x4.shared.b16 [%r25], {%r1, %r1, %r1, %r1};\n"}
_FENCE = "\tfence.proxy.async.shared::cta;\n"
# descriptor = (address >> 4) & 0x3FFF | constant fields (the builders' arithmetic)
_DESCS = ("\tshr.u32 \t%r26, %r20, 4;\n\tand.b32 \t%r27, %r26, 16383;\n"
          "\tcvt.u64.u32 \t%rd7, %r27;\n\tor.b64 \t%rd8, %rd7, 4611686018427387904;\n"
          "\tshr.u32 \t%r28, %r23, 4;\n\tand.b32 \t%r29, %r28, 16383;\n"
          "\tcvt.u64.u32 \t%rd9, %r29;\n\tor.b64 \t%rd10, %rd9, 4611686018427387904;\n")
_MMA = "\ttcgen05.mma.cta_group::1.kind::f16 [%r5], %rd2, %rd3, %r6, %p3;\n"
_CP = "\ttcgen05.cp.cta_group::1.128x256b [%r5], %rd10;\n"


def _ptx(fence: bool, reader: str) -> str:
    """The kernel whose threads write what `reader` ('mma' or 'cp') reads; fenced or not."""
    text = tk.CLEAN_PTX
    mma = _MMA.replace("%rd2, %rd3", "%rd8, %rd8")
    writes = _ADDRS + _WRITES[reader] + (_FENCE if fence else "")
    for old, new in ((_DECL, _TILES), (_PUBLISH, writes + _PUBLISH + _DESCS),
                     (_MMA, (_CP if reader == "cp" else "") + mma)):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize("reader", ["mma", "cp"])
def test_ptx_fenced_checks_clean_and_assembles(reader):
    text = _ptx(True, reader)
    assert [f.format() for f in check_module(parse_ptx(text), notes=True)] == []
    assert assemble_declared(text)[:4] == b"\x7fELF"


@pytest.mark.parametrize("reader, write", [("mma", "st.shared.u32"), ("cp", "stmatrix")])
def test_ptx_unfenced_is_reported_at_the_reader(reader, write):
    text = _ptx(False, reader)
    found = check_module(parse_ptx(text))
    assert ids(found) == [Hazard.TCGEN05_SMEM_NO_PROXY_FENCE.value], [f.format() for f in found]
    lines = text.splitlines()
    assert lines[found[0].loc.line - 1].strip().startswith(f"tcgen05.{reader}")
    assert found[0].sites[1].ptx.startswith(write)


def test_inline_mma_reads_the_tile_its_descriptor_names():
    # inline PTX: the descriptors are bound operands; A in tensor memory (`[$1]`) is no
    # descriptor, so only B's tile counts
    s, a, b = _tile("inline")
    k = s.k
    s.alloc()
    _mark("st_inline")
    _st(k, b)
    s.publish()
    with k.if_(k.tid.x == 0):
        k.asm("tcgen05.mma.cta_group::1.kind::f16 [$0], [$1], $2, $3, 1;",
              ins=[s.taddr, s.taddr, s.b, k.mov(tk._IDESC, type=t.u32)], requires=tk._SM100)
        ptx.tcgen05_commit(k, ptx.cta_group_1, s.bar)
    s.wait()
    s.load()
    s.free()
    found = check_kernel(k)
    assert ids(found) == [Hazard.TCGEN05_SMEM_NO_PROXY_FENCE.value], [f.format() for f in found]
    assert (__file__, LINES["st_inline"]) in _lines(found[0].sites[1])


# -- which operands are descriptors, per form ---------------------------------------------------
def _forms():
    """(name, instruction, the descriptors it reads from shared memory) for the tcgen05.mma
    forms: A from shared memory or tensor memory, .ws, .sp (metadata in TMEM), .block_scale
    (scales in TMEM), and tcgen05.cp."""
    d, tm, meta = Addr(Reg(t.b32, "r1")), Addr(Reg(t.b32, "r2")), Addr(Reg(t.b32, "r3"))
    sa, sb = Addr(Reg(t.b32, "r4")), Addr(Reg(t.b32, "r5"))
    a, b, idesc = Reg(t.b64, "rd1"), Reg(t.b64, "rd2"), Reg(t.b32, "r6")
    en = Reg(t.pred, "p1")
    one = ptx.cta_group_1
    return [
        ("mma", Tcgen05Mma(kind=ptx.kind_f16, d_tmem=d, a_desc=a, b_desc=b, idesc=idesc,
                           enable_input_d=en), (a, b)),
        ("mma_tmem_a", Tcgen05Mma(kind=ptx.kind_f16, d_tmem=d, a_tmem=tm, b_desc=b,
                                  idesc=idesc, enable_input_d=en), (b,)),
        ("mma_ws", Tcgen05MmaWs(kind=ptx.kind_f16, d_tmem=d, a_desc=a, b_desc=b, idesc=idesc,
                                enable_input_d=en, zero_column_mask_desc=Reg(t.b64, "rd3")),
         (a, b)),
        ("mma_sp", Tcgen05Mma(kind=ptx.kind_f16, d_tmem=d, a_desc=a, b_desc=b,
                              sp_meta_tmem=meta, idesc=idesc, enable_input_d=en), (a, b)),
        ("mma_block_scale", Tcgen05Mma(kind=ptx.kind_mxf8f6f4, d_tmem=d, a_desc=a, b_desc=b,
                                       idesc=idesc, enable_input_d=en, scale_A_tmem=sa,
                                       scale_B_tmem=sb), (a, b)),
        ("cp", Tcgen05Cp(one, CpShape.s128x256b, tm, b), (b,)),
    ]


@pytest.mark.parametrize("name", ["mma", "mma_tmem_a", "mma_ws", "mma_sp", "mma_block_scale",
                                  "cp"])
def test_the_descriptors_each_form_reads(name):
    _, insn, want = next(f for f in _forms() if f[0] == name)
    (op,) = typed(insn, 0)
    assert op.descs == want
    # the same from the text's operands (parsed PTX keeps `[...]` as addresses)
    (op,) = tcgen05_ops(insn.opcode(), tuple(insn.operands()), 0)
    assert op.descs == want
