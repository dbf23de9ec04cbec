"""tcgen05 other than the MMA (alloc, dealloc, relinquish_alloc_permit, fence, commit, wait,
shift, cp, ld, st): every overload of the cuda::ptx headers built as cuda::ptx calls it and
compared with the header's text and requirement (sm_100a), assembled in batches; the
ld/st shape x num x pack table without the headers; goldens; refusal rules."""

from __future__ import annotations

import re

import pytest

from ptxdsl import Addr, Module, PtxdslError, VersionError, ptx, t
from ptxdsl.forms import all_forms
from ptxdsl.instructions.tcgen05 import Tcgen05Cp
from ptxdsl.instructions.tcgen05_ldst import Tcgen05Ld, Tcgen05St, TmemShape
from ptxdsl.testing import assemble_declared
from ptxdsl.toolchain import assemble
from tests.cccl_forms import CCCL, asm_shapes, header_forms, needs_cccl, shape
from tests.frontend_support import assert_round_trip
from tests.tma_cases import Case, Env, FormChecks

HEADERS = ("tcgen05_alloc", "tcgen05_fence", "tcgen05_commit", "tcgen05_wait",
           "tcgen05_shift", "tcgen05_cp", "tcgen05_ld", "tcgen05_st")
FORMS = header_forms(HEADERS)
HERE = r"test_tcgen05\.py:\d+: "
LD, ST = HERE + r"tcgen05\.ld\S*: ", HERE + r"tcgen05\.st\S*: "


class TmemEnv(Env):
    """Env plus the operands of tensor memory: the alloc slot, a TMEM address loaded from it,
    a shared-memory descriptor and 32-bit registers to store."""

    slot = property(lambda s: s._get("slot", lambda: s.k.shared_array(
        t.b32, 1, align=4, name="tmem_slot")))
    taddr = property(lambda s: s._get("taddr", lambda: s.k.ld(s.slot)))
    desc = property(lambda s: s._get("desc", lambda: s.k.ld_param(s.k.param(t.u64, "desc"))))
    mask = property(lambda s: s._get("mask", lambda: s.k.ld_param(s.k.param(t.u16, "mask"))))

    def regs(self, n: int) -> list:
        pool = self._get("pool", list)
        while len(pool) < n:
            pool.append(self.k.ld_param(self.k.param(t.b32, f"v{len(pool)}")))
        return pool[:n]


def _array_lengths(header: str, array: str) -> dict[str, int]:
    """The length of cuda::ptx's `out` / `values` array, per PTX form of the header."""
    text = (CCCL / f"{header}.h").read_text()
    return {m.group(1): int(m.group(2)) for m in re.finditer(
        rf"^// (tcgen05\S+) [^\n]*\n(?:[^\n]*\n){{2,4}}?\s*(?:const )?B32 \(&{array}\)\[(\d+)\]",
        text, re.M)}


def _cta_group(q: dict):
    return {"cta_group::1": ptx.cta_group_1, "cta_group::2": ptx.cta_group_2}.get(
        q.get("cta_group"))


def build_form(e: TmemEnv, form: str, name: str, q: dict, lengths: dict) -> None:
    """Call the builder of `name` as cuda::ptx calls it for `form`."""
    fn, cg, opcode = getattr(ptx, name), _cta_group(q), form.split()[0]
    split = (16,) if "16x32bx2" in opcode else ()
    if name == "tcgen05_alloc":
        fn(e.k, cg, e.slot, 64)
    elif name == "tcgen05_dealloc":
        fn(e.k, cg, e.taddr, 64)
    elif name == "tcgen05_commit_multicast":
        fn(e.k, cg, e.bar, e.mask)
    elif name == "tcgen05_commit":
        fn(e.k, cg, e.bar)
    elif name.startswith("tcgen05_cp"):
        fn(e.k, cg, e.taddr, e.desc)
    elif name.startswith("tcgen05_ld"):
        out = fn(e.k, lengths[opcode], e.taddr, *split)
        assert len(out) == lengths[opcode]
    elif name.startswith("tcgen05_st"):
        fn(e.k, e.taddr, *split, e.regs(lengths[opcode]))
    elif cg is not None:
        fn(e.k, cg, *((e.taddr,) if "shift" in name else ()))
    else:
        fn(e.k)


@needs_cccl
def test_header_forms_are_all_ours():
    counts = {h: len(header_forms([h])) for h in HEADERS}
    assert counts == {"tcgen05_alloc": 6, "tcgen05_fence": 2, "tcgen05_commit": 4,
                      "tcgen05_wait": 2, "tcgen05_shift": 2, "tcgen05_cp": 36,
                      "tcgen05_ld": 74, "tcgen05_st": 74}
    assert all(callable(getattr(ptx, n, None)) for _, n, _, _, _ in FORMS)


def _batches():
    """Forms by header and CTA group (ptxas refuses a kernel that mixes ::1 and ::2)."""
    out: dict[tuple[str, str], list] = {}
    for h in HEADERS:
        for form, name, q, isa, sm in header_forms([h]):
            out.setdefault((h, q.get("cta_group", "-")), []).append((form, name, q, isa, sm))
    return out


@needs_cccl
@pytest.mark.parametrize("key", sorted(_batches()), ids=lambda k: f"{k[0]}-{k[1]}")
def test_every_cuda_ptx_form(key):
    """Each header form, called as cuda::ptx calls it, emits the header's text (opcode and
    operand shape of its asm template), needs PTX 8.6 and sm_100a as the header says, and the
    batch assembles for sm_100a."""
    header = key[0]
    lengths = {**_array_lengths("tcgen05_ld", "out"), **_array_lengths("tcgen05_st", "values")}
    e = TmemEnv()
    asm = asm_shapes(header)
    for form, name, q, isa, sm in _batches()[key]:
        build_form(e, form, name, q, lengths)
        stmt = list(e.k.statements())[-1]
        assert stmt.insn.opcode() == form.split()[0], (name, q)
        assert shape(stmt.render()) in asm, (name, stmt.render())
        r = stmt.insn.requires
        assert (isa, sm, str(r.version), str(r.min_target())) == ("8.6", 100, "8.6", "sm_100a")
    m = e.module()
    assert (str(m.version), str(m.target)) == ("8.6", "sm_100a")
    assert assemble_declared(m.emit())[:4] == b"\x7fELF"


# -- the ld/st table, without the headers ------------------------------------------------------
# (shape, 32-bit registers per .x1, largest .xN): the ISA's table of tcgen05.ld/st shapes.
TABLE = [("32x32b", 1, 128), ("16x64b", 1, 128), ("16x128b", 2, 64), ("16x256b", 4, 32),
         ("16x32bx2", 1, 128)]
ROWS = [(s, per, 1 << i) for s, per, top in TABLE for i in range(8) if 1 << i <= top]


def _ldst_name(op: str, shp: str, packed: bool) -> str:
    suffix = {"ld": "_pack_16b", "st": "_unpack_16b"}[op] if packed else ""
    return f"tcgen05_{op}_{shp}{suffix}"


@pytest.mark.parametrize("shp, per, num", ROWS, ids=[f"{s}.x{n}" for s, _, n in ROWS])
def test_ld_st_shape_num_pack(shp, per, num):
    """cuda::ptx's array length gives .xN: num x (registers per .x1)."""
    e = TmemEnv()
    split = (8,) if shp == "16x32bx2" else ()
    for packed in (False, True):
        out = getattr(ptx, _ldst_name("ld", shp, packed))(e.k, num * per, e.taddr, *split)
        getattr(ptx, _ldst_name("st", shp, packed))(e.k, e.taddr, *split, out)
    p, u = ".pack::16b", ".unpack::16b"
    regs = "{" + ", ".join(f"%r{i}" for i in range(2, 2 + num * per)) + "}"
    tail = ", 8" if split else ""
    assert [s.render() for s in e.k.statements()][1:3] == [
        f"tcgen05.ld.sync.aligned.{shp}.x{num}.b32 {regs}, [%r1]{tail};",
        f"tcgen05.st.sync.aligned.{shp}.x{num}.b32 [%r1]{tail}, {regs};"]
    texts = [s.render().split(" ")[0] for s in e.k.statements()][3:]
    assert texts == [f"tcgen05.ld.sync.aligned.{shp}.x{num}{p}.b32",
                     f"tcgen05.st.sync.aligned.{shp}.x{num}{u}.b32"]


@pytest.mark.parametrize("shp", [s for s, _, _ in TABLE])
def test_ld_st_every_num_assembles(shp):
    e = TmemEnv()
    split = (4,) if shp == "16x32bx2" else ()
    for s, per, num in ROWS:
        if s == shp:
            out = getattr(ptx, _ldst_name("ld", shp, num % 2 == 0))(
                e.k, num * per, e.taddr, *split, type=t.f32)
            getattr(ptx, _ldst_name("st", shp, num % 2 == 1))(e.k, e.taddr, *split, out)
    ptx.tcgen05_wait_ld(e.k)
    ptx.tcgen05_wait_st(e.k)
    m = e.module()
    assert (str(m.version), str(m.target)) == ("8.6", "sm_100a")
    assert assemble_declared(m.emit())[:4] == b"\x7fELF"


def test_ld_into_given_registers():
    e = TmemEnv()
    mine = [e.k.reg(t.f32) for _ in range(4)]
    assert ptx.tcgen05_ld_16x256b(e.k, mine, e.taddr) == tuple(mine)
    assert list(e.k.statements())[-1].render() == (
        "tcgen05.ld.sync.aligned.16x256b.x1.b32 {%f1, %f2, %f3, %f4}, [%r1];")


def test_keywords_as_cuda_ptx_names_them():
    e = TmemEnv()
    ptx.tcgen05_alloc(e.k, cta_group=2, dst=e.slot, n_cols=512)
    ptx.tcgen05_commit_multicast(e.k, ptx.cta_group_2, smem_bar=e.bar, cta_mask=0b11)
    ptx.tcgen05_cp_32x128b_warpx4(e.k, 2, taddr=e.taddr, s_desc=e.desc)
    out = ptx.tcgen05_ld_16x32bx2(e.k, out=2, taddr=e.taddr, imm_half_splitoff=32)
    ptx.tcgen05_st_16x32bx2(e.k, taddr=e.taddr, imm_half_splitoff=32, values=out)
    assert [s.render().split(" ")[0] for s in e.k.statements() if "tcgen05" in s.render()] == [
        "tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32",
        "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64",
        "tcgen05.cp.cta_group::2.32x128b.warpx4", "tcgen05.ld.sync.aligned.16x32bx2.x2.b32",
        "tcgen05.st.sync.aligned.16x32bx2.x2.b32"]


def test_generic_pointers_are_converted():
    """cuda::ptx's alloc takes a generic uint32_t* (converted to .shared::cta) and commit a
    generic uint64_t* (to .shared::cluster)."""
    e = TmemEnv()
    ptx.tcgen05_alloc(e.k, 1, e.k.generic_addr(e.slot), 32)
    ptx.tcgen05_commit(e.k, 1, e.bar_generic)
    texts = [s.render() for s in e.k.statements()]
    assert texts[2] == "cvta.to.shared.u64 %rd3, %rd2;" and "[%rd3]" in texts[3]
    assert texts[-2] == "cvta.to.shared::cluster.u64 %rd6, %rd5;" and "[%rd6]" in texts[-1]
    assert assemble_declared(e.module().emit())[:4] == b"\x7fELF"


def test_family_targets():
    """sm_103a and sm_110a take the forms too, and from PTX 8.8 the f targets, every form but
    tcgen05.shift (ptxas 13.5)."""
    e = TmemEnv()
    ptx.tcgen05_alloc(e.k, 1, e.slot, 32)
    ptx.tcgen05_cp_128x256b_b8x16_b6x16_p32(e.k, 1, e.taddr, e.desc)
    ptx.tcgen05_ld_32x32b(e.k, 1, e.taddr)
    for version, target in (("8.8", "sm_100f"), ("8.8", "sm_103a"), ("9.0", "sm_110a"),
                            ("9.0", "sm_110f")):
        m = Module([e.k], version=version, target=target, check=False)
        assert assemble(m.emit(), target)[:4] == b"\x7fELF", target
    e = TmemEnv()
    ptx.tcgen05_shift_down(e.k, 1, e.taddr)
    with pytest.raises(VersionError, match="sm_100f"):
        Module([e.k], version="8.8", target="sm_100f", check=False).emit()


# -- goldens ---------------------------------------------------------------------------------------
def _cg_cases(g: int) -> list[Case]:
    cps = [n for n in ptx.__all__ if n.startswith("tcgen05_cp_")]
    return [
        Case(f"alloc-{g}", lambda e: ptx.tcgen05_alloc(e.k, g, e.slot, 128), "8.6", "sm_100a"),
        Case(f"commit-{g}", lambda e: ptx.tcgen05_commit(e.k, g, e.bar), "8.6", "sm_100a"),
        Case(f"commit-multicast-{g}", lambda e: ptx.tcgen05_commit_multicast(
            e.k, g, e.bar, 0xF), "8.6", "sm_100a"),
        Case(f"shift-{g}", lambda e: ptx.tcgen05_shift_down(e.k, g, e.taddr), "8.6", "sm_100a"),
        *(Case(f"{n[8:]}-{g}", lambda e, n=n: getattr(ptx, n)(e.k, g, e.taddr, e.desc), "8.6",
               "sm_100a") for n in sorted(cps)),
        Case(f"dealloc-{g}", lambda e: ptx.tcgen05_dealloc(e.k, g, e.taddr, 128), "8.6",
             "sm_100a"),
        Case(f"relinquish-{g}", lambda e: ptx.tcgen05_relinquish_alloc_permit(e.k, g), "8.6",
             "sm_100a"),
    ]


def _ldst_cases() -> list[Case]:
    out = []
    for shp, per, top in TABLE:
        split = (64,) if shp == "16x32bx2" else ()
        for packed in (False, True):
            ld, st = _ldst_name("ld", shp, packed), _ldst_name("st", shp, packed)
            num = 2 if packed else top
            out.append(Case(f"{ld[8:]}-x{num}", lambda e, ld=ld, st=st, n=num * per, s=split:
                            getattr(ptx, st)(e.k, e.taddr, *s, getattr(ptx, ld)(
                                e.k, n, e.taddr, *s)), "8.6", "sm_100a"))
    return out


class TestForms(FormChecks):
    ENV = TmemEnv
    GROUPS = {
        "tcgen05/cta_group_1": _cg_cases(1),
        "tcgen05/cta_group_2": _cg_cases(2),
        "tcgen05/fence_wait": [
            Case("fence-before", lambda e: ptx.tcgen05_fence_before_thread_sync(e.k), "8.6",
                 "sm_100a"),
            Case("fence-after", lambda e: ptx.tcgen05_fence_after_thread_sync(e.k), "8.6",
                 "sm_100a"),
            Case("wait-ld", lambda e: ptx.tcgen05_wait_ld(e.k), "8.6", "sm_100a"),
            Case("wait-st", lambda e: ptx.tcgen05_wait_st(e.k), "8.6", "sm_100a"),
        ],
        "tcgen05/ld_st": _ldst_cases(),
    }


# -- refusal rules (one per class of mistake) ------------------------------------------------------
@pytest.mark.parametrize("n_cols, why", [(48, "power of two"), (16, "power of two"),
                                         (1024, "power of two"), (0, "power of two")])
def test_refuse_n_cols(n_cols, why):
    e = TmemEnv()
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.alloc.*'n_cols'.*" + why):
        ptx.tcgen05_alloc(e.k, 1, e.slot, n_cols)
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.dealloc.*'n_cols'.*" + why):
        ptx.tcgen05_dealloc(e.k, 1, e.taddr, n_cols)


def test_refuse_n_cols_float_register():
    e = TmemEnv()
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.alloc.*'n_cols'.*32-bit integer"):
        ptx.tcgen05_alloc(e.k, 1, e.slot, e.k.reg(t.f32))


@pytest.mark.parametrize("bad", ["imm", "f32", "b64", "slot address"])
def test_refuse_taddr(bad):
    e = TmemEnv()
    value = {"imm": 0, "f32": e.k.reg(t.f32), "b64": e.k.reg(t.b64),
             "slot address": e.k.mov(e.slot)}[bad]
    what = "holds a .shared" if bad == "slot address" else "32-bit integer register"
    for call in (lambda: ptx.tcgen05_dealloc(e.k, 1, value, 32),
                 lambda: ptx.tcgen05_shift_down(e.k, 1, value),
                 lambda: ptx.tcgen05_cp_128x256b(e.k, 1, value, e.desc),
                 lambda: ptx.tcgen05_ld_32x32b(e.k, 1, value),
                 lambda: ptx.tcgen05_st_32x32b(e.k, value, e.regs(1))):
        with pytest.raises(PtxdslError, match=HERE + r"tcgen05\.\S+: operand 'taddr'.*" + what):
            call()


def test_refuse_alloc_dst_outside_shared_cta():
    e = TmemEnv()
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.alloc.*'dst'.*shared::cta"):
        ptx.tcgen05_alloc(e.k, 1, e.gsym, 32)


def test_refuse_alloc_dst_slot_too_small_or_misaligned():
    e = TmemEnv()
    small = e.k.shared_array(t.b16, 1, name="small")
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.alloc.*'dst'.*4-byte aligned"):
        ptx.tcgen05_alloc(e.k, 1, small, 32)
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.alloc.*'dst'.*4-byte aligned"):
        ptx.tcgen05_alloc(e.k, 1, Addr(e.smap, 2), 32)
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.alloc.*'dst'.*inside"):
        ptx.tcgen05_alloc(e.k, 1, Addr(e.slot, 4), 32)


def test_refuse_commit_barrier_not_an_mbarrier():
    e = TmemEnv()
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.commit.*'smem_bar'.*mbarrier"):
        ptx.tcgen05_commit(e.k, 1, e.slot)
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.commit.*'smem_bar'.*shared"):
        ptx.tcgen05_commit(e.k, 1, e.gsym)


def test_refuse_commit_mask():
    e = TmemEnv()
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.commit.*'cta_mask'.*16-bit"):
        ptx.tcgen05_commit_multicast(e.k, 1, e.bar, e.v32)
    e.k.reqnctapercluster = (2, 1, 1)
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.commit.*'cta_mask'.*bits 0..1"):
        ptx.tcgen05_commit_multicast(e.k, 1, e.bar, 0b100)
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.commit.*cta_mask"):
        ptx.tcgen05_commit_multicast(e.k, 1, e.bar, None)


def test_refuse_cta_group():
    e = TmemEnv()
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.alloc.*'cta_group'"):
        ptx.tcgen05_alloc(e.k, 3, e.slot, 32)
    with pytest.raises(PtxdslError, match=r"test_tcgen05\.py:\d+: tcgen05_wait_ld: invalid"):
        ptx.tcgen05_wait_ld(e.k, 1)   # wait, fence, ld and st take no CTA group


def test_refuse_mixed_cta_groups_in_a_kernel():
    e = TmemEnv()
    ptx.tcgen05_alloc(e.k, 1, e.slot, 32)
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.cp.*: .cta_group::2 in a kernel whose "
                                                 r"tcgen05.alloc.*mixes single-CTA and CTA-pair"):
        ptx.tcgen05_cp_128x128b(e.k, 2, e.taddr, e.desc)


@pytest.mark.parametrize("dims", [(1, 1, 1), (3, 1, 1)])
def test_refuse_cta_pair_in_an_odd_cluster(dims):
    e = TmemEnv()
    e.k.reqnctapercluster = dims
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.alloc.*CTA pairs.*one without a peer"):
        ptx.tcgen05_alloc(e.k, 2, e.slot, 32)
    ptx.tcgen05_alloc(e.k, 1, e.slot, 32)
    e.k.reqnctapercluster = (2, 2, 1)
    ptx.tcgen05_relinquish_alloc_permit(Env().k, 2)


def test_refuse_cp_multicast_of_another_shape():
    e = TmemEnv()
    with pytest.raises(PtxdslError, match=r"\.128x256b copies take no multicast"):
        Tcgen05Cp(1, "128x256b", e.taddr, e.desc, multicast="warpx4")
    with pytest.raises(PtxdslError, match=r"\.64x128b copies need \.warpx2::02_13 or "):
        Tcgen05Cp(1, "64x128b", e.taddr, e.desc)


def test_refuse_cp_descriptor():
    e = TmemEnv()
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.cp.*'s_desc'.*64-bit"):
        ptx.tcgen05_cp_4x256b(e.k, 1, e.taddr, e.v32)
    with pytest.raises(PtxdslError, match=HERE + r"tcgen05.cp.*'s_desc'.*immediate in "
                                                 r"\[0, 18446744073709551615\]"):
        ptx.tcgen05_cp_4x256b(e.k, 1, e.taddr, -1)


@pytest.mark.parametrize("count", [3, 0, 256])
def test_refuse_ld_st_register_count(count):
    e = TmemEnv()
    with pytest.raises(PtxdslError, match=LD + r"operand 'out'.*2, 4, "
                                                 rf"8, 16, 32, 64, 128 \(2 per .x1\), got {count}"):
        ptx.tcgen05_ld_16x128b(e.k, count, e.taddr)
    with pytest.raises(PtxdslError, match=ST + r"operand 'values'.*got"):
        ptx.tcgen05_st_16x256b(e.k, e.taddr, [e.k.reg(t.b32) for _ in range(count)])


def test_refuse_ld_registers():
    e = TmemEnv()
    r = e.k.reg(t.b32)
    with pytest.raises(PtxdslError, match=LD + r".*operand 'd'.*distinct"):
        ptx.tcgen05_ld_32x32b(e.k, [r, r], e.taddr)
    with pytest.raises(PtxdslError, match=LD + r".*operand 'out\[0\]'.*32-bit register"):
        ptx.tcgen05_ld_32x32b(e.k, [e.k.reg(t.b64)], e.taddr)
    with pytest.raises(PtxdslError, match=LD + r".*'type'.*32-bit type"):
        ptx.tcgen05_ld_32x32b(e.k, 1, e.taddr, type=t.f16)
    with pytest.raises(PtxdslError, match=LD + r".*type= makes the registers"):
        ptx.tcgen05_ld_32x32b(e.k, [r], e.taddr, type=t.f32)


def test_refuse_st_immediates():
    e = TmemEnv()
    with pytest.raises(PtxdslError, match=ST + r".*operand 'values\[0\]'.*32-bit register"):
        ptx.tcgen05_st_32x32b(e.k, e.taddr, [5])


def test_refuse_half_splitoff():
    e = TmemEnv()
    with pytest.raises(PtxdslError, match=LD + r".*'imm_half_splitoff'.*immediate.*register "
                                                 r"is not allowed"):
        ptx.tcgen05_ld_16x32bx2(e.k, 1, e.taddr, e.v32)
    with pytest.raises(PtxdslError, match=ST + r".*'imm_half_splitoff'.*\[0, 2147483647\]"):
        ptx.tcgen05_st_16x32bx2(e.k, e.taddr, -1, e.regs(1))
    with pytest.raises(PtxdslError, match=r"16x32bx2 needs the immediate immHalfSplitoff"):
        Tcgen05Ld(TmemShape.s16x32bx2, 1, e.regs(1), e.taddr)
    with pytest.raises(PtxdslError, match=r"immHalfSplitoff is an operand of .16x32bx2 only"):
        Tcgen05St(TmemShape.s32x32b, 1, e.taddr, e.regs(1), 4)


def test_refuse_num_of_another_shape():
    e = TmemEnv()
    with pytest.raises(PtxdslError, match=r"'num'.*one of 1 \(.x1\), .*32 \(.x32\), got 3"):
        Tcgen05Ld("16x256b", 3, e.regs(12), e.taddr)
    with pytest.raises(PtxdslError, match=r"d has 8 registers; .16x256b.x1 takes 4"):
        Tcgen05Ld("16x256b", 1, e.regs(8), e.taddr)


# -- the front end reads every form back into its class ------------------------------------------
@needs_cccl
@pytest.mark.parametrize("key", sorted(_batches()), ids=lambda k: f"{k[0]}-{k[1]}")
def test_every_cuda_ptx_form_reads_back_typed(key):
    lengths = {**_array_lengths("tcgen05_ld", "out"), **_array_lengths("tcgen05_st", "values")}
    e = TmemEnv()
    for form, name, q, _, _ in _batches()[key]:
        build_form(e, form, name, q, lengths)
    m = e.module()
    assert_round_trip(m, m.emit(), f"tcgen05/{key[0]}-{key[1]}")


def test_reader_leaves_other_tcgen05_forms_alone():
    """tcgen05.mma belongs to another reader; a form with a wrong qualifier stays raw."""
    from ptxdsl.frontend.readers.tcgen05 import tcgen05
    assert tcgen05(("tcgen05", "mma", "cta_group::1", "kind::f16"), []) is None
    assert tcgen05(("tcgen05", "wait::ld", "sync"), []) is None
    assert tcgen05(("tcgen05", "cp", "cta_group::1", "64x128b", "warpx3"), [0, 0]) is None


# -- the forms table ------------------------------------------------------------------------------
def _row_sample(e: TmemEnv, form: str) -> None:
    """Build one instruction of a FORMS row."""
    op = form.split(".")[1].split(" ")[0]
    shp = re.search(r"(\d+x\d+b(?:x2)?)", form)
    split = (4,) if shp and shp.group(1) == "16x32bx2" else ()
    if op in ("ld", "st"):
        name = f"tcgen05_{op}_{shp.group(1)}"
        regs = getattr(ptx, name.replace("_st_", "_ld_"))(e.k, 4, e.taddr, *split)
        if op == "st":
            getattr(ptx, name)(e.k, e.taddr, *split, regs)
    elif op == "cp":
        name = min(n for n in ptx.__all__ if n.startswith(f"tcgen05_cp_{shp.group(1)}"))
        getattr(ptx, name)(e.k, 1, e.taddr, e.desc)
    else:
        call = {
            "alloc": lambda: ptx.tcgen05_alloc(e.k, 1, e.slot, 32),
            "dealloc": lambda: ptx.tcgen05_dealloc(e.k, 1, e.taddr, 32),
            "relinquish_alloc_permit": lambda: ptx.tcgen05_relinquish_alloc_permit(e.k, 1),
            "fence::{before,after}_thread_sync": lambda: ptx.tcgen05_fence_after_thread_sync(e.k),
            "wait::{ld,st}": lambda: ptx.tcgen05_wait_st(e.k),
            "shift": lambda: ptx.tcgen05_shift_down(e.k, 1, e.taddr),
            "commit": lambda: (ptx.tcgen05_commit_multicast(e.k, 1, e.bar, 1) if "multicast"
                               in form else ptx.tcgen05_commit(e.k, 1, e.bar)),
        }[op]
        call()


def test_forms_rows_are_what_the_builders_need():
    rows = all_forms(("tcgen05", "tcgen05_ldst"))
    assert len(rows) == 21
    for row in rows:
        e = TmemEnv()
        _row_sample(e, row.form)
        insn = list(e.k.statements())[-1].insn
        assert insn.requires == row.requires, row.form
        op = row.form.split(".")[1].split("::")[0]
        assert insn.opcode().split(".")[1].split("::")[0] == op, row.form


# -- fuzzed against ptxas ---------------------------------------------------------------------
def test_builder_agrees_with_ptxas():
    from hypothesis import seed

    from tests.test_fuzz_tma import fuzz_test
    seed(35)(fuzz_test("tcgen05"))()


def _verdict(c) -> str:
    from ptxdsl import fuzz
    (o,) = fuzz.check([c]).outcomes
    return o.verdict


def test_a_tcgen05_check_switched_off_is_a_disagreement(monkeypatch):
    """With 48 columns let through, the builder emits an alloc ptxas rejects."""
    from ptxdsl.fuzz import S, case
    from ptxdsl.instructions import tcgen05
    c = case("tcgen05", "ptx.tcgen05_alloc", (1, S("smem4"), 48),
             text="tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [smem4], 48;")
    assert _verdict(c) == "refused:ptxas"
    monkeypatch.setattr(tcgen05, "N_COLS", (*tcgen05.N_COLS, 48))
    assert _verdict(c) == "accepted:rejected"


def test_a_tcgen05_policy_rule_removed_is_a_disagreement(monkeypatch):
    """ptxas takes an immediate TMEM address in tcgen05.dealloc; only the rule says why not."""
    from ptxdsl.fuzz import case, policy
    c = case("tcgen05", "ptx.tcgen05_dealloc", (1, 0, 32),
             text="tcgen05.dealloc.cta_group::1.sync.aligned.b32 0, 32;")
    assert _verdict(c) == "refused:policy:tcgen05-taddr-immediate"
    monkeypatch.setattr(policy, "RULES", [r for r in policy.RULES
                                          if r.id != "tcgen05-taddr-immediate"])
    assert _verdict(c) == "refused:accepted"


TCGEN05_CLASSES = {"Tcgen05Alloc", "Tcgen05Dealloc", "Tcgen05RelinquishAllocPermit",
                   "Tcgen05Fence", "Tcgen05Wait", "Tcgen05Commit", "Tcgen05Shift", "Tcgen05Cp",
                   "Tcgen05Ld", "Tcgen05St"}


def test_fuzzed_builder_calls_read_back_typed():
    """Every call the fuzz strategy makes that the builder takes reads back into its class."""
    from collections import Counter

    from ptxdsl import Kernel, fuzz
    from ptxdsl.frontend import parse_ptx
    from ptxdsl.frontend.compare import first_difference, instructions
    from ptxdsl.fuzz.oracle import build as build_case
    from tests.frontend_support import unread
    from tests.fuzz_cover import draw_until_covered
    from tests.tma_cases import unchecked_module

    seen: Counter[str] = Counter()

    def run(cases):
        kernels = [k for k in (build_case(i, c) for i, c in enumerate(cases))
                   if isinstance(k, Kernel)]
        text = unchecked_module(kernels).emit()
        parsed = parse_ptx(text, file="tcgen05.ptx")
        for k in kernels:
            body = parsed.function(k.name).body
            diff = first_difference(k.body, body, raw_ok=unread())
            assert diff is None, f"{k.name}: {diff}"
            seen.update(type(s.insn).__name__ for s in instructions(body))

    draw_until_covered(fuzz.strategies["tcgen05"], fuzz.BATCH, 10, run,
                       lambda: TCGEN05_CLASSES <= set(seen))
    assert TCGEN05_CLASSES <= set(seen), TCGEN05_CLASSES - set(seen)
