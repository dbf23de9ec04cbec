"""The shared cuda::ptx argument conventions (`ptxdsl/instructions/_ptx_args.py`): one meaning
per state-space / scope / semantics name in every family, cuda::ptx's tag spellings and the
`ptxdsl.ptx` constants, and the overload binder."""

from __future__ import annotations

import pytest

from ptxdsl import BuildError, Kernel, OperandError, ptx, t
from ptxdsl.instructions import _ptx_args as A
from ptxdsl.instructions.bulk import RedOp
from ptxdsl.types import Scope, Sem, StateSpace

S = StateSpace
ALL = tuple(StateSpace)


@pytest.mark.parametrize("spelling, want", [
    ("shared", S.shared_cta), ("space_shared", S.shared_cta), ("shared::cta", S.shared_cta),
    (".shared::cta", S.shared_cta), (ptx.space_shared, S.shared_cta),
    ("cluster", S.shared_cluster), ("space_cluster", S.shared_cluster),
    ("shared::cluster", S.shared_cluster), (ptx.space_cluster, S.shared_cluster),
    ("global", S.global_), ("space_global", S.global_), (ptx.space_global, S.global_),
    ("generic", S.generic),
])
def test_space_names_have_one_meaning(spelling, want):
    assert A.space("x", "space", spelling, ALL) is want


@pytest.mark.parametrize("spelling, want", [
    ("gpu", Scope.gpu), ("scope_gpu", Scope.gpu), (".gpu", Scope.gpu), (ptx.scope_sys, Scope.sys),
    ("cluster", Scope.cluster), ("scope_cluster", Scope.cluster), (ptx.scope_cta, Scope.cta),
])
def test_scope_names(spelling, want):
    assert A.scope("x", spelling) is want


@pytest.mark.parametrize("spelling, want", [
    ("release", Sem.release), ("sem_release", Sem.release), (ptx.sem_acquire, Sem.acquire),
    ("sem_relaxed", Sem.relaxed), ("sem_acq_rel", Sem.acq_rel), ("sem_sc", Sem.sc),
])
def test_sem_names(spelling, want):
    assert A.sem("x", spelling) is want


@pytest.mark.parametrize("spelling, want", [
    ("add", RedOp.add), ("op_add", RedOp.add), ("and", RedOp.and_), ("op_and_op", RedOp.and_),
    ("op_xor_op", RedOp.xor), (ptx.op_or_op, RedOp.or_), (ptx.op_min, RedOp.min),
])
def test_op_names(spelling, want):
    assert A.op("x", spelling, RedOp) is want


def test_bare_shared_only_as_the_enum_member_where_the_form_has_it():
    assert A.space("x", "space", S.shared, (S.shared, S.shared_cta)) is S.shared
    with pytest.raises(OperandError, match="one of 'shared' \\(.shared::cta\\)"):
        A.space("x", "space", S.shared, (S.shared_cta,))


def test_refused_space_lists_names_that_are_accepted():
    allowed = (S.shared_cta, S.shared_cluster, S.global_)
    with pytest.raises(OperandError, match="'shared' \\(.shared::cta\\), 'cluster' "
                                           "\\(.shared::cluster\\), 'global' \\(.global\\)"):
        A.space("x", "space", "local", allowed)
    for name in ("shared", "cluster", "global"):       # each suggested name is accepted
        assert A.space("x", "space", name, allowed) in allowed


def test_constants_are_exported_by_ptx():
    for name in (*A.TAGS, "op_add", "op_and_op", "cta_group_1", "cta_group_2"):
        assert name in ptx.__all__ and getattr(ptx, name) is not None


OVERLOADS = (("addr", "*space"), ("addr", "count", "*space"), ("sem", "scope", "space", "addr"))


@pytest.mark.parametrize("args, kw, want", [
    (("b",), {}, (0, {"addr": "b"})),
    (("b", 2), {}, (1, {"addr": "b", "count": 2})),
    (("r", "c", "s", "b"), {}, (2, {"sem": "r", "scope": "c", "space": "s", "addr": "b"})),
    ((), {"sem": "r", "scope": "c", "space": "s", "addr": "b"},
     (2, {"sem": "r", "scope": "c", "space": "s", "addr": "b"})),
    (("b",), {"space": "x"}, (0, {"addr": "b", "space": "x"})),
    (("r", "c", "s"), {"addr": "b"}, (2, {"sem": "r", "scope": "c", "space": "s", "addr": "b"})),
])
def test_bind_positional_and_keyword(args, kw, want):
    assert A.bind("f", args, kw, OVERLOADS) == want


def test_bind_prefers_the_cuda_ptx_overload():
    ov = (("addr", "*sem"), ("sem", "addr"))
    assert A.bind("f", (), {"addr": 1, "sem": 2}, ov)[0] == 1


def test_bind_is_pythons_positional_then_keyword():
    """(addr, count, sem=, scope=) is the (addr, count) overload with keyword extensions, not
    (sem, scope, space, addr) with the positionals shifted past the keywords."""
    ov = (("addr", "count", "*sem", "*scope"), ("sem", "scope", "space", "addr"))
    assert A.bind("f", ("b", 2), {"sem": "r", "scope": "c"}, ov) == (
        0, {"addr": "b", "count": 2, "sem": "r", "scope": "c"})


@pytest.mark.parametrize("args, kw", [(("a", "b", "c"), {}), (("b",), {"bogus": 1}), ((), {})])
def test_bind_refusal_lists_the_overloads(args, kw):
    with pytest.raises(BuildError, match=r"f\(k, addr, space=\); f\(k, addr, count, space=\); "
                                         r"f\(k, sem, scope, space, addr\)"):
        A.bind("f", args, kw, OVERLOADS)


def test_space_addr_converts_a_generic_pointer_like_cuda_ptx():
    k = Kernel("k")
    p = k.ld_param(k.param_ptr("p"))
    out = A.space_addr(k, "x", p, S.global_)
    assert out.space is S.global_
    sh = A.space_addr(k, "x", k.generic_addr(k.shared_array(t.b64, 1, name="bar")), S.shared_cta)
    assert sh.space is S.shared
    text = "\n".join(i.render() for i in k.body if hasattr(i, "render"))
    assert "cvta.to.global.u64" in text and "cvta.to.shared.u64" in text
