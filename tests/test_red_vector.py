"""Vector red (`red{.sem}{.scope}{.global}.op{.noftz}.vN.type`, PTX 8.1, sm_90): every
op/type/width of the table built and assembled, a golden, the version need, the refusals."""

from __future__ import annotations

import re

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


def _at_call(e, call) -> bool:
    """The error names this file and the line of the case's call (where its lambda starts)."""
    return (e.value.loc.file, e.value.loc.line) == (__file__, call.__code__.co_firstlineno)


# (call, the version and target it needs): each pinned one version below
PINS = [
    pytest.param(lambda k, g, f: k.red("add", g, (f, f)), "8.1", "sm_90", "8.0", id="vector"),
    pytest.param(lambda k, g, f: k.red("add", g, 1, type=t.u32, cache_policy=k.reg(t.b64)),
                 "7.4", "sm_80", "7.3", id="cache_hint"),
]


@pytest.mark.parametrize("call, version, target, pinned", PINS)
def test_pinning_below_the_form_raises(call, version, target, pinned):
    k, g = _kernel("pin")
    call(k, g, k.ld_param(k.param(t.f32, "f")))
    with pytest.raises(VersionError, match=rf"needs PTX ISA {re.escape(version)}, "
                       rf"{target}\+, but the module is pinned to \.version "
                       rf"{re.escape(pinned)}") as e:
        Module([k], version=pinned, target=target).emit()
    assert _at_call(e, call)


def _smem(k):
    return k.shared_array(t.f32, 4, align=16, name="s")


def _ctr(k):
    return k.shared_array(t.u32, 1, align=4, name="ctr")


# (call, the error's words): one refusal per class of mistake
REFUSALS = [
    pytest.param(lambda k, g, f, u: k.red("add", g, (u, u)),
                 r"red\.add: operand 'type': expected for a vector red, one of \.f32, \.f16, "
                 r"\.bf16, \.f16x2, \.bf16x2, got \.u32", id="integer_type"),
    pytest.param(lambda k, g, f, u: k.red("and", g, (u, u), type=t.b32),
                 r"red\.and: operand 'type': expected for a vector red, one of none \(vector "
                 r"red is add, min or max\), got \.b32", id="op_without_vectors"),
    pytest.param(lambda k, g, f, u: k.red("min", g, (f, f)),
                 r"red\.min: operand 'type': expected for a vector red, one of \.f16, \.bf16, "
                 r"\.f16x2, \.bf16x2, got \.f32", id="min_of_f32"),
    pytest.param(lambda k, g, f, u: k.red("add", g, (f,) * 8),
                 r"red\.add\.f32: operand 'b': expected a vector of 2 or 4 values, got 8 "
                 r"values", id="width_8_of_f32"),
    pytest.param(lambda k, g, f, u: k.red("add", g, (f,) * 3),
                 r"red\.add\.f32: operand 'b': expected a vector of 2 or 4 values, got 3 "
                 r"values", id="width_3"),
    pytest.param(lambda k, g, f, u: k.red("add", _smem(k), (f, f), space="shared::cta"),
                 r"red\.add\.v2\.f32: operand 'space': expected global or generic \(vector "
                 r"red reaches global memory only\), got \.shared::cta", id="shared_space"),
    pytest.param(lambda k, g, f, u: k.red("add", g, (f, u)),
                 r"red\.add\.v2\.f32: operand 'b\[1\]': expected", id="mixed_lanes"),
    pytest.param(lambda k, g, f, u: k.red("add", g, (f, f), sem="acquire", scope="gpu"),
                 r"red: operand 'sem': expected one of 'relaxed', 'release'", id="acquire"),
    pytest.param(lambda k, g, f, u: k.red("add", g, (1.0, 2.0), type=t.f16),
                 r"red\.add\.v2\.f16: operand 'b\[0\]': expected a register \(PTX has no "
                 r"immediates of this type\)", id="f16_immediates"),
    pytest.param(lambda k, g, f, u: k.red("add", _ctr(k), 1, space="shared::cta",
                                          cache_policy=k.reg(t.b64)),
                 r"red\.shared::cta\.add\.L2::cache_hint\.u32: operand 'space': expected "
                 r"global or generic \(a cache hint applies to global memory only\), got "
                 r"\.shared::cta", id="cache_hint_in_shared"),
    pytest.param(lambda k, g, f, u: k.red("add", g, 1, type=t.u32, cache_policy=u),
                 r"red\.global\.add\.L2::cache_hint\.u32: operand 'cache_policy': expected a "
                 r"register compatible with \.b64, got register %r\d+ of type \.u32",
                 id="cache_policy_not_b64"),
]


@pytest.mark.parametrize("call, words", REFUSALS)
def test_vector_red_refusals(call, words):
    k, g = _kernel("bad")
    f = k.ld_param(k.param(t.f32, "f"))
    with pytest.raises(OperandError, match=words) as e:
        call(k, g, f, k.reg(t.u32))
    assert _at_call(e, call)
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
