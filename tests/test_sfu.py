"""The special-function builders (ex2, lg2, rcp, sqrt, rsqrt, sin, cos, tanh): every form of
the table built, golden and assembled at its inferred minimum, pins below refused, one
refusal per class of mistake, read back from text, and seen by the checker as plain
register arithmetic."""

from __future__ import annotations

import sys

import pytest

from ptxdsl import BuildError, Kernel, Module, OperandError, VersionError, t
from ptxdsl.checker import check_kernel
from ptxdsl.frontend import parse_ptx
from ptxdsl.instructions.sfu import _FORMS, FORMS, OPTIONAL, REQUIRED, Sfu, SfuMode, SfuOp
from tests.tma_cases import Case, Env, FormChecks


class SEnv(Env):
    f32 = property(lambda s: s._get("f32", lambda: s.k.ld_param(s.k.param(t.f32, "x"))))
    f64 = property(lambda s: s._get("f64", lambda: s.k.ld_param(s.k.param(t.f64, "y"))))
    b16 = property(lambda s: s._get("b16", lambda: s.k.mov(s.k.ld_param(s.k.param(t.u16, "h")),
                                                           type=t.b16)))
    b32 = property(lambda s: s._get("b32", lambda: s.k.ld_param(s.k.param(t.b32, "h2"))))

    def value(self, ty):
        """A register holding a value of `ty` (a packed pair in a .b32, a half in a .b16)."""
        if ty in (t.f32, t.f64):
            return self.f32 if ty is t.f32 else self.f64
        return self.b32 if ty.bits == 32 else self.b16


def _case(op, ty, mode, ftz, form):
    def build(e):
        getattr(e.k, op.value)(e.value(ty), type=ty, mode=mode.value, ftz=ftz)
    r = form.requires
    return Case(f"{op.value}.{mode.value}{'.ftz' * ftz}.{ty.value}", build, str(r.version),
                f"sm_{r.sm}")


def _every_form():
    """Every valid (op, type, mode, ftz) of the table the class validates against."""
    for (op, ty), form in _FORMS.items():
        for mode, rule in form.modes.items():
            for ftz in ((False, True) if rule == OPTIONAL else (rule == REQUIRED,)):
                yield _case(op, ty, mode, ftz, form)


def _group(case: Case) -> str:
    return {"6.3": "sfu/f64" if case.id.endswith("f64") else "sfu/f32", "7.0": "sfu/half",
            "7.8": "sfu/bf16"}[case.version]


GROUPS: dict[str, list[Case]] = {}
for _c in _every_form():
    GROUPS.setdefault(_group(_c), []).append(_c)


class TestForms(FormChecks):
    GROUPS = GROUPS
    ENV = SEnv

    @classmethod
    def below_target_cases(cls):
        return [c for c in cls.cases() if c.target != "sm_75"]   # ptxdsl knows none below


def test_every_op_and_type_has_a_form():
    ids = {c.id for c in TestForms.cases()}
    assert len(ids) == len(TestForms.cases()) == 50
    assert {"rcp.approx.ftz.f64", "ex2.approx.ftz.bf16x2", "tanh.approx.f16x2",
            "sqrt.rp.ftz.f32", "rsqrt.approx.ftz.f64"} <= ids


def test_forms_rows_match_code():
    assert {r for _, r, _ in FORMS} == {f.requires for f in _FORMS.values()}
    assert Sfu("tanh", t.bf16x2, Kernel("k").reg(t.b32), SEnv().b32,
               SfuMode.approx).requires == FORMS[-1][1]


def test_text_defaults_and_register_types():
    e = SEnv()
    k = e.k
    assert k.rcp(e.f32).type is t.f32
    k.sqrt(e.f64)
    k.ex2(e.b16, type=t.bf16)
    h = k.reg(t.f16x2)
    assert k.tanh(h).type is t.f16x2
    out = k.reg(t.f32, "out")
    assert k.sin(e.f32, dst=out) is out
    k.cos(0.5, type=t.f32)
    k.lg2(e.f32, ftz=True)
    text = e.module().emit()
    for line in ("rcp.rn.f32 %f2, %f1;", "sqrt.rn.f64 %fd2, %fd1;",
                 "ex2.approx.ftz.bf16 %h1, %rs2;", "tanh.approx.f16x2 %r2, %r1;",
                 "sin.approx.f32 %out, %f1;",
                 "cos.approx.f32 %f3, 0f3F000000;", "lg2.approx.ftz.f32 %f4, %f1;"):
        assert line in text


def test_read_back():
    e = SEnv()
    for op in SfuOp:
        getattr(e.k, op.value)(e.f32, mode="approx")
    e.k.rcp(e.f64, mode="rm")
    text = e.module().emit()
    body = [s.insn for s in parse_ptx(text).kernels[0].body if hasattr(s, "insn")]
    assert [i.opcode() for i in body if isinstance(i, Sfu)] == \
        [f"{op.value}.approx.f32" for op in SfuOp] + ["rcp.rm.f64"]
    # The ISA's missing rounding is the class's refusal: the reader keeps such text raw.
    raw = parse_ptx(text.replace("ex2.approx.f32", "ex2.f32")).kernels[0].body
    assert "Raw" in [type(s.insn).__name__ for s in raw if hasattr(s, "insn")]


def test_checker_sees_plain_arithmetic():
    """A kernel that computes with every op, stores through shared memory between barriers and
    writes the result out checks clean, notes included: no unknown-instruction finding."""
    k = Kernel("softmaxish", reqntid=128)
    out = k.ld_param(k.param_ptr("out"))
    buf = k.shared_array(t.f32, 128, align=16, name="buf")
    x = k.cvt(k.tid.x, t.f32)
    y = k.ex2(k.mul(x, 1.4426950408889634), ftz=True)
    for op in ("lg2", "rsqrt", "sin", "cos", "tanh"):
        y = getattr(k, op)(y)
    y = k.rcp(k.sqrt(y, mode="approx"), mode="approx", ftz=True)
    slot = k.add(k.mov(buf), k.shl(k.tid.x, 2))
    k.st(slot, y, space="shared::cta")
    k.bar_sync(0)
    z = k.ld(k.add(k.mov(buf), k.shl(k.xor(k.tid.x, 1), 2)), type=t.f32, space="shared::cta")
    k.st(k.add(out, k.mul(k.tid.x, 4, type=t.u32, mode="wide")), z, space="global")
    assert [f.format() for f in check_kernel(k, notes=True)] == []
    assert Module([k]).assemble()[:4] == b"\x7fELF"


# -- refusals: one per class of mistake, each at the user's line -------------------------------
def _next_line() -> int:
    return sys._getframe(1).f_lineno + 1


def _at(err, line: int) -> None:
    assert (err.loc.file, err.loc.line) == (__file__, line)


def test_refuse_rounding_the_op_lacks():
    e = SEnv()
    with pytest.raises(BuildError, match=r"ex2\.f32: the mode must be 'approx' \(ex2\.f32 has "
                                         r"no IEEE-rounded form\), got 'rn'") as err:
        line = _next_line()
        e.k.ex2(e.f32, mode="rn")
    _at(err.value, line)
    with pytest.raises(BuildError, match=r"sqrt\.f64: the mode must be 'rn' or 'rz' or 'rm' or "
                                         r"'rp' \(sqrt\.f64 has no \.approx form\)"):
        e.k.sqrt(e.f64, mode="approx")


def test_refuse_missing_approx():
    e = SEnv()
    with pytest.raises(BuildError, match=r"cos\.f32: needs a rounding mode: mode='approx'") as err:
        line = _next_line()
        Sfu("cos", t.f32, e.k.reg(t.f32), e.f32)
    _at(err.value, line)


def test_refuse_unknown_mode():
    e = SEnv()
    with pytest.raises(OperandError, match=r"rcp\.f32: operand 'mode': expected one of "
                                           r"'approx', 'rn'.*got str 'fast'"):
        e.k.rcp(e.f32, mode="fast")


@pytest.mark.parametrize("op, ty, expected", [
    ("lg2", t.f64, ".f32"), ("sin", t.f16, ".f32"), ("rcp", t.f16x2, ".f32, .f64"),
    ("ex2", t.f64, ".f32, .f16, .f16x2, .bf16, .bf16x2"), ("tanh", t.u32, ".f32, .f16")])
def test_refuse_type(op, ty, expected):
    e = SEnv()
    with pytest.raises(OperandError, match=rf"{op}: operand 'type': expected one of "
                                           rf"{expected}.*got \.{ty.value}") as err:
        line = _next_line()
        getattr(e.k, op)(e.value(t.f32), type=ty)
    _at(err.value, line)


def test_refuse_bit_register_without_type():
    e = SEnv()
    with pytest.raises(OperandError, match=r"got \.b32 \(a bit type does not say which float it "
                                           r"holds: pass type=\)"):
        e.k.ex2(e.b32)


def test_refuse_register_of_another_type():
    e = SEnv()
    with pytest.raises(OperandError, match=r"ex2\.approx\.f16x2: operand 'a': expected a "
                                           r"register compatible with \.f16x2.*\.f32"):
        e.k.ex2(e.f32, type=t.f16x2)
    with pytest.raises(OperandError, match=r"tanh\.approx\.bf16: operand 'd': expected a "
                                           r"register compatible with \.bf16.*\.f16"):
        e.k.tanh(e.b16, type=t.bf16, dst=e.k.reg(t.f16))


def test_refuse_half_immediate():
    e = SEnv()
    with pytest.raises(OperandError, match=r"operand 'a': expected a register \(PTX has no "
                                           r"immediates of this type\)"):
        e.k.ex2(1.0, type=t.f16)


@pytest.mark.parametrize("op, ty, mode", [("tanh", t.f32, "approx"), ("ex2", t.f16, "approx"),
                                          ("sqrt", t.f64, "rn"), ("rcp", t.f64, "rz")])
def test_refuse_ftz_where_not_allowed(op, ty, mode):
    e = SEnv()
    with pytest.raises(BuildError, match=rf"{op}\.{ty.value}: no \.ftz: the ISA defines no "
                                         rf"{op}\.{mode}\.ftz\.{ty.value} form") as err:
        line = _next_line()
        getattr(e.k, op)(e.value(ty), type=ty, mode=mode, ftz=True)
    _at(err.value, line)


@pytest.mark.parametrize("op, ty, mode", [("ex2", t.bf16, "approx"), ("ex2", t.bf16x2, "approx"),
                                          ("rcp", t.f64, "approx")])
def test_refuse_missing_ftz_where_required(op, ty, mode):
    e = SEnv()
    with pytest.raises(BuildError, match=rf"must flush subnormals: pass ftz=True \(PTX has only "
                                         rf"{op}\.{mode}\.ftz\.{ty.value}\)"):
        getattr(e.k, op)(e.value(ty), type=ty, mode=mode, ftz=False)


def test_refuse_non_bool_ftz():
    e = SEnv()
    with pytest.raises(BuildError, match="ftz must be True or False"):
        Sfu("ex2", t.f32, e.k.reg(t.f32), e.f32, "approx", 1)


@pytest.mark.parametrize("op, ty", [("ex2", t.bf16x2), ("tanh", t.bf16)])
def test_refuse_packed_bf16_below_sm90(op, ty):
    e = SEnv(target="sm_80")
    getattr(e.k, op)(e.value(ty), type=ty)
    with pytest.raises(VersionError, match=rf"{op}\.approx.*\.{ty.value} needs PTX ISA 7\.8, "
                                           r"sm_90\+.*pinned to \.target sm_80"):
        e.module().emit()
