"""ldmatrix/stmatrix: every form assembled at its inferred minimum, goldens, pins below,
refusals."""

from __future__ import annotations

import itertools

import pytest

from ptxdsl import Addr, BuildError, Kernel, Module, OperandError, t
from ptxdsl.instructions.matrix import FORMS, LdMatrix, StMatrix
from ptxdsl.types import StateSpace
from tests.test_matrix_gpu import cvt_kernel, matrix_kernel
from tests.tma_cases import Case, Env, FormChecks


class MEnv(Env):
    tile = property(lambda s: s._get("tile", lambda: s.k.shared_array(
        t.b16, 1024, align=128, name="tile")))
    tile32 = property(lambda s: s._get("tile32", lambda: s.k.mov(s.tile)))
    tile64 = property(lambda s: s._get("tile64", lambda: s.k.mov(s.tile, type=t.u64)))
    tileg = property(lambda s: s._get("tileg", lambda: s.k.generic_addr(s.tile)))

    def regs(self, n):
        return tuple(self.k.reg(t.b32) for _ in range(n))


def _addr(e, how):
    return {"sym": lambda: e.tile, "r32": lambda: e.tile32, "r64": lambda: e.tile64,
            "off": lambda: Addr(e.tile32, 256), "gen": lambda: e.tileg}[how]()


SPACES = {"sym": "shared", "r32": "shared", "r64": "shared::cta", "off": "shared::cta",
          "gen": ""}


def _ld(n, trans, how):
    space = SPACES[how] or StateSpace.generic
    return lambda e: e.k.ldmatrix(_addr(e, how), n, trans=trans, space=space)


def _st(n, trans, how):
    space = SPACES[how] or StateSpace.generic
    return lambda e: e.k.stmatrix(_addr(e, how), e.regs(n), trans=trans, space=space)


COMBOS = list(itertools.product((1, 2, 4), (False, True), SPACES))


def _id(op, n, trans, how):
    return f"{op}-x{n}{'-trans' if trans else ''}-{SPACES[how] or 'generic'}-{how}"


GROUPS = {
    "matrix/ldmatrix": [Case(_id("ld", n, tr, how), _ld(n, tr, how), "6.5", "sm_75")
                        for n, tr, how in COMBOS if SPACES[how] != "shared::cta"],
    "matrix/ldmatrix_cta": [Case(_id("ld", n, tr, how), _ld(n, tr, how), "7.8", "sm_75")
                            for n, tr, how in COMBOS if SPACES[how] == "shared::cta"],
    "matrix/stmatrix": [Case(_id("st", n, tr, how), _st(n, tr, how), "7.8", "sm_90")
                        for n, tr, how in COMBOS],
}


class TestForms(FormChecks):
    GROUPS = GROUPS
    ENV = MEnv

    @classmethod
    def below_target_cases(cls):
        return [c for c in cls.cases() if c.target != "sm_75"]    # nothing below sm_75


def test_text_and_operand_order():
    e = MEnv()
    r = e.k.ldmatrix(e.tile32, 4, trans=True)
    e.k.stmatrix(Addr(e.tile32, 512), r[:2], space="shared::cta")
    text = e.module().emit()
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r2, %r3, %r4, %r5}, [%r1];" in text
    assert "stmatrix.sync.aligned.m8n8.x2.shared::cta.b16 [%r1+512], {%r2, %r3};" in text


def test_generic_register_address_picks_generic_space():
    e = MEnv()
    e.k.ldmatrix(e.tileg, 1)
    assert "ldmatrix.sync.aligned.m8n8.x1.b16 {%r1}, [%rd2];" in e.module().emit()


def test_forms_rows_match_code():
    reqs = {f: r for f, r, _ in FORMS}
    e = MEnv()
    assert LdMatrix(e.regs(1), e.tile).requires == reqs[FORMS[0][0]]
    assert LdMatrix(e.regs(1), e.tile, space="shared::cta").requires == reqs[FORMS[1][0]]
    assert StMatrix(e.tile, e.regs(4)).requires == reqs[FORMS[2][0]]


# -- refusals --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 3, 8])
def test_refuse_matrix_count(n):
    e = MEnv()
    with pytest.raises(BuildError, match="1, 2 or 4"):
        e.k.stmatrix(e.tile, e.regs(n) if n else ())
    with pytest.raises(BuildError, match="1, 2 or 4"):
        e.k.ldmatrix(e.tile, n)


def test_refuse_misaligned_row_offset():
    e = MEnv()
    with pytest.raises(BuildError, match="16-byte aligned: offset 8"):
        e.k.ldmatrix(Addr(e.tile32, 8), 4)


def test_refuse_underaligned_symbol():
    e = MEnv()
    s = e.k.shared_array(t.b16, 64, align=8, name="small")
    with pytest.raises(BuildError, match="small is only 8-byte aligned"):
        e.k.stmatrix(s, e.regs(1))


def test_refuse_non_shared_symbol():
    e = MEnv()
    g = e.m.global_array(t.b16, 64, align=16, name="gl")
    with pytest.raises(OperandError, match="a symbol in .shared"):
        e.k.ldmatrix(g, 1)


@pytest.mark.parametrize("space", ["global", "shared::cluster", "local"])
def test_refuse_space(space):
    e = MEnv()
    with pytest.raises(OperandError, match="'shared', 'shared::cta', 'generic'"):
        e.k.ldmatrix(e.tile64, 1, space=space)


def test_refuse_wrong_register_width():
    e = MEnv()
    with pytest.raises(OperandError, match=r"d\[1\].*\.b32"):
        LdMatrix((e.k.reg(t.b32), e.k.reg(t.b64)), e.tile)
    with pytest.raises(OperandError, match=r"b\[0\].*\.b32 register"):
        StMatrix(e.tile, (7,))


def test_refuse_32bit_generic_address():
    e = MEnv()
    with pytest.raises(OperandError, match="64-bit integer register"):
        e.k.ldmatrix(e.tile32, 1, space=StateSpace.generic)


def test_kernel_of_all_forms_assembles_at_sm90a():
    k = Kernel("all")
    e = MEnv()
    e.k = k
    for n, tr, how in COMBOS:
        _ld(n, tr, how)(e)
        _st(n, tr, how)(e)
    assert Module([k], target="sm_90a").assemble()[:4] == b"\x7fELF"


@pytest.mark.parametrize("make", [lambda: matrix_kernel(4, True, False),
                                  lambda: matrix_kernel(1, False, True), cvt_kernel],
                         ids=["matrix-x4-trans", "matrix-x1-store-trans", "cvt"])
def test_gpu_kernels_assemble(make):
    """The GPU tests' kernels (tests/test_matrix_gpu.py) build and assemble everywhere."""
    assert make().assemble()[:4] == b"\x7fELF"
