"""Vector red (`red{.sem}{.scope}{.global}.op{.noftz}.vN.type`, PTX 8.1, sm_90): every
op/type/width of the table built and assembled, a golden, the version need, the refusals."""

from __future__ import annotations

import inspect

import pytest

from ptxdsl import Kernel, Module, OperandError, VersionError, t
from ptxdsl.instructions.atomic import _VEC
from ptxdsl.testing import assemble_declared

FORMS = [(op.value, ty, n) for op, types in _VEC.items() for ty, widths in types.items()
         for n in widths]
# The register each lane's value lives in (ptxas takes .b16/.b32 for the half types).
_LANE = {t.f32: t.f32, t.f16: t.f16, t.bf16: t.b16, t.f16x2: t.f16x2, t.bf16x2: t.b32}


def _kernel(name):
    k = Kernel(name)
    g = k.cvta(k.ld_param(k.param_ptr("out")), "global", to=True)
    return k, g


def test_every_vector_red_form_assembles():
    """One module with every form of the table, under each memory order, on a .global and on
    a generic address: ptxas accepts it at the inferred .version 8.1 / sm_90."""
    k, g = _kernel("red_vec_all")
    gen = k.ld_param(k.param_ptr("p", space=None))
    for op, ty, n in FORMS:
        lanes = [k.reg(_LANE[ty]) for _ in range(n)]
        k.red(op, g, lanes, type=ty)
        k.red(op, g, lanes, type=ty, sem="release", scope="sys")
        k.red(op, gen, lanes, type=ty, space="generic", sem="relaxed", scope="gpu")
    m = Module([k])
    text = m.emit()
    assert ".version 8.1" in text and ".target sm_90" in text
    assert "red.release.sys.global.add.noftz.v8.bf16" in text
    assemble_declared(text)


def test_vector_red_golden(golden):
    k, g = _kernel("red_vec")
    f = k.ld_param(k.param(t.f32, "f"))
    h2 = k.reg(t.bf16x2)
    k.red("add", g, (f, f, f, f), sem="release", scope="sys")
    k.red("add", g, [f, 1.0])                       # an immediate lane, type from the register
    k.red("max", g, (h2, h2), sem="relaxed", scope="gpu")
    k.red("min", g, [k.reg(t.f16) for _ in range(8)])
    golden(Module([k]), "core/red_vector")


def test_pinning_below_vector_red_raises():
    k, g = _kernel("pin")
    f = k.ld_param(k.param(t.f32, "f"))
    k.red("add", g, (f, f))
    line = inspect.currentframe().f_lineno - 1
    with pytest.raises(VersionError, match=r"needs PTX ISA 8\.1, sm_90\+, but the module is "
                       r"pinned to \.version 8\.0") as e:
        Module([k], version="8.0", target="sm_90").emit()
    assert (e.value.loc.file, e.value.loc.line) == (__file__, line)


def test_vector_red_refusals():
    k, g = _kernel("bad")
    f = k.ld_param(k.param(t.f32, "f"))
    u = k.reg(t.u32)
    with pytest.raises(OperandError, match=r"red\.add: operand 'type': expected for a vector "
                       r"red, one of \.f32, \.f16, \.bf16, \.f16x2, \.bf16x2, got \.u32") as e:
        k.red("add", g, (u, u))
    assert e.value.loc.file == __file__
    with pytest.raises(OperandError, match=r"red\.and: operand 'type': expected for a vector "
                       r"red, one of none \(vector red is add, min or max\), got \.b32"):
        k.red("and", g, (u, u), type=t.b32)
    with pytest.raises(OperandError, match=r"red\.min: operand 'type': expected for a vector "
                       r"red, one of \.f16, \.bf16, \.f16x2, \.bf16x2, got \.f32"):
        k.red("min", g, (f, f))
    with pytest.raises(OperandError, match=r"red\.add\.f32: operand 'b': expected a vector of "
                       r"2 or 4 values, got 8 values"):
        k.red("add", g, (f,) * 8)
    with pytest.raises(OperandError, match=r"red\.add\.f32: operand 'b': expected a vector of "
                       r"2 or 4 values, got 3 values"):
        k.red("add", g, (f,) * 3)
    with pytest.raises(OperandError, match=r"red\.add\.v2\.f32: operand 'space': expected "
                       r"global or generic \(vector red reaches global memory only\), got "
                       r"\.shared::cta"):
        k.red("add", k.shared_array(t.f32, 4, align=16, name="s"), (f, f),
              space="shared::cta")
    with pytest.raises(OperandError, match=r"red\.add\.v2\.f32: operand 'b\[1\]': expected"):
        k.red("add", g, (f, u))
    with pytest.raises(OperandError, match=r"red: operand 'sem': expected one of 'relaxed', "
                       r"'release'"):
        k.red("add", g, (f, f), sem="acquire", scope="gpu")
    with pytest.raises(OperandError, match=r"red\.add\.v2\.f16: operand 'b\[0\]': expected a "
                       r"register \(PTX has no immediates of this type\)"):
        k.red("add", g, (1.0, 2.0), type=t.f16)
    assert not any("red" in s.insn.opcode() for s in k.body if hasattr(s, "insn"))


def test_red_with_a_cache_hint_golden(golden):
    """`.L2::cache_hint` after `.noftz`, before `.vN`; the policy is the last operand."""
    k, g = _kernel("red_hint")
    pol = k.reg(t.b64)
    f = k.ld_param(k.param(t.f32, "f"))
    k.red("add", g, 1, type=t.u32, cache_policy=pol)
    k.red("add", g, (f, f, f, f), sem="release", scope="sys", cache_policy=pol)
    k.red("max", g, [k.reg(t.b16) for _ in range(8)], type=t.bf16, cache_policy=pol)
    golden(Module([k]), "core/red_cache_hint")


def test_pinning_below_red_with_a_cache_hint_raises():
    k, g = _kernel("pin_hint")
    k.red("add", g, 1, type=t.u32, cache_policy=k.reg(t.b64))
    with pytest.raises(VersionError, match=r"needs PTX ISA 7\.4, sm_80\+, but the module is "
                       r"pinned to \.version 7\.3"):
        Module([k], version="7.3", target="sm_80").emit()


def test_red_cache_hint_refusals():
    k, g = _kernel("bad_hint")
    ctr = k.shared_array(t.u32, 1, align=4, name="ctr")
    with pytest.raises(OperandError, match=r"red\.shared::cta\.add\.L2::cache_hint\.u32: "
                       r"operand 'space': expected global or generic \(a cache hint applies to "
                       r"global memory only\), got \.shared::cta") as e:
        k.red("add", ctr, 1, space="shared::cta", cache_policy=k.reg(t.b64))
    assert e.value.loc.file == __file__
    with pytest.raises(OperandError, match=r"red\.global\.add\.L2::cache_hint\.u32: operand "
                       r"'cache_policy': expected a register compatible with \.b64, got "
                       r"register %r\d+ of type \.u32"):
        k.red("add", g, 1, type=t.u32, cache_policy=k.reg(t.u32))
