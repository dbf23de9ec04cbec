"""atom and red: goldens per op/type/space/sem/scope group, version needs, refusals."""

from __future__ import annotations

import pytest

from ptxdsl import BuildError, Kernel, Module, OperandError, VersionError, t
from ptxdsl.instructions.atomic import Atom, AtomCas, Red


def _kernel(name):
    k = Kernel(name)
    g = k.cvta(k.ld_param(k.param_ptr("out")), "global", to=True)
    return k, g


def test_atom_ops_golden(golden):
    """Every op on each type ptxas accepts for it, on a global address."""
    k, g = _kernel("atom_ops")
    x = k.ld_param(k.param(t.u32, "x"))
    x64 = k.ld_param(k.param(t.u64, "x64"))
    s64 = k.ld_param(k.param(t.s64, "s64"))
    f = k.ld_param(k.param(t.f32, "f"))
    d = k.ld_param(k.param(t.f64, "d"))
    k.atom("add", g, x)
    k.atom("add", g, -1, type=t.s32)
    k.atom("add", g, x64)
    k.atom("add", g, f)
    k.atom("add", g, 0.5, type=t.f32)
    k.atom("add", g, d)
    k.atom("inc", g, 15, type=t.u32)
    k.atom("dec", g, x)
    k.atom("min", g, x)
    k.atom("max", g, -4, type=t.s32)
    k.atom("min", g, x64)
    k.atom("max", g, s64)
    k.atom("and", g, x)                # a .u32 value runs as and.b32
    k.atom("or", g, x64)
    k.atom("xor", g, 0xF0, type=t.b32)
    k.atom("exch", g, x)
    k.atom("exch", g, x64)
    k.atom_cas(g, x, 7)
    k.atom_cas(g, x64, 0, dst=k.reg(t.u64))
    golden(Module([k]), "core/atom_ops")


def test_atom_spaces_sems_scopes_golden(golden):
    k, g = _kernel("atom_spaces")
    gen = k.ld_param(k.param_ptr("p", space=None))   # a generic pointer
    ctr = k.shared_array(t.u32, 1, align=4, name="ctr")
    arr = k.shared_array(t.u64, 8, align=8, name="arr")
    sa = k.mov(ctr)
    k.atom("add", gen, 1, type=t.u32)                 # generic: no state space qualifier
    k.atom("add", ctr, 1)                             # .shared symbol, type from the symbol
    k.atom("add", k.mov(arr), 1, type=t.u64, space="shared")
    k.atom("max", sa, 3, type=t.u32)
    k.atom("add", g, 1, type=t.u32, sem="relaxed", scope="gpu")
    k.atom("add", g, 1, type=t.u32, sem="acquire", scope="sys")
    k.atom("exch", g, 1, type=t.b32, sem="release", scope="gpu")
    k.atom_cas(g, 0, 1, type=t.b32, sem="acq_rel", scope="gpu")
    k.atom("add", sa, 1, type=t.u32, sem="relaxed", scope="cta")
    k.atom("add", g, 1, type=t.u32, scope="sys")      # scope alone: relaxed by default
    k.atom("inc", g, 9, type=t.u32, sem="acquire")    # sem alone: .gpu scope by default
    golden(Module([k]), "core/atom_spaces")


def test_atom_sm90_golden(golden):
    """Cluster scope, .shared::cta/.shared::cluster and bf16 add: PTX 7.8, sm_90."""
    k, g = _kernel("atom_sm90")
    sa = k.mov(k.shared_array(t.u32, 4, align=16, name="slots"))
    h = k.reg(t.bf16)
    k.atom("add", sa, 1, type=t.u32, space="shared::cta")
    k.atom("add", sa, 1, type=t.u32, space="shared::cluster", sem="relaxed", scope="cluster")
    k.atom("add", g, 1, type=t.u32, sem="acq_rel", scope="cluster")
    k.atom("add", g, h)
    k.red("add", sa, 2, type=t.u32, space="shared::cluster", sem="release", scope="cluster")
    m = Module([k])
    assert (str(m.version), str(m.target)) == ("7.8", "sm_90")
    golden(m, "core/atom_sm90")


def test_atom_half_golden(golden):
    """f16/f16x2 add (`.noftz` is mandatory) at the floor; bf16x2 needs sm_90."""
    k, g = _kernel("atom_half")
    h, h2 = k.reg(t.f16), k.reg(t.f16x2)
    k.atom("add", g, h)
    k.atom("add", g, h2)
    k.red("add", g, h)
    k.atom_cas(g, k.reg(t.b16), k.reg(t.b16))
    golden(Module([k]), "core/atom_half")


def test_atom_b128_golden(golden):
    """128-bit exch/cas: PTX 8.3, sm_90."""
    k, g = _kernel("atom_b128")
    q = k.reg(t.b128)
    k.atom("exch", g, q)
    k.atom_cas(g, q, k.reg(t.b128), space="global")
    m = Module([k])
    assert (str(m.version), str(m.target)) == ("8.3", "sm_90")
    golden(m, "core/atom_b128")


def test_red_golden(golden):
    k, g = _kernel("red_ops")
    sa = k.mov(k.shared_array(t.u32, 4, align=16, name="acc"))
    f = k.ld_param(k.param(t.f32, "f"))
    k.red("add", g, 1, type=t.u32)
    k.red("add", g, f)
    k.red("add", g, 1, type=t.u64)
    k.red("add", g, 2.0, type=t.f64)
    k.red("inc", g, 3, type=t.u32)
    k.red("dec", g, 3, type=t.u32)
    k.red("min", g, -5, type=t.s64)
    k.red("max", g, 5, type=t.u32)
    k.red("and", g, 1, type=t.b64)
    k.red("or", sa, 1, type=t.b32)
    k.red("xor", sa, 1, type=t.b32)
    k.red("add", g, 1, type=t.u32, sem="relaxed", scope="gpu")
    k.red("add", g, 1, type=t.u32, sem="release", scope="sys")
    k.red("add", sa, 1, type=t.u32, sem="relaxed", scope="cta")
    golden(Module([k]), "core/red")


@pytest.mark.parametrize("build, need", [
    (lambda k, g: k.atom("add", g, 1, type=t.u32, scope="cluster"), "7.8"),
    (lambda k, g: k.atom("add", k.shared_array(t.u32, 1), 1, space="shared::cta"),
     "7.8"),
    (lambda k, g: k.red("add", g, k.reg(t.bf16x2)), "7.8"),
    (lambda k, g: k.atom("exch", g, k.reg(t.b128)), "8.3"),
])
def test_pinning_below_an_atomic_form_raises(build, need):
    k, g = _kernel("pin")
    build(k, g)
    line = build.__code__.co_firstlineno
    with pytest.raises(VersionError, match=rf"needs PTX ISA {need}, sm_90\+, but the module is "
                       r"pinned to \.target sm_89") as e:
        Module([k], target="sm_89").emit()
    assert (e.value.loc.file, e.value.loc.line) == (__file__, line)
    with pytest.raises(VersionError, match=r"pinned to \.version 7\.7"):
        Module([k], version="7.7", target="sm_90").emit()


def test_atom_refusals():
    k, g = _kernel("bad")
    x = k.reg(t.u32)
    with pytest.raises(OperandError, match=r"atom\.inc: operand 'type': expected one of \.u32, "
                       r"got \.u64"):
        k.atom("inc", g, 1, type=t.u64)
    with pytest.raises(OperandError, match=r"atom\.add: operand 'type': expected one of \.u32, "
                       r"\.s32, \.u64, \.f32, \.f64, .*got \.s64"):
        k.atom("add", g, k.reg(t.s64))
    with pytest.raises(OperandError, match=r"atom: operand 'op': expected one of .*'exch', got "
                       "str 'cas'"):
        Atom("cas", t.b32, x, g, 1, "global")
    with pytest.raises(OperandError, match=r"red: operand 'op': expected one of .*got str "
                       "'exch'"):
        k.red("exch", g, x)
    with pytest.raises(OperandError, match=r"red: operand 'sem': expected one of 'relaxed', "
                       "'release', got str 'acquire'"):
        k.red("add", g, x, sem="acquire")
    with pytest.raises(OperandError, match=r"atom: operand 'sem': expected one of 'relaxed', "
                       "'acquire', 'release', 'acq_rel', got str 'sc'"):
        k.atom("add", g, x, sem="sc")
    with pytest.raises(OperandError, match="operand 'scope': expected one of 'cta', 'cluster', "
                       "'gpu', 'sys', got str 'grid'"):
        k.atom("add", g, x, scope="grid")
    with pytest.raises(OperandError, match="operand 'space': expected one of 'generic', 'global', "
                       "'shared', 'shared::cta', 'shared::cluster', got str 'local'"):
        k.atom("add", g, x, space="local")
    with pytest.raises(OperandError, match=r"atom\.global\.add\.u32: operand 'a': expected a "
                       r"64-bit integer register holding a global address, got register %r\d+ "
                       r"of type \.u32"):
        k.atom("add", x, 1, type=t.u32, space="global")
    with pytest.raises(OperandError, match=r"atom\.global\.add\.u32: operand 'd': expected a "
                       r"register compatible with \.u32, got register %f\d+ of type \.f32"):
        k.atom("add", g, x, dst=k.reg(t.f32))
    with pytest.raises(OperandError, match=r"atom\.global\.add\.u32: operand 'b': expected an "
                       r"immediate in \[0, 4294967295\] for \.u32, got -1"):
        k.atom("add", g, -1, type=t.u32)
    with pytest.raises(OperandError, match=r"atom\.global\.exch\.b128: operand 'b': expected a "
                       r"\.b128 register, got int 5"):
        k.atom("exch", g, 5, type=t.b128)


def test_atom_symbol_space_must_match():
    k, _ = _kernel("bad")
    sym = k.shared_array(t.u32, 4)
    with pytest.raises(OperandError, match=r"atom\.global\.add\.u32: operand 'a': expected a "
                       r"symbol in \.global"):
        k.atom("add", sym, 1, type=t.u32, space="global")


def test_atom_needs_a_known_space_and_type():
    k = Kernel("bad")
    r = k.reg(t.u64)                                  # where it points is unknown
    with pytest.raises(BuildError, match="atom: cannot tell the state space"):
        k.atom("add", r, 1, type=t.u32)
    with pytest.raises(BuildError, match="atom: cannot infer the operand type"):
        k.atom("add", r, 1, space="global")


def test_atom_cas_and_red_shapes_are_distinct_classes():
    k, g = _kernel("shapes")
    a = AtomCas(t.b32, k.reg(t.b32), g, 1, 2, "global")
    r = Red("add", t.u32, g, 1, "global")
    assert a.render() == "atom.global.cas.b32 %r1, [%rd2], 1, 2;"
    assert r.render() == "red.global.add.u32 [%rd2], 1;"
