"""multimem's vector forms (assembled only: no multicast objects on the project's machines):
every type/width of the table for ld_reduce, st and red, a golden read back by the front end,
the refusals."""

from __future__ import annotations

import pytest

from ptxdsl import Kernel, Module, OperandError, ptx, t
from ptxdsl.instructions.bulk import RedOp
from ptxdsl.instructions.multimem import _VEC, Multimem, MultimemKind
from ptxdsl.testing import assemble_declared

# The register of one lane (ptxas takes .b16 for bf16, .b32 for bf16x2).
_LANE = {t.f32: t.f32, t.f16: t.f16, t.bf16: t.b16, t.f16x2: t.f16x2, t.bf16x2: t.b32}


def _kernel(name):
    k = Kernel(name)
    mc = k.cvta(k.ld_param(k.param_ptr("mc")), "global", to=True)
    return k, mc


def test_every_vector_multimem_form_assembles():
    k, mc = _kernel("mm_vec_all")
    for op, types in _VEC.items():
        for ty, widths in types.items():
            for n in widths:
                lanes = tuple(k.reg(_LANE[ty]) for _ in range(n))
                if op is None:
                    ptx.multimem_st(k, "relaxed", "sys", mc, lanes, type=ty)
                    continue
                ptx.multimem_red(k, "release", "sys", op.value, mc, lanes, type=ty)
                k.emit(Multimem(MultimemKind.ld_reduce, "acquire", "sys", op, ty, mc,
                                tuple(k.reg(_LANE[ty]) for _ in range(n))))
    text = Module([k]).emit()
    assert "multimem.ld_reduce.acquire.sys.global.max.v8.bf16" in text
    assert "multimem.st.relaxed.sys.global.v4.f32" in text
    assemble_declared(text)


def test_vector_multimem_golden(golden):
    k, mc = _kernel("mm_vec")
    f = k.ld_param(k.param(t.f32, "f"))
    ptx.multimem_st(k, "weak", mc, (f, f, f, f))                 # the lanes' type: .f32
    ptx.multimem_red(k, "relaxed", "gpu", "add", mc, [f, 1.0])
    h = tuple(k.reg(t.b32) for _ in range(4))
    ptx.multimem_red(k, "release", "sys", "min", mc, h, type=t.bf16x2)
    k.emit(Multimem(MultimemKind.ld_reduce, "weak", None, RedOp.add, t.f16,
                    mc, tuple(k.reg(t.f16) for _ in range(8))))
    golden(Module([k]), "multimem/vector")


# (call, the error's words): one refusal per class of mistake
REFUSALS = [
    pytest.param(lambda k, mc, f, u: ptx.multimem_red(k, "relaxed", "sys", "min", mc, (f, f)),
                 r"multimem\.red\.min: operand 'type': expected for a vector form, one of "
                 r"\.f16, \.bf16, \.f16x2, \.bf16x2, got \.f32", id="min_of_f32"),
    pytest.param(lambda k, mc, f, u: ptx.multimem_red(k, "relaxed", "sys", "and", mc, (u, u),
                                                      type=t.b32),
                 r"multimem\.red\.and: operand 'type': expected for a vector form, one of none "
                 r"\(the vector forms are add, min, max and st\), got \.b32",
                 id="op_without_vectors"),
    pytest.param(lambda k, mc, f, u: ptx.multimem_st(k, "weak", mc, (f,) * 8),
                 r"multimem\.st\.f32: operand 'b': expected a vector of 2 or 4 values, got 8 "
                 r"values", id="width_8_of_f32"),
    pytest.param(lambda k, mc, f, u: ptx.multimem_st(k, "weak", mc, (u, u)),
                 r"multimem\.st: operand 'type': expected for a vector form, one of \.f32, "
                 r".*got \.u32", id="integer_type"),
    pytest.param(lambda k, mc, f, u: ptx.multimem_red(k, "relaxed", "sys", "add", mc, (f, u),
                                                      type=t.f32),
                 r"multimem\.red\.add\.v2\.f32: operand 'b\[1\]': expected", id="mixed_lanes"),
    pytest.param(lambda k, mc, f, u: Multimem(MultimemKind.ld_reduce, "weak", None, RedOp.add,
                                              t.f32, mc, (u, f)),
                 r"multimem\.ld_reduce\.add\.v2\.f32: operand 'd\[0\]': expected",
                 id="ld_reduce_mixed_results"),
]


@pytest.mark.parametrize("call, words", REFUSALS)
def test_vector_multimem_refusals(call, words):
    k, mc = _kernel("bad")
    f = k.ld_param(k.param(t.f32, "f"))
    with pytest.raises(OperandError, match=words) as e:
        call(k, mc, f, k.reg(t.u32))
    assert (e.value.loc.file, e.value.loc.line) == (__file__, call.__code__.co_firstlineno)
    assert not [s for s in k.body if "multimem" in s.render()]


def test_a_vector_type_by_name():
    """`type=` by its PTX name, as for the scalar forms (the fuzz campaign found it refused)."""
    k, mc = _kernel("mm_named")
    ptx.multimem_st(k, "weak", mc, (k.reg(t.b32), k.reg(t.b32)), type="bf16x2")
    ptx.multimem_red(k, "relaxed", "gpu", "max", mc, tuple(k.reg(t.f16) for _ in range(8)),
                     type="f16")
    text = Module([k]).emit()
    assert "multimem.st.weak.global.v2.bf16x2" in text
    assert "multimem.red.relaxed.gpu.global.max.v8.f16" in text
