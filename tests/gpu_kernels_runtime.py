"""Hand-written PTX kernels for the runtime's GPU tests (to be ported to the builder later).

Forms follow digest §9 (H100-validated): `.version 8.0` / `.target sm_90` unless a kernel
needs more. Each kernel is a module of its own so a test loads only what it uses.
"""

from __future__ import annotations

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"

# Every scalar kind ptxdsl's builder declares, written back to `out` at fixed byte offsets:
# u16@0 u32@4 s32@8 u64@16 s64@24 f32@32 f64@40.
ARGS_ECHO = HEADER + """
.visible .entry args_echo(
    .param .u16 p_u16,
    .param .u32 p_u32,
    .param .s32 p_s32,
    .param .u64 p_u64,
    .param .s64 p_s64,
    .param .f32 p_f32,
    .param .f64 p_f64,
    .param .u64 .ptr .global .align 16 p_out
)
{
    .reg .b16 %h<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<5>;
    .reg .f32 %f<2>;
    .reg .f64 %fd<2>;
    ld.param.u64 %rd1, [p_out];
    cvta.to.global.u64 %rd2, %rd1;
    ld.param.u16 %h1, [p_u16];
    st.global.u16 [%rd2], %h1;
    ld.param.u32 %r1, [p_u32];
    st.global.u32 [%rd2+4], %r1;
    ld.param.s32 %r2, [p_s32];
    st.global.s32 [%rd2+8], %r2;
    ld.param.u64 %rd3, [p_u64];
    st.global.u64 [%rd2+16], %rd3;
    ld.param.s64 %rd4, [p_s64];
    st.global.s64 [%rd2+24], %rd4;
    ld.param.f32 %f1, [p_f32];
    st.global.f32 [%rd2+32], %f1;
    ld.param.f64 %fd1, [p_f64];
    st.global.f64 [%rd2+40], %fd1;
    ret;
}
"""


def _tmap_echo() -> str:
    body = []
    for i in range(16):
        body.append(f"    ld.param.u64 %rd{i + 3}, [p_tmap+{8 * i}];")
        body.append(f"    st.global.u64 [%rd2+{8 * i}], %rd{i + 3};")
    return HEADER + """
.visible .entry tmap_echo(
    .param .align 64 .b8 p_tmap[128],
    .param .u64 .ptr .global .align 16 p_out
)
{
    .reg .b64 %rd<20>;
    ld.param.u64 %rd1, [p_out];
    cvta.to.global.u64 %rd2, %rd1;
""" + "\n".join(body) + "\n    ret;\n}\n"


# The 128 bytes of its tensor-map parameter, copied to `out` as 16 qwords.
TMAP_ECHO = _tmap_echo()

VADD = HEADER + """
.visible .entry vadd(
    .param .u64 .ptr .global .align 4 p_a,
    .param .u64 .ptr .global .align 4 p_b,
    .param .u64 .ptr .global .align 4 p_c,
    .param .u32 p_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r4, %r1, %r2, %r3;
    ld.param.u32 %r5, [p_n];
    setp.ge.u32 %p1, %r4, %r5;
    @%p1 bra DONE;
    ld.param.u64 %rd1, [p_a];
    ld.param.u64 %rd2, [p_b];
    ld.param.u64 %rd3, [p_c];
    mul.wide.u32 %rd4, %r4, 4;
    add.u64 %rd5, %rd1, %rd4;
    add.u64 %rd6, %rd2, %rd4;
    add.u64 %rd7, %rd3, %rd4;
    ld.global.f32 %f1, [%rd5];
    ld.global.f32 %f2, [%rd6];
    add.f32 %f3, %f1, %f2;
    st.global.f32 [%rd7], %f3;
DONE:
    ret;
}
"""


_TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"


def tma_load_2d(tile_bytes: int) -> str:
    """One CTA of 128 threads: TMA-load the box at (x, y) from a param tensor map into a
    1024-B aligned shared tile (digest §9, param-map variant), then copy the raw tile bytes
    (still swizzled, if the map swizzles) to `out`."""
    assert tile_bytes % 512 == 0
    copies = []
    for k in range(tile_bytes // 512):
        copies.append(f"    ld.shared.u32 %r8, [%r7+{512 * k}];")
        copies.append(f"    st.global.u32 [%rd6+{512 * k}], %r8;")
    return HEADER + f"""
.shared .align 1024 .b8 tile[{tile_bytes}];
.shared .align 8 .b64 mbar;

.visible .entry tma_load_2d(
    .param .align 64 .b8 p_tmap[128],
    .param .u64 .ptr .global .align 16 p_out,
    .param .s32 p_x,
    .param .s32 p_y
)
.reqntid 128, 1, 1
{{
    .reg .pred %p<3>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<8>;
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 0;
    mov.b64 %rd1, p_tmap;
    cvta.param.u64 %rd2, %rd1;
    mov.u32 %r2, tile;
    mov.u32 %r3, mbar;
    ld.param.s32 %r4, [p_x];
    ld.param.s32 %r5, [p_y];
    @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
    bar.sync 0;
    @%p1 mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r3], {tile_bytes};
    @%p1 {_TMA_LOAD} [%r2], [%rd2, {{%r4, %r5}}], [%r3];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], 0;
    @!%p2 bra WAIT;
    ld.param.u64 %rd3, [p_out];
    cvta.to.global.u64 %rd4, %rd3;
    shl.b32 %r6, %r1, 2;
    cvt.u64.u32 %rd5, %r6;
    add.u64 %rd6, %rd4, %rd5;
    add.u32 %r7, %r2, %r6;
{chr(10).join(copies)}
    ret;
}}
"""


# Thread t writes 3t+7 at byte nbytes-4(t+1) of dynamic shared memory, then reads its
# neighbour's slot, so the top of a large dynamic allocation is really used.
DYN_SMEM = HEADER + """
.extern .shared .align 16 .b8 dsmem[];

.visible .entry dyn_smem(
    .param .u64 .ptr .global .align 4 p_out,
    .param .u32 p_nbytes
)
{
    .reg .b32 %r<14>;
    .reg .b64 %rd<5>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ntid.x;
    ld.param.u32 %r3, [p_nbytes];
    mov.u32 %r4, dsmem;
    add.u32 %r5, %r4, %r3;
    add.u32 %r6, %r1, 1;
    shl.b32 %r7, %r6, 2;
    sub.u32 %r8, %r5, %r7;
    mad.lo.u32 %r9, %r1, 3, 7;
    st.shared.u32 [%r8], %r9;
    bar.sync 0;
    rem.u32 %r10, %r6, %r2;
    add.u32 %r11, %r10, 1;
    shl.b32 %r12, %r11, 2;
    sub.u32 %r13, %r5, %r12;
    ld.shared.u32 %r9, [%r13];
    ld.param.u64 %rd1, [p_out];
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r1, 4;
    add.u64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r9;
    ret;
}
"""


def cluster_ids(directive: str) -> str:
    """Each CTA's thread 0 writes (%cluster_ctarank, %cluster_nctarank) to out[2*ctaid]."""
    return HEADER + f"""
.visible .entry cluster_ids(
    .param .u64 .ptr .global .align 4 p_out
)
{directive}
{{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<5>;
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra DONE;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, %cluster_nctarank;
    mov.u32 %r4, %ctaid.x;
    ld.param.u64 %rd1, [p_out];
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r4, 8;
    add.u64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r2;
    st.global.u32 [%rd4+4], %r3;
DONE:
    ret;
}}
"""


# Busy-waits `p_ns` nanoseconds of %globaltimer: a "hung" kernel that ends by itself.
SPIN = HEADER + """
.visible .entry spin(
    .param .u64 p_ns
)
{
    .reg .pred %p<2>;
    .reg .b64 %rd<5>;
    mov.u64 %rd1, %globaltimer;
    ld.param.u64 %rd2, [p_ns];
    add.u64 %rd3, %rd1, %rd2;
LOOP:
    mov.u64 %rd4, %globaltimer;
    setp.lt.u64 %p1, %rd4, %rd3;
    @%p1 bra LOOP;
    ret;
}
"""

BAD_LINE = "    add.u32 %r1, %r1, %undeclared;"
# Assembles nowhere: `%undeclared` is not a declared register.
JIT_ERROR = HEADER + """
.visible .entry broken(
    .param .u32 p_n
)
{
    .reg .b32 %r<3>;
    ld.param.u32 %r1, [p_n];
""" + BAD_LINE + """
    ret;
}
"""


def nvjitlink_assemble(ptx: str, arch: str) -> bytes:
    """A minimal nvJitLink assembler, used when ptxdsl.toolchain is not importable."""
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(1, [f"-arch={arch}"])
    try:
        data = ptx.encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "test.ptx")
        nvjitlink.complete(handle)
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin)
    finally:
        nvjitlink.destroy(handle)
