"""An audit of issue 28's helpers (fragments, descriptors, the ring, directives, the CLI, the
cubin cache, ptxdsl.testing) with bad input a careless or hostile user gives. One test per
class of mistake that got through: the error's words and the user's line, with the boundary
that is still accepted."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

from ptxdsl import Addr, BuildError, Kernel, Module, OperandError, PtxdslError, t
from ptxdsl.instructions.wgmma_desc import MatrixDescriptor, SmemLayout
from ptxdsl.pipeline import MbarrierRing
from ptxdsl.runtime.cache import CubinCache
from ptxdsl.runtime.errors import CacheError
from ptxdsl.testing import check_golden, declared_target
from tests.child_env import child_env

HERE = os.path.abspath(__file__)


def _here(err) -> bool:
    return os.path.abspath(err.value.loc.file) == HERE


def _kernel(**kw) -> Kernel:
    return Kernel("k", reqntid=128, **kw)


# -- the ring ---------------------------------------------------------------------------------
def test_ring_slot_checks_a_register_known_to_hold_the_buffer():
    """`slot(k.mov(buf), stride)` is `slot(buf, stride)`: the 4 slots of 1 KiB ran 3 KiB past
    a 1 KiB buffer without a word, while the symbol itself was refused."""
    k = _kernel()
    ring = MbarrierRing(k, 4)
    buf = k.shared_array(t.b8, 4096, align=128, name="buf")
    p = ring.producer()
    with pytest.raises(OperandError, match=r"RingView.slot: operand 'buffer': expected 4 slots "
                       r"of 1024 bytes \(4096 bytes\) inside the buffer, got buf of 4096 bytes "
                       r"from offset 1024 \(%r\d+ holds the address of buf\+1024\)") as ei:
        p.slot(k.add(k.mov(buf), 1024), 1024)
    assert _here(ei)
    p.slot(k.mov(buf), 1024)                 # exactly the buffer


def test_ring_peers_hold_against_cluster_directives_set_later():
    """A ring of peers=4 counts 4 CTAs' releases per stage: a cluster of 2 (set after the
    ring, or as .maxclusterrank) never completes the phase, so the producer hangs."""
    k = _kernel()
    MbarrierRing(k, 2, peers=4)
    with pytest.raises(BuildError, match=r"kernel k: .reqnctapercluster allows 2 CTAs per "
                       r"cluster, but MbarrierRing ring \(peers=4\) needs 4") as ei:
        k.reqnctapercluster = 2
    assert _here(ei)
    with pytest.raises(BuildError, match=r".maxclusterrank allows 3 CTAs per cluster"):
        k.maxclusterrank = 3
    k.reqnctapercluster = (2, 2)             # 4 CTAs: enough
    k2 = _kernel(maxclusterrank=2)
    with pytest.raises(OperandError, match=r"at most the kernel's 2 CTAs per cluster "
                       r"\(.reqnctapercluster / .maxclusterrank\), got 4") as ei:
        MbarrierRing(k2, 2, peers=4)
    assert _here(ei)


# -- descriptors --------------------------------------------------------------------------------
def test_k_offset_takes_numpy_integers():
    """CONTRIBUTING: integer arguments take numpy integers wherever a Python int is
    (k_step did, k_offset refused np.int64(16) as not an int)."""
    layout = SmemLayout(t.bf16, 64, 64)
    assert layout.k_offset(np.int64(16)) == layout.k_offset(16) == 32
    with pytest.raises(BuildError, match=r"K index must be in \[0, 64\)") as ei:
        layout.k_offset(np.int64(64))
    assert _here(ei)


def test_known_descriptor_k_step_cannot_carry_out_of_the_address_field():
    """The start address is bits 0-13 (address >> 4); a K step past them added into the
    reserved bits and the leading byte offset, a different descriptor."""
    layout = SmemLayout(t.bf16, 64, 64)
    top = MatrixDescriptor(layout, layout.constant_bits() | 0x3FFF)
    with pytest.raises(BuildError, match=r"MatrixDescriptor.k_step: the tile's start address "
                       r"0x3fff0 plus the K offset 32 bytes runs past the 256 KiB") as ei:
        top.k_step(None, 16)
    assert _here(ei)
    last = MatrixDescriptor(layout, layout.constant_bits() | (0x3FFF - 2))
    assert last.k_step(None, 16).value == last.value + 2        # the last address that fits


# -- ptxdsl.testing -----------------------------------------------------------------------------
def test_golden_helpers_refuse_junk_and_non_files(tmp_path):
    """declared_target raised a bare ValueError, check_golden an AttributeError for a
    non-module, IsADirectoryError for a folder, and blocked forever on a FIFO."""
    with pytest.raises(BuildError, match=r"declared_target: expected PTX text with a .target "
                       r"directive, got none in the text") as ei:
        declared_target(".version 8.0\n")
    assert _here(ei)
    with pytest.raises(OperandError, match=r"check_golden: operand 'module_or_text': expected "
                       r"a Module or PTX text, got NoneType None"):
        check_golden(None, tmp_path / "g.ptx")
    (tmp_path / "d.ptx").mkdir()
    with pytest.raises(BuildError, match=r"golden '.*d.ptx' is a folder, not a regular file"):
        check_golden("a\n", tmp_path / "d.ptx")
    fifo = tmp_path / "f.ptx"
    os.mkfifo(fifo)
    result: list = []

    def compare():
        try:
            check_golden("a\n", fifo)
        except PtxdslError as e:
            result.append(e)
    worker = threading.Thread(target=compare, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():   # unblock the reader so the test process can end
        with open(fifo, "w"):
            pass
        pytest.fail("check_golden blocked on a FIFO")
    assert "is a FIFO, not a regular file" in str(result[0])


# -- the cubin cache ----------------------------------------------------------------------------
def test_cache_key_names_a_file_in_the_cache(tmp_path):
    """CubinCache.put/get('../x') named a file outside the directory (put failed with a raw
    FileNotFoundError, get read the file)."""
    store = CubinCache(tmp_path / "cache")
    for key in ("../escaped", "a/b", "x\0y", "", 5):
        with pytest.raises(CacheError, match=r"cubin cache key must be letters, digits"):
            store.put(key, b"x")
    assert not (tmp_path / "escaped.cubin").exists() and not (tmp_path / "cache").exists()
    store.put("k-1_A", b"x")
    assert store.get("k-1_A") == b"x"


# -- the CLI ------------------------------------------------------------------------------------
def _cli(tmp_path, src: str, *args: str, name: str = "m.py"):
    (tmp_path / name).write_text(src)
    return subprocess.run([sys.executable, "-m", "ptxdsl", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=child_env())


TWO = 'from ptxdsl import Kernel, Module\na, b = Kernel("a"), Kernel("b")\na.ret()\nb.ret()\n'


def test_cli_module_names_are_not_silently_merged(tmp_path):
    """A global Module and a build_modules() entry of the same name: one replaced the other,
    and `check` said "checked 1 module" with the other never checked."""
    r = _cli(tmp_path, TWO + "main = Module([a])\ndef build_modules():\n"
             "    return {'main': Module([b])}\n", "check", "m.py")
    assert r.returncode == 2, r.stdout
    assert "build_modules() gives a module named 'main', and a global of that name is " \
           "another module" in r.stderr


def test_cli_global_module_names_are_identifiers(tmp_path):
    """globals()['x\\ny'] = Module(...) wrote a file name with a newline and forged a report
    line, as a build_modules() name did before issue 28."""
    r = _cli(tmp_path, TWO + "globals()['x\\ny'] = Module([a])\nother = Module([b])\n",
             "emit", "m.py", "-o", "out")
    assert r.returncode == 2
    assert "a module is a global named 'x\\ny', which is not a Python identifier" in r.stderr
    assert not (tmp_path / "out").exists()


def test_cli_emit_never_replaces_its_input(tmp_path):
    """`emit m.ptx` (a Python file with a .ptx name) wrote m.ptx over its own source."""
    src = TWO + "mod = Module([a])\n"
    r = _cli(tmp_path, src, "emit", "m.ptx", name="m.ptx")
    assert r.returncode == 1
    assert "the output 'm.ptx' is the input file itself" in r.stderr
    assert (tmp_path / "m.ptx").read_text() == src


def test_cli_emit_writes_beside_a_differently_named_input(tmp_path):
    r = _cli(tmp_path, TWO + "mod = Module([a])\n", "emit", "m.py")
    assert r.returncode == 0, r.stderr
    assert ".entry a" in (tmp_path / "m.ptx").read_text()


def test_a_nul_in_an_output_path_is_an_output_error(tmp_path):
    """check_golden(update=True) raised os.stat's bare ValueError; Module.write said only
    'invalid argument (ValueError: embedded null byte)'."""
    k = _kernel()
    k.ret()
    with pytest.raises(PtxdslError, match=r"Module.write: cannot write .*: a path has no NUL "
                       r"character") as ei:
        Module([k]).write(str(tmp_path / "a\0b.ptx"))
    assert _here(ei)
    for update in (True, False):
        with pytest.raises(OperandError, match=r"check_golden: operand 'path': expected a "
                           r"file's path \(text, no NUL\)") as ei:
            check_golden("x", str(tmp_path / "a\0b.ptx"), update=update)
        assert _here(ei)


def test_ring_storage_before_its_array_is_refused():
    k = _kernel()
    buf = k.shared_array(t.b8, 64, align=8, name="buf")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(PtxdslError) as ei:
            MbarrierRing(k, 2, storage=Addr(buf, -8))
    assert _here(ei)
    MbarrierRing(k, 2, storage=Addr(buf, 32))   # 32 bytes from 32: exactly the array


# -- fragments ----------------------------------------------------------------------------------
def test_fragment_flags_and_rows_are_what_they_say():
    """zero="no" is truthy: it zero-filled, as a kernel flag of "no" would have turned one on
    (kernel flags take real bools only); shape=(64.0, N) passed as 64 rows."""
    k = _kernel()
    with pytest.raises(OperandError, match=r"fragment: operand 'zero': expected True or False, "
                       r"got str 'no'") as ei:
        k.fragment(t.f32, shape=(64, 64), zero="no")
    assert _here(ei)
    with pytest.raises(BuildError, match=r"64 rows per warpgroup, got shape \(64.0, 64\)"):
        k.fragment(t.f32, shape=(64.0, 64))
    k.fragment(t.f32, shape=(np.int64(64), 64), zero=False)


def test_cached_assemble_takes_no_options_as_none(tmp_path):
    """options=None counts as left out (a raw TypeError before)."""
    from ptxdsl.runtime.cache import cached_assemble
    cubin, hit = cached_assemble("x", "sm_90", lambda p, a: b"c", "tc", 1,
                                 cache_dir=tmp_path / "c", options=None)
    assert (cubin, hit) == (b"c", False)


def test_ring_storage_takes_a_b64_arrays_natural_alignment():
    """A .b64 array is 8-byte aligned without align= (its type's size): it was refused as
    'align None'. A .b8 array without align= still is."""
    k = _kernel()
    MbarrierRing(k, 2, storage=k.shared_array(t.b64, 4, name="bars"), name="a")
    with pytest.raises(OperandError, match=r"expected an 8-byte aligned address \(mbarriers "
                       r"are .b64\), got bytes\+0 \(align 1\)") as ei:
        MbarrierRing(k, 2, storage=k.shared_array(t.b8, 32, name="bytes"), name="b")
    assert _here(ei)


# -- kernel directives --------------------------------------------------------------------------
def test_thread_directives_fit_a_cta():
    """.reqntid 32, 33, 2 (2112 threads) built: ptxas only warns that the value is out of
    range and ignores it (with .minnctapersm), so the kernel lost what it asked for."""
    with pytest.raises(BuildError, match=r"kernel k: .reqntid 32, 33, 2 is 2112 threads per "
                       r"CTA; no GPU runs more than 1024") as ei:
        Kernel("k", reqntid=(32, 33, 2))
    assert _here(ei)
    k = Kernel("k", reqntid=(32, 32, 1))     # 1024: the most
    with pytest.raises(BuildError, match=r".maxntid 1024, 2 is 2048 threads"):
        Kernel("k2").maxntid = (1024, 2)
    assert k.reqntid == (32, 32, 1)


def test_fragment_pointers_are_any_64_bit_integer_register():
    """A .b64 pointer (loaded from memory with type=t.b64) was refused by the helper's own add
    ('add: operand type ... got .b64'); a .f64 register is refused by the helper, naming it."""
    k = _kernel()
    acc = k.fragment(t.f32, shape=(64, 64))
    acc.store(k.reg(t.b64), 64)
    k.a_fragment(t.bf16).load(k.reg(t.b64), 64)
    with pytest.raises(BuildError, match=r"fragment.store: ptr must be a 64-bit global address "
                       r"\(a register or a pointer parameter\), got register %fd1 \(.f64\)") as ei:
        acc.store(k.reg(t.f64), 64)
    assert _here(ei)
    k.ret()
    Module([k]).assemble()


# -- files --------------------------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="planting a link of another user's needs root (lchown)")
def test_write_refuses_a_link_planted_in_a_public_folder(tmp_path):
    """As root, Module.write('/tmp/out.ptx') wrote through a link another user planted there
    to any file (here a stand-in for /root/.bashrc): resolving the link in Python bypasses
    fs.protected_symlinks. Such a link is refused; one of this user's is written through."""
    public = tmp_path / "public"
    public.mkdir()
    os.chmod(public, 0o1777)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = public / "out.ptx"
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)
    k = _kernel()
    k.ret()
    with pytest.raises(PtxdslError, match=r"is a symbolic link of uid 65534 in a folder "
                       r"everyone may write; refusing to write through it") as ei:
        Module([k]).write(link)
    assert _here(ei)
    assert victim.read_text() == "precious"
    os.lchown(link, 0, 0)
    Module([k]).write(link)
    assert link.is_symlink() and ".entry k" in victim.read_text()


def test_gpu_deadline_takes_a_positive_int():
    """gpu_deadline(0) armed no alarm (a test with no deadline, unsaid); 1.5 raised a raw
    TypeError from signal.alarm."""
    from ptxdsl.testing import gpu_deadline
    for bad in (0, -1, 1.5, "5", None):
        with pytest.raises(OperandError, match=r"gpu_deadline: operand 'seconds': expected a "
                           r"positive number of seconds \(an int\)") as ei:
            with gpu_deadline(bad):
                pass
        assert _here(ei)
    with gpu_deadline(np.int64(5)):
        pass


# -- registers given twice ----------------------------------------------------------------------
def test_accumulators_and_fragments_take_distinct_registers():
    """One register given for several accumulators: ptxas assembles
    `wgmma ... {%f1, %f1, ...}` and the results are silently wrong; a Fragment/AFragment
    of repeated registers filled, converted and loaded into the same register."""
    from ptxdsl import ptx
    from ptxdsl.fragments import AFragment, Fragment
    from ptxdsl.instructions.wgmma_desc import descriptor
    k = _kernel()
    r = k.reg(t.f32)
    with pytest.raises(OperandError, match=r"fragment: operand 'regs': expected 8 distinct "
                       r"registers, got %f1 as regs\[0\] and regs\[1\]") as ei:
        Fragment(k, t.f32, 16, [r] * 8)
    assert _here(ei)
    b = k.reg(t.b32)
    with pytest.raises(OperandError, match=r"a_fragment: operand 'regs': expected 4 distinct"):
        AFragment(k, t.bf16, [b, k.reg(t.b32), b, k.reg(t.b32)])
    a_desc = descriptor(k, SmemLayout(t.bf16, 64, 64),
                        k.shared_array(t.b8, 8192, align=1024, name="a"))
    b_desc = descriptor(k, SmemLayout(t.bf16, 16, 64),
                        k.shared_array(t.b8, 2048, align=1024, name="b"))
    regs = [k.reg(t.f32) for _ in range(7)]
    with pytest.raises(OperandError, match=r"wgmma.mma_async.*operand 'd': expected 8 distinct "
                       r"registers, got %f\d+ as d\[0\] and d\[7\]") as ei:
        ptx.wgmma_mma_async(k, (*regs, regs[0]), a_desc, b_desc, atype="bf16")
    assert _here(ei)
    ptx.wgmma_mma_async(k, Fragment(k, t.f32, 16, [*regs, k.reg(t.f32)]), a_desc, b_desc,
                        atype="bf16")


def test_cache_api_answers_junk_with_a_cache_error(tmp_path):
    """The documented ptxdsl.runtime.cache API raised raw TypeError/AttributeError:
    CubinCache(None), evict('x'), sweep('x'), put(key, None), cache_key(None, ...)."""
    from ptxdsl.runtime.cache import cache_key
    store = CubinCache(tmp_path / "c")
    for call, words in ((lambda: CubinCache(None), "cubin cache directory must be a path"),
                        (lambda: store.evict("x"), r"CubinCache.evict: expected a byte count"),
                        (lambda: store.sweep("x"), r"CubinCache.sweep: expected an age"),
                        (lambda: store.put("k", None), r"CubinCache.put: the payload must be "
                                                       r"bytes, got NoneType None"),
                        (lambda: cache_key(None, "sm_90", "t", 1), r"cache_key: expected the "
                                                                   r"PTX text")):
        with pytest.raises(CacheError, match=words) as ei:
            call()
        assert _here(ei)
    assert not (tmp_path / "c").exists()
    store.put("k", bytearray(b"x"))
    assert store.get("k") == b"x" and store.evict(10**9) == 0 and store.sweep(0.0) == 0


def test_tx_bytes_reads_ptx_type_names_as_ptx_types():
    """numpy reads 'f16' as float128 and 'u8' as uint64: tx_bytes(((8, 8), 'f16')) was 1024
    bytes for a 128-byte box, an expect_tx the copy never completes (the wait hangs)."""
    from ptxdsl.pipeline import box_bytes, tx_bytes
    assert tx_bytes(((8, 8), "f16")) == tx_bytes(((8, 8), t.f16)) == 128
    assert box_bytes((8, 16), "u8") == box_bytes((8, 16), ".s8") == 128
    assert box_bytes((8, 16), "e4m3") == 128 and box_bytes((8, 8), "tf32") == 256
    assert box_bytes((8, 8), "float16") == box_bytes((8, 8), np.uint16) == 128   # numpy's own
    with pytest.raises(OperandError, match=r"tx_bytes: operand 'dtype': expected a type of "
                       r"whole bytes, got str 'b1'") as ei:
        tx_bytes(((8, 8), "b1"))
    assert _here(ei)


# -- renames ------------------------------------------------------------------------------------
def test_a_rename_is_claimed_like_a_first_name():
    """Renaming checked the identifier only: a shared variable renamed to a parameter's name,
    a register to a sibling's or to an automatic name (r1), and a renamed automatic register
    (no longer covered by `.reg .b32 %r<N>`) all emitted PTX ptxas refuses."""
    from ptxdsl import Module as M
    k = _kernel()
    k.param(t.u32, "p")
    s = k.shared_array(t.u32, 4, name="s")
    x, y = k.reg(t.u32, "x"), k.reg(t.u32, "y")
    auto = k.mov(1, type=t.u32)
    for obj, name, words in ((s, "p", r"kernel k: symbol name 'p' is already used in this "
                                      r"kernel"),
                             (y, "x", r"kernel k: register name 'x' is already used"),
                             (y, "r1", r"register name 'r1' collides with ptxdsl's automatic"),
                             (auto, "z", r"kernel k: %r\d+ is one of ptxdsl's automatic "
                                         r"registers, declared by number; it cannot be "
                                         r"renamed")):
        with pytest.raises(BuildError, match=words) as ei:
            obj.name = name
        assert _here(ei)
    m = M()
    g = m.global_array(t.u32, 4, name="g")
    m.global_array(t.u32, 4, name="h")
    with pytest.raises(BuildError, match=r"module already has a symbol named 'h'"):
        g.name = "h"
    s.name, y.name, g.name = "s2", "y2", "g2"        # free names: renamed
    k.mov(1, dst=x)
    k.mov(2, dst=y)
    k.st(s, k.mov(3, type=t.u32))
    k.st(g, k.mov(4, type=t.u32))
    k.ret()
    m.add(k)
    text = m.emit()
    assert "%y2" in text and "s2[4]" in text and "g2[4]" in text
    m.assemble()


def test_a_declared_register_or_variable_keeps_what_was_checked():
    """An automatic register retyped (r.type = t.f64) or a shared array re-spaced, shrunk or
    realigned after the instructions using it were checked emitted PTX ptxas refuses, or a
    tile whose extent and alignment no check saw."""
    from ptxdsl.types import StateSpace
    k = _kernel()
    r = k.mov(1, type=t.u32)
    s = k.shared_array(t.b8, 8192, align=1024, name="s")
    for obj, field, value in ((r, "type", t.f64), (r, "kernel", _kernel()),
                              (s, "count", 16), (s, "align", 16),
                              (s, "space", StateSpace.global_)):
        with pytest.raises(BuildError, match=rf"its .{field} cannot change once it is "
                           r"declared") as ei:
            setattr(obj, field, value)
        assert _here(ei)
    from ptxdsl.operands import Symbol
    free = Symbol("free", StateSpace.shared, t.u32, 4)      # not declared anywhere yet
    free.count = 8
    assert free.size == 32


def test_helper_objects_are_fixed_once_made():
    """ring.stages = 4 on a 2-stage ring: advance() then wrapped at 4 and the barrier address
    of stages 2 and 3 ran past ring_full[2] without a word; acc.n = 128 on 32 registers made
    the store's offsets disagree with its registers."""
    from ptxdsl.epilogue import TmaStoreEpilogue
    k = _kernel()
    ring = MbarrierRing(k, 2)
    acc = k.fragment(t.f32, shape=(64, 64))
    epi = TmaStoreEpilogue(k, k.shared_array(t.b8, 16384, align=1024, name="st"),
                           k.tensormap_addr(k.param_tensormap("m")), 1)
    for obj, field, value in ((ring, "stages", 4), (ring.producer(), "stage", k.reg(t.u32)),
                              (acc, "n", 128), (k.a_fragment(t.bf16), "bits", 8),
                              (epi, "barrier", 2)):
        with pytest.raises(BuildError, match=rf"{type(obj).__name__}: .{field} cannot be "
                           r"assigned once it is made") as ei:
            setattr(obj, field, value)
        assert _here(ei)


def test_fragment_extents_take_a_b32_register():
    """A .b32 register (an ld.b32 of a size) was refused as ld/rows/cols/k0 ('a 32-bit integer
    register'), though the ring's slot and the epilogue's coordinates take one."""
    k = _kernel()
    n = k.ld(k.param_ptr("n"), type=t.b32)
    acc = k.fragment(t.f32, shape=(64, 64))
    acc.store(k.param_ptr("c"), n, rows=n, cols=n)
    k.a_fragment(t.bf16).load(k.param_ptr("a"), n, k0=n)
    with pytest.raises(BuildError, match=r"fragment.store: ld must be a positive int .* or a "
                       r"32-bit integer register") as ei:
        acc.store(k.param_ptr("d"), k.reg(t.f32))
    assert _here(ei)
    k.ret()
    Module([k]).assemble()


def test_a_register_or_variable_made_directly_is_not_the_kernels():
    """Reg(t.u32, 'zz', k) passed every instruction's 'a register of kernel k' check and
    reached the PTX undeclared (ptxas: 'Arguments mismatch'); so did a Symbol(..., k)."""
    from ptxdsl.operands import Reg, Symbol
    from ptxdsl.types import StateSpace
    k = _kernel()
    with pytest.raises(BuildError, match=r"register 'zz' of kernel k: it is not declared in "
                       r"that kernel; make it with k.reg\(type, name\)") as ei:
        Reg(t.u32, "zz", k)
    assert _here(ei)
    with pytest.raises(BuildError, match=r"variable 'ss' of kernel k: it is not declared"):
        Symbol("ss", StateSpace.shared, t.u32, 4, None, k)
    Reg(t.u32, "free")                         # a register of no kernel: nothing to claim


def test_epilogue_coordinates_are_where_a_store_may_start():
    """The epilogue took a negative constant coordinate as 'signed, clipped', and the TMA
    store it emits then refused it speaking of cp.async.bulk.tensor's coords[0]."""
    from ptxdsl.epilogue import TmaStoreEpilogue
    k = _kernel()
    epi = TmaStoreEpilogue(k, k.shared_array(t.b8, 16384, align=1024, name="st"),
                           k.tensormap_addr(k.param_tensormap("m")), 1)
    packed = k.fragment(t.f32, shape=(64, 64)).to_packed(t.bf16)
    with pytest.raises(OperandError, match=r"TmaStoreEpilogue.store: operand 'col0': expected "
                       r"a tensor coordinate: a 32-bit integer register or a non-negative int "
                       r"below 2\^31") as ei:
        epi.store(packed, 0, -64)
    assert _here(ei)
    epi.store(packed, 0, (1 << 31) - 64)     # its one box starts at the last coordinate


def test_release_arrives_once_per_cluster_rank():
    """release(ctas=[0, 0]) on a 2-peer ring arrived twice on CTA 0's empty barrier: its phase
    completed without CTA 1's consumers, whose stage CTA 0's producer then refilled."""
    k = _kernel(reqnctapercluster=2)
    ring = MbarrierRing(k, 2, peers=2)
    ring.init()
    c = ring.consumer()
    with pytest.raises(OperandError, match=r"ConsumerView.release: operand 'ctas': expected "
                       r"each cluster rank once, got rank 0 twice") as ei:
        c.release(ctas=[0, np.int64(0)])
    assert _here(ei)
    c.release(ctas=[1, 0])
