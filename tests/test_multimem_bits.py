"""multimem.ld_reduce / st / red (assembled only), prmt, bfind, bmsk, shl, shr, exit, trap in
cuda::ptx's forms: every overload of the cuda::ptx headers, expanded from its PTX-form comment,
built with the builder of the same name, compared with the header's text and requirement, and
assembled (one module per requirement); goldens, pin-below tests and refusal rules."""

from __future__ import annotations

import pytest

from ptxdsl import BuildError, OperandError, ptx, t
from ptxdsl.instructions.bits import Prmt
from ptxdsl.instructions.multimem import Multimem
from ptxdsl.testing import assemble_declared
from ptxdsl.types import req
from tests.cccl_forms import by_requirement, header_forms, needs_cccl
from tests.tma_cases import Case, Env, FormChecks

HEADERS = ("multimem_ld_reduce", "multimem_st", "multimem_red", "prmt", "bfind", "bmsk", "shl",
           "shr", "exit", "trap")
FORMS = header_forms(HEADERS)


def _reg(e, ty):
    return e._get(f"reg-{ty.value}", lambda: e.k.reg(ty))


def build_form(e, form: str, name: str, q: dict) -> str:
    """Build one form; return the header's text with our operands."""
    head, _, operands = form.partition(" ")
    ty = getattr(t, head.rsplit(".", 1)[-1], None)
    fn = getattr(ptx, name)
    sem_scope = [q[k] for k in ("sem", "scope") if k in q]
    ops = {}
    if name == "multimem_ld_reduce":
        ops["dest"] = fn(e.k, *sem_scope, q["op"], e.gglobal, type=ty).render()
    elif name == "multimem_st":
        fn(e.k, *sem_scope, e.gglobal, _reg(e, ty))
    elif name == "multimem_red":
        fn(e.k, *sem_scope, q["op"], e.gglobal, _reg(e, ty))
    elif name.startswith(("prmt", "bmsk")):
        srcs = [_reg(e, t.b32)] * (3 if name.startswith("prmt") else 2)
        ops["dest"] = fn(e.k, *srcs).render()
    elif name.startswith(("bfind", "shl", "shr")):
        args = (_reg(e, ty),) if name.startswith("bfind") else (_reg(e, ty), _reg(e, t.u32))
        ops["dest"] = fn(e.k, *args).render()
        ops["b_reg"] = _reg(e, t.u32).render()
    else:
        fn(e.k)
    if "[addr]" in operands:
        ops["[addr]"] = f"[{e.gglobal.render()}]"
    if ty is not None:
        ops.update({"val": _reg(e, ty).render(), "a_reg": _reg(e, ty).render()})
    if name.startswith(("prmt", "bmsk")):
        ops.update({f"{x}_reg": _reg(e, t.b32).render() for x in "abc"})
    for key, value in ops.items():
        operands = operands.replace(key, value)
    return f"{head} {operands};" if operands else f"{head};"


def _groups():
    return by_requirement(FORMS)


@needs_cccl
def test_header_forms_are_all_ours():
    names = {name for _, name, _, _, _ in FORMS}
    # multimem: 18 op/type pairs x (weak + 2 sems x 4 scopes) for ld_reduce, 2 types x 9 for
    # st, 18 x 8 for red; prmt 7, bfind 8, bmsk 2, shl 3, shr 6, exit, trap.
    assert len(FORMS) == 18 * 9 + 2 * 9 + 18 * 8 + 7 + 8 + 2 + 3 + 6 + 1 + 1
    assert all(callable(getattr(ptx, n, None)) for n in names)


@needs_cccl
@pytest.mark.parametrize("key", sorted(_groups()), ids=lambda k: f"{k[0]}-sm_{k[1]}")
def test_every_cuda_ptx_form(key):
    version, sm = key
    e = Env()
    for form, name, q in _groups()[key]:
        want = build_form(e, form, name, q)
        stmt = list(e.k.statements())[-1]
        assert stmt.render() == want, (name, q)
        assert stmt.insn.requires == req(str(version), sm), name
    m = e.module()
    assert (m.version, str(m.target)) == (version, f"sm_{sm}")
    assert assemble_declared(m.emit())[:4] == b"\x7fELF"


# -- goldens and pins ------------------------------------------------------------------------------
def C(id, fn, version, target):
    return Case(id, fn, version, target)


def _s64(e):
    return _reg(e, t.s64)


GROUPS: dict[str, list[Case]] = {
    "multimem/multimem": [
        C("ld-reduce-weak", lambda e: ptx.multimem_ld_reduce(e.k, "weak", "add", e.gptr,
                                                             type=t.u32), "8.1", "sm_90"),
        C("ld-reduce-acquire", lambda e: ptx.multimem_ld_reduce(e.k, "acquire", "sys", "and",
                                                                e.gglobal, type=t.b64), "8.1",
          "sm_90"),
        C("st-weak", lambda e: ptx.multimem_st(e.k, "weak", e.gglobal, e.v32), "8.1", "sm_90"),
        C("st-release", lambda e: ptx.multimem_st(e.k, "release", "gpu", e.gglobal, e.v64), "8.1",
          "sm_90"),
        C("red-min-s64", lambda e: ptx.multimem_red(e.k, "relaxed", "cluster", "min", e.gglobal,
                                                    _s64(e)), "8.1", "sm_90"),
        C("red-xor-keywords", lambda e: ptx.multimem_red(e.k, "release", op="xor", addr=e.gglobal,
                                                         val=e.v32, scope="cta"), "8.1", "sm_90"),
        C("red-tags", lambda e: ptx.multimem_red(e.k, ptx.sem_relaxed, ptx.scope_gpu,
                                                 ptx.op_add, e.gglobal, e.v64), "8.1", "sm_90"),
        C("red-add-f32", lambda e: ptx.multimem_red(e.k, "relaxed", "sys", "add", e.gglobal,
                                                    e.k.mov(1.5, type=t.f32)), "8.1", "sm_90"),
        C("st-s64", lambda e: ptx.multimem_st(e.k, "weak", e.gglobal, _s64(e), type=t.s64),
          "8.1", "sm_90"),
    ],
    "bits/prmt_bfind_shift": [
        *(C(f"prmt{m}", lambda e, m=m: getattr(ptx, f"prmt{m}")(e.k, e.v32, 0x76543210, e.v32),
            "6.3", "sm_75") for m in ("", "_f4e", "_b4e", "_rc8", "_ecl", "_ecr", "_rc16")),
        C("bfind-u32", lambda e: ptx.bfind(e.k, e.v32), "6.3", "sm_75"),
        C("bfind-shiftamt-s64", lambda e: ptx.bfind_shiftamt(e.k, _s64(e)), "6.3", "sm_75"),
        C("shl-b64", lambda e: ptx.shl(e.k, e.v64, 3), "6.3", "sm_75"),
        C("shr-u32", lambda e: ptx.shr(e.k, e.v32, e.v32), "6.3", "sm_75"),
        C("shr-s64", lambda e: ptx.shr(e.k, _s64(e), 63), "6.3", "sm_75"),
        C("shr-f32-bits", lambda e: ptx.shr(e.k, e.k.mov(1.5, type=t.f32), 3), "6.3", "sm_75"),
        C("trap", lambda e: ptx.trap(e.k), "6.3", "sm_75"),
        C("exit", lambda e: ptx.exit(e.k), "6.3", "sm_75"),
    ],
    "bits/bmsk": [
        C("bmsk-clamp", lambda e: ptx.bmsk_clamp(e.k, e.v32, 8), "7.6", "sm_75"),
        C("bmsk-wrap", lambda e: ptx.bmsk_wrap(e.k, 4, e.v32), "7.6", "sm_75"),
    ],
}


class TestForms(FormChecks):
    GROUPS = GROUPS

    @classmethod
    def below_target_cases(cls):
        return [c for c in cls.cases() if c.target != "sm_75"]


def test_elect_sync_builder():
    e = Env()
    p = ptx.elect_sync(e.k, 0xF)
    assert p.type is t.pred
    assert [s.render() for s in e.k.statements()] == ["elect.sync _|%p1, 0x0000000F;"]


def test_shl_keeps_the_register_type():
    e = Env()
    d = ptx.shl(e.k, e.v32, 1)
    assert d.type is t.u32 and list(e.k.statements())[-1].render() == "shl.b32 %r2, %r1, 1;"


# -- refusal rules ---------------------------------------------------------------------------------
def test_refuse_multimem_weak_with_scope():
    with pytest.raises(OperandError, match="'scope'.*no scope with .weak"):
        Multimem("st", "weak", "gpu", None, "b32", Env().gptr, 1)


def test_refuse_multimem_scope_missing():
    e = Env()
    with pytest.raises(OperandError, match=r"'scope'.*a scope for .relaxed"):
        ptx.multimem_st(e.k, "relaxed", e.gptr, e.v32)


def test_refuse_multimem_red_weak():
    e = Env()
    with pytest.raises(OperandError, match="multimem.red.*'sem'"):
        ptx.multimem_red(e.k, "weak", "gpu", "add", e.gptr, e.v32)


def test_refuse_multimem_st_acquire():
    e = Env()
    with pytest.raises(OperandError, match="multimem.st.*'sem'"):
        ptx.multimem_st(e.k, "acquire", "gpu", e.gptr, e.v32)


def test_refuse_multimem_op_type():
    e = Env()
    with pytest.raises(OperandError, match="multimem.ld_reduce.*add.*'type'"):
        ptx.multimem_ld_reduce(e.k, "weak", "add", e.gptr, type=t.s64)


def test_refuse_multimem_float_min():
    e = Env()
    with pytest.raises(OperandError, match="multimem.red.*min.*'type'"):
        ptx.multimem_red(e.k, "relaxed", "gpu", "min", e.gptr, e.k.mov(1.0, type=t.f32))


def test_refuse_multimem_st_16bit():
    e = Env()
    with pytest.raises(OperandError, match="multimem.st.*'type'"):
        ptx.multimem_st(e.k, "weak", e.gglobal, e.k.reg(t.b16))


def test_refuse_multimem_32bit_address():
    e = Env()
    with pytest.raises(OperandError, match="'a'.*64-bit"):
        ptx.multimem_st(e.k, "weak", e.v32, e.v32)


def test_refuse_multimem_ld_reduce_without_type():
    e = Env()
    with pytest.raises(BuildError, match="pass type="):
        ptx.multimem_ld_reduce(e.k, "weak", "min", e.gptr)


def test_refuse_multimem_argument_count():
    e = Env()
    with pytest.raises(BuildError, match=r"multimem_red: no cuda::ptx overload takes \(k, _, _, "
                                         r"_, _\).*multimem_red\(k, sem, scope, op, addr, val\)"):
        ptx.multimem_red(e.k, "relaxed", "gpu", e.gptr, e.v32)


def test_refuse_prmt_mode():
    e = Env()
    with pytest.raises(OperandError, match="prmt.*'mode'"):
        Prmt("rc4", e.k.reg(t.b32), e.v32, e.v32, e.v32)


def test_refuse_prmt_64bit_operand():
    e = Env()
    with pytest.raises(OperandError, match="prmt.b32.*'a'"):
        ptx.prmt(e.k, e.v64, e.v32, 0)


@pytest.mark.parametrize("ty", [t.f32, t.u16])
def test_refuse_bfind_type(ty):
    e = Env()
    with pytest.raises(OperandError, match="bfind.*'type'"):
        ptx.bfind(e.k, e.k.reg(ty))


def test_refuse_bmsk_64bit():
    e = Env()
    with pytest.raises(OperandError, match="bmsk.wrap.b32.*'a'"):
        ptx.bmsk_wrap(e.k, e.v64, 1)


@pytest.mark.parametrize("op", ["shl", "shr"])
@pytest.mark.parametrize("ty", [t.u8, t.pred, t.b128])
def test_refuse_shift_width(op, ty):
    e = Env()
    with pytest.raises(OperandError, match=f"{op}.*'a_reg'.*16-, 32- or 64-bit value"):
        getattr(ptx, op)(e.k, e.k.reg(ty), 1)


def test_shift_of_a_float_shifts_its_bits():
    """cuda::ptx's B32 template takes a float too: shr.b32, a logical shift of the bits."""
    e = Env()
    f = e.k.reg(t.f32)
    d = ptx.shr(e.k, f, 3)
    assert d.type is t.f32 and list(e.k.statements())[-1].render() == "shr.b32 %f2, %f1, 3;"
