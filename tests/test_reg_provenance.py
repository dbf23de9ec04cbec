"""A register known to hold a symbol's address is checked as the symbol is (issue 28):
`base = k.mov(smem)` / `k.addr_of(smem) + 1024` passed to a helper or an instruction whose
checks know the symbol's extent and alignment (ptxdsl/provenance.py). One test per helper or
instruction family, then the soundness rules: any write drops what the register was known to
hold, a use inside a loop is checked only when the kernel is rendered, and only if nothing
rewrote the register (or the register it was computed from)."""

from __future__ import annotations

import inspect
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptxdsl import Addr, BuildError, Kernel, Module, OperandError, ptx, t
from ptxdsl.epilogue import STAGING_BYTES, TmaStoreEpilogue
from ptxdsl.instructions.wgmma_desc import SmemLayout, descriptor

HERE = os.path.abspath(__file__)


def _here(err) -> bool:
    return os.path.abspath(err.value.loc.file) == HERE


def _line(err) -> int:
    return err.value.loc.line


def _kernel():
    return Kernel("k", reqntid=128)


# -- every check that knows a symbol's extent checks such a register -----------------------
def test_store_matrix_through_a_register_is_checked():
    k = _kernel()
    packed = k.fragment(t.f32, shape=(64, 128)).to_packed(t.bf16)
    small = k.shared_array(t.b8, 1024, align=16, name="small")
    base = k.mov(small)
    with pytest.raises(OperandError, match=r"fragment.store_matrix: operand 'smem': expected "
                       r"an access inside small \(1024 bytes\).*got bytes \[0, 16384\) of "
                       rf"small \(%{base.name} holds the address of small\)") as ei:
        packed.store_matrix(base, 128)
    assert _here(ei)
    tile = k.shared_array(t.b8, 16384 + 256, align=16, name="tile")
    with pytest.raises(OperandError, match=r"got bytes \[1024, 17408\) of tile \(%\w+ holds "
                       r"the address of tile\+1024\)"):
        packed.store_matrix(k.addr_of(tile) + 1024, 128)
    with pytest.raises(OperandError, match=r"a 16-byte aligned address.*tile\+8"):
        packed.store_matrix(k.addr_of(tile) + 8, 128)
    packed.store_matrix(k.addr_of(tile) + 256, 128)


def test_epilogue_staging_register_is_checked():
    k = Kernel("e", reqntid=128)
    tmap = k.tensormap_addr(k.param_tensormap("out"))
    small = k.shared_array(t.b8, 1024, align=1024, name="small")
    with pytest.raises(OperandError, match=r"TmaStoreEpilogue: operand 'staging': expected an "
                       r"access inside small \(1024 bytes\).*holds the address of small") as ei:
        TmaStoreEpilogue(k, k.mov(small), tmap, 1)
    assert _here(ei)
    half = k.shared_array(t.b8, STAGING_BYTES // 2, align=1024, name="half")
    epi = TmaStoreEpilogue(k, k.addr_of(half), tmap, 1)
    with pytest.raises(OperandError, match=r"TmaStoreEpilogue.store: operand 'staging'.*got "
                       r"bytes \[0, 16384\) of half"):
        epi.store(k.fragment(t.f32, shape=(64, 128)).to_packed(t.bf16), 0, 0)
    epi.store(k.fragment(t.f32, shape=(64, 64)).to_packed(t.bf16), 0, 0)     # one box: fits


def test_descriptor_of_a_register_is_checked():
    k = _kernel()
    lay = SmemLayout(t.bf16, 128, 64)                          # 16 KiB, 1024-byte aligned
    small = k.shared_array(t.b8, 1024, align=1024, name="small")
    with pytest.raises(OperandError, match=r"wgmma descriptor: operand 'addr': expected an "
                       r"access inside small \(1024 bytes\).*holds the address of small") as ei:
        descriptor(k, lay, k.mov(small))
    assert _here(ei)
    two = k.shared_array(t.b8, 24576, align=1024, name="two")
    with pytest.raises(OperandError, match=r"got bytes \[9216, 25600\) of two"):
        descriptor(k, lay, k.addr_of(two) + 9216)
    with pytest.raises(BuildError, match=r"must start 1024-byte aligned.*\(offset 512\) "
                       r"\(%\w+ holds the address of two\+512\)"):
        descriptor(k, lay, k.addr_of(two) + 512)
    descriptor(k, lay, k.addr_of(two) + 8192)
    descriptor(k, lay, k.addr_of(two, bits=64) + 8192)


def test_matrix_row_register_is_checked():
    k = _kernel()
    s = k.shared_array(t.b8, 32, align=16, name="s")
    r = k.reg(t.b32)
    with pytest.raises(OperandError, match=r"stmatrix.*expected an access inside s \(32 bytes\) "
                       r"for a 16-byte matrix row, got bytes \[32, 48\) of s") as ei:
        k.stmatrix(k.addr_of(s) + 32, [r])
    assert _here(ei)
    with pytest.raises(OperandError, match=r"ldmatrix.*got bytes \[32, 48\)"):
        k.ldmatrix(Addr(k.mov(s), 32), 1)
    with pytest.raises(BuildError, match=r"offset 8 is not a multiple of 16.*holds the address "
                       r"of s\+8"):
        k.stmatrix(k.addr_of(s) + 8, [r])
    k.stmatrix(k.addr_of(s) + 16, [r])


def test_instruction_addresses_through_a_register_are_checked():
    """ld/st and the TMA families' address checks (`symbol_fit`): extent and alignment."""
    k = _kernel()
    s = k.shared_array(t.u32, 4, align=16, name="s")
    with pytest.raises(OperandError, match=r"ld.shared.u32: operand 'a': expected an access "
                       r"inside s \(16 bytes\).*got bytes \[16, 20\) of s") as ei:
        k.ld(k.addr_of(s) + 16, space="shared", type=t.u32)
    assert _here(ei)
    with pytest.raises(OperandError, match=r"st.shared.v2.u32.*8-byte aligned.*s\+4"):
        k.st(Addr(k.mov(s), 4), [k.reg(t.u32), k.reg(t.u32)], space="shared")
    k.ld(Addr(k.mov(s), 12), space="shared", type=t.u32)
    bars = k.shared_array(t.b64, 2, align=8, name="bars")
    with pytest.raises(OperandError, match=r"mbarrier.init.*got bytes \[16, 24\) of bars"):
        ptx.mbarrier_init(k, k.addr_of(bars) + 16, 1)
    ptx.mbarrier_init(k, k.addr_of(bars) + 8, 1)


# -- soundness: provenance only where it is certain ------------------------------------------
@pytest.mark.parametrize("write", [
    lambda k, r: k.add(r, 0xFFFFFFC0, dst=r),     # r - 64
    lambda k, r: k.mov(0, dst=r),
    lambda k, r: k.ld(Addr(k.param_ptr("p")), space="param", type=t.u32, dst=r),
    lambda k, r: k.asm("mov.u32 $0, 0;", outs=[r]),
], ids=["add-in-place", "mov-into", "ld-into", "asm-output"])
def test_any_write_drops_the_register_provenance(write):
    """`r` starts one past the end of `s`: after any write it may hold anything, so it is
    taken as any register is."""
    k = _kernel()
    s = k.shared_array(t.b8, 64, align=16, name="s")
    r = k.addr_of(s) + 64
    with pytest.raises(OperandError, match=r"got bytes \[64, 80\) of s"):
        k.stmatrix(r, [k.reg(t.b32)])
    write(k, r)
    assert r.origin is None
    k.stmatrix(r, [k.reg(t.b32)])
    k.stmatrix(r + 16, [k.reg(t.b32)])              # nor does what is computed from it


def test_no_provenance_where_it_is_not_certain():
    """A register given to mov (`dst=`), made (or summed) under a guard, or a user's register:
    no provenance. A mov of a parameter's address neither (ld.param reads the window)."""
    k = _kernel()
    s = k.shared_array(t.b8, 16, align=16, name="s")
    r = k.reg(t.u32)
    k.mov(s, dst=r)
    base = k.addr_of(s)
    with k.guard(k.tid.x == 0):
        g = k.mov(s)
        g2 = base + 0              # nor a sum made under a guard
    p = k.mov(k.param(t.u32, "n"))
    assert r.origin is None and g.origin is None and g2.origin is None and p.origin is None
    assert k.reg(t.u32).origin is None
    for reg in (r + 16, g + 16, g2 + 16, k.add(r, 16, dst=k.reg(t.u32))):
        k.stmatrix(reg, [k.reg(t.b32)])


def test_a_use_in_a_loop_is_checked_at_rendering_naming_its_line():
    """A later write in a loop body reaches an earlier use on the next iteration: the use is
    checked when the kernel is rendered, if the register was never written again."""
    k = _kernel()
    s = k.shared_array(t.b8, 32, align=16, name="s")
    r = k.addr_of(s) + 32
    with k.for_range(0, 2):
        line = inspect.currentframe().f_lineno + 1
        k.stmatrix(r, [k.reg(t.b32)])
    with pytest.raises(OperandError, match=r"stmatrix.*got bytes \[32, 48\) of s") as ei:
        Module([k], target="sm_90a").emit()
    assert _here(ei) and _line(ei) == line


def test_a_loop_carried_address_is_not_refused():
    """The row address starts one row before `s` and is stepped at the end of each
    iteration; the store skips the first iteration. The use sees `s - 16` in build order,
    but the register (or the one it is computed from) is rewritten later in the loop."""
    k = _kernel()
    s = k.shared_array(t.b8, 64, align=16, name="s")
    row = k.addr_of(s) - 16
    with k.for_range(0, 5) as i:
        with k.guard(i != 0):
            k.stmatrix(row, [k.reg(t.b32)])
        k.add(row, 16, dst=row)
    base = k.addr_of(s) - 32
    with k.for_range(0, 3) as i:
        at = base + 16                          # computed from base, never itself rewritten
        with k.guard(i != 0):
            k.stmatrix(at, [k.reg(t.b32)])
        k.add(base, 32, dst=base)
    assert "stmatrix" in Module([k], target="sm_90a").emit()


def test_a_discarded_block_leaves_no_check_behind():
    """A block whose body raised is discarded (kernel_flow): its put-off checks go too."""
    k = _kernel()
    s = k.shared_array(t.b8, 32, align=16, name="s")
    r = k.addr_of(s) + 32
    with pytest.raises(BuildError, match="boom"), k.for_range(0, 2):
        k.stmatrix(r, [k.reg(t.b32)])
        raise BuildError("boom")
    Module([k], target="sm_90a").emit()


# -- a register is refused exactly where its symbol is -----------------------------------------
def _verdict(call) -> str | None:
    """The refusal's rule (the message up to 'got'/the register note), or None if accepted."""
    try:
        call()
    except BuildError as e:
        return e.message.split(" (%")[0].split(", got")[0]
    return None


USES = {
    "store_matrix": lambda k, a: k.fragment(t.f32, shape=(64, 64), zero=False)
    .to_packed(t.bf16).store_matrix(a, 64),
    "stmatrix": lambda k, a: k.stmatrix(a, [k.reg(t.b32)]),
    "descriptor": lambda k, a: descriptor(k, SmemLayout(t.bf16, 64, 64), a),
    "ld.v2": lambda k, a: k.ld(a, type=t.u32, vec=2, space="shared"),
    "mbarrier": lambda k, a: ptx.mbarrier_init(k, a, 1),
    "cp.async.bulk": lambda k, a: ptx.cp_async_bulk(k, "global", "shared::cta",
                                                    k.reg(t.u64), a, 256),
}


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(use=st.sampled_from(sorted(USES)), size=st.sampled_from([8, 16, 512, 8192, 12288]),
       align=st.sampled_from([None, 8, 16, 1024]),
       offset=st.one_of(st.integers(-32, 12288), st.integers(-2, 768).map(lambda n: 16 * n),
                        st.integers(-1, 12).map(lambda n: 1024 * n)))
def test_a_register_is_refused_exactly_where_its_symbol_is(use, size, align, offset):
    """`k.addr_of(sym) + offset` gets the verdict `Addr(sym, offset)` gets, for every helper."""
    k = _kernel()
    sym = k.shared_array(t.b8, size, align=align, name="s")
    by_symbol = _verdict(lambda: USES[use](k, Addr(sym, offset)))
    by_register = _verdict(lambda: USES[use](
        k, k.addr_of(sym) + offset if offset >= 0 else k.addr_of(sym) - -offset))
    assert by_register == by_symbol
