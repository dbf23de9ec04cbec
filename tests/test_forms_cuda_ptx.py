"""The forms table rows of the issue-15 families are backed by the code: every row has sample
calls, each of which emits an instruction needing exactly the row's Requires (or the row says
the form is not built)."""

from __future__ import annotations

import pytest

from ptxdsl import ptx, t
from ptxdsl.forms import all_forms
from ptxdsl.instructions.sreg import CUDA_PTX_SREGS, builder_name
from tests.tma_cases import Env

FAMILIES = ("cluster", "sreg", "st_async", "ld_st", "multimem", "bits", "control_ptx")
ROWS = all_forms(FAMILIES)


def _pol(e):
    return e._get("pol", lambda: ptx.createpolicy_fractional(e.k, "evict_last"))


def _rb(e):
    return e._get("rb", lambda: ptx.mapa(e.k, "cluster", e.bar, 1))


def _sreg_rows():
    """The sreg rows list their registers in the form: `mov.u32 d, %{a,b,...}`."""
    out = {}
    for row in ROWS:
        if row.family == "sreg":
            names = row.form.split("%{", 1)[1].rstrip("}").split(",")
            assert set(names) <= set(CUDA_PTX_SREGS)
            out[row.form] = [lambda e, n=n: getattr(ptx, builder_name(n))(e.k) for n in names]
    return out


SAMPLES = {
    "barrier.cluster.arrive{.aligned}": [
        lambda e: ptx.barrier_cluster_arrive(e.k),
        lambda e: ptx.barrier_cluster_arrive(e.k, aligned=True)],
    "barrier.cluster.arrive.{release,relaxed}{.aligned}": [
        lambda e: ptx.barrier_cluster_arrive(e.k, "release"),
        lambda e: ptx.barrier_cluster_arrive(e.k, "relaxed", aligned=True)],
    "barrier.cluster.wait{.aligned}": [lambda e: ptx.barrier_cluster_wait(e.k, aligned=True)],
    "barrier.cluster.wait.acquire{.aligned}": [
        lambda e: ptx.barrier_cluster_wait(e.k, "acquire")],
    "mapa.shared::cluster.{u32,u64} d, a, b": [
        lambda e: ptx.mapa(e.k, "cluster", e.smap32, 1),
        lambda e: ptx.mapa(e.k, "cluster", e.smap64, e.v32)],
    "mapa.{u32,u64} d, a, b": [lambda e: ptx.mapa(e.k, "generic", e.bar_generic, 0)],
    "getctarank.shared::cluster.{u32,u64} d, a": [
        lambda e: ptx.getctarank(e.k, "cluster", e.bar),
        lambda e: ptx.getctarank(e.k, "cluster", e.smap64)],
    "getctarank.u64 d, a": [lambda e: ptx.getctarank(e.k, "generic", e.bar_generic)],
    "st.async.weak.shared::cluster.mbarrier::complete_tx::bytes{,.v2}.{b,u,s,f}{32,64}": [
        lambda e: ptx.st_async(e.k, _rb(e), e.v64, _rb(e)),
        lambda e: ptx.st_async(e.k, _rb(e), (e.v32, e.v32), _rb(e), type=t.s32)],
    "st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v4.{b32,u32,s32,f32}": [
        lambda e: ptx.st_async(e.k, _rb(e), (e.v32,) * 4, _rb(e))],
    "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.{inc,dec}.u32": [
        lambda e: ptx.red_async(e.k, "inc", _rb(e), e.v32, _rb(e))],
    "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.{min,max}"
    ".{u32,s32}": [lambda e: ptx.red_async(e.k, "max", _rb(e), e.v32, _rb(e), type=t.s32)],
    "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add"
    ".{u32,s32,u64}": [lambda e: ptx.red_async(e.k, "add", _rb(e), e.v64, _rb(e))],
    "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.{and,or,xor}.b32": [
        lambda e: ptx.red_async(e.k, "xor", _rb(e), e.v32, _rb(e))],
    "cp.async.mbarrier.arrive{.noinc}{,.shared}.b64 [addr]": [
        lambda e: ptx.cp_async_mbarrier_arrive_noinc(e.k, e.bar_generic)],
    "cp.async.mbarrier.arrive{.noinc}.shared::cta.b64 [addr]": [
        lambda e: ptx.cp_async_mbarrier_arrive(e.k, e.bar)],
    "ld{.ss}{.nc}.{b8,b16,b32,b64}": [
        lambda e: ptx.ld(e.k, "global", e.gglobal, type=t.b8),
        lambda e: e.k.ld(e.gglobal, type=t.b32, space="global", nc=True)],
    "ld/st{.ss}.b128": [lambda e: ptx.ld(e.k, "global", e.gglobal, type=t.b128)],
    "ld.global{.nc}.L1::{evict_normal,evict_unchanged,evict_first,evict_last,no_allocate}": [
        lambda e: ptx.ld_nc_L1_no_allocate(e.k, "global", e.gglobal, type=t.b16)],
    "ld.global{.nc}{.L1::*}.L2::{64B,128B}": [
        lambda e: ptx.ld_L1_evict_first_L2_64B(e.k, "global", e.gglobal, type=t.b32)],
    "ld.global{.nc}{.L1::*}.L2::256B": [
        lambda e: ptx.ld_nc_L2_256B(e.k, "global", e.gglobal, type=t.b64)],
    "ld.global{.nc}{.L1::*}.L2::cache_hint{.L2::64B,128B,256B} d, [a], policy": [
        lambda e: ptx.ld_L2_cache_hint_L2_128B(e.k, "global", e.gglobal, _pol(e), type=t.b32)],
    "st.global.L1::{evict_normal,evict_unchanged,evict_first,evict_last,no_allocate}": [
        lambda e: ptx.st_L1_evict_last(e.k, "global", e.gglobal, e.v32)],
    "st.global{.L1::*}.L2::cache_hint [a], b, policy": [
        lambda e: ptx.st_L2_cache_hint(e.k, "global", e.gglobal, e.v64, _pol(e))],
    "multimem.ld_reduce.{weak,{relaxed,acquire}.<scope>}.global.{min,max}.{u32,u64,s32,s64}": [
        lambda e: ptx.multimem_ld_reduce(e.k, "weak", "min", e.gglobal, type=t.s64)],
    "multimem.ld_reduce.{weak,{relaxed,acquire}.<scope>}.global.add.{u32,u64,s32,f32,f64}": [
        lambda e: ptx.multimem_ld_reduce(e.k, "relaxed", "gpu", "add", e.gglobal, type=t.u64),
        lambda e: ptx.multimem_ld_reduce(e.k, "weak", "add", e.gglobal, type=t.f64)],
    "multimem.ld_reduce.{weak,{relaxed,acquire}.<scope>}.global.{and,or,xor}.{b32,b64}": [
        lambda e: ptx.multimem_ld_reduce(e.k, "acquire", "sys", "or", e.gglobal, type=t.b32)],
    "multimem.st.{weak,{relaxed,release}.<scope>}.global.{b,u,s,f}{32,64}": [
        lambda e: ptx.multimem_st(e.k, "weak", e.gglobal, e.v32),
        lambda e: ptx.multimem_st(e.k, "release", "sys", e.gglobal, e.v64, type=t.s64)],
    "multimem.red.{relaxed,release}.<scope>.global.{min,max,add,and,or,xor}.<type>": [
        lambda e: ptx.multimem_red(e.k, "release", "cluster", "and", e.gglobal, e.v64)],
    "multimem.{ld_reduce,red}.<sem>.global.add.{v2,v4}.f32, multimem.st.<sem>.global.{v2,v4}"
    ".f32": [
        lambda e: ptx.multimem_st(e.k, "weak", e.gglobal, (e.k.reg(t.f32),) * 4),
        lambda e: ptx.multimem_red(e.k, "relaxed", "sys", "add", e.gglobal, (1.0, 2.0),
                                   type=t.f32)],
    "multimem.{ld_reduce,red}.<sem>.global.{add,min,max}.{v2,v4,v8}.{f16,bf16}, "
    "{v2,v4}.{f16x2,bf16x2}; multimem.st of the same": [
        lambda e: ptx.multimem_red(e.k, "release", "gpu", "max", e.gglobal,
                                   (e.k.reg(t.b16),) * 8, type=t.bf16),
        lambda e: ptx.multimem_st(e.k, "relaxed", "sys", e.gglobal, (e.k.reg(t.b32),) * 2,
                                  type=t.f16x2)],
    "prmt.b32{,.f4e,.b4e,.rc8,.ecl,.ecr,.rc16}": [
        lambda e: ptx.prmt_ecl(e.k, e.v32, e.v32, 3)],
    "bfind{,.shiftamt}.{u32,u64,s32,s64}": [lambda e: ptx.bfind_shiftamt(e.k, e.v64)],
    "bmsk.{clamp,wrap}.b32": [lambda e: ptx.bmsk_wrap(e.k, e.v32, e.v32)],
    "shl.{b16,b32,b64}": [lambda e: ptx.shl(e.k, e.v64, 1)],
    "shr.{b16,b32,b64,s16,s32,s64}": [lambda e: ptx.shr(e.k, e.v32, 1)],
    "exit": [lambda e: ptx.exit(e.k)],
    "trap": [lambda e: ptx.trap(e.k)],
    "elect.sync {d,_}|p, membermask": [lambda e: ptx.elect_sync(e.k)],
    **_sreg_rows(),
}


def test_every_row_has_samples_or_says_not_built():
    for row in ROWS:
        assert row.form in SAMPLES or row.note.startswith("not built"), row.form
    assert set(SAMPLES) <= {row.form for row in ROWS}


@pytest.mark.parametrize("row", [r for r in ROWS if r.form in SAMPLES], ids=lambda r: r.form)
def test_row_is_what_its_samples_need(row):
    for sample in SAMPLES[row.form]:
        e = Env()
        sample(e)
        assert list(e.k.statements())[-1].insn.requires == row.requires
