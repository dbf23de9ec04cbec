"""NVSHMEM's device library linked with a ptxdsl-built module by nvJitLink, offline, for sm_90a
(docs/multi_node.md): the route that links, and those that do not, with their refusals.

The kernel is built with `ptxdsl.frontend.build`, the one ptxdsl builder that can declare an
`.extern .func` and write the `.param` block of a `call` (`Kernel` has neither; `k.asm` refuses
`.param` declarations). The NVSHMEM tests skip, with the reason, where the `nvidia-nvshmem-cu13`
(or `-cu12`) package, nvcc or libNVVM is not installed.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from ptxdsl.frontend.module import ParsedModule
from ptxdsl.toolchain import package_binary

SHIM = """\
#include <nvshmem.h>
// NVSHMEM's device API is inline CUDA C++; this gives nvshmem_ptr an extern "C" symbol.
extern "C" __device__ void *ptxdsl_nvshmem_ptr(const void *ptr, int pe) {
    return nvshmem_ptr(ptr, pe);
}
"""


def peer_of(callee: str) -> ParsedModule:
    """`out[0] = callee(p, pe)`: one call of an external device function with NVSHMEM's
    `void *nvshmem_ptr(const void *ptr, int pe)` signature, in the PTX calling convention."""
    m = ParsedModule(file="peer_of.ptx")
    for line in (".version 8.0", ".target sm_90a", ".address_size 64",
                 f".extern .func (.param .b64 ret) {callee} (.param .b64 ptr, .param .b32 pe);"):
        m.directive(line)
    f = m.entry(".visible .entry peer_of(.param .u64 p, .param .u32 pe, .param .u64 out)")
    f.declare(".reg .b64 %rd<4>;")
    f.declare(".reg .b32 %r<2>;")
    f.ptx("ld.param.u64 %rd1, [p];")
    f.ptx("ld.param.u32 %r1, [pe];")
    f.ptx("ld.param.u64 %rd3, [out];")
    f.open()
    f.declare(".param .b64 a0;")
    f.declare(".param .b32 a1;")
    f.declare(".param .b64 r0;")
    f.ptx("st.param.b64 [a0], %rd1;")
    f.ptx("st.param.b32 [a1], %r1;")
    f.ptx(f"call.uni (r0), {callee}, (a0, a1);")
    f.ptx("ld.param.b64 %rd2, [r0];")
    f.close()
    f.ptx("cvta.to.global.u64 %rd3, %rd3;")
    f.ptx("st.global.u64 [%rd3], %rd2;")
    f.ptx("ret;")
    return m


def nvshmem_lib() -> Path:
    """The installed package's `lib` folder (`nvidia/nvshmem/lib`), or skip."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or ()) if spec is not None else ():
        lib = Path(root) / "nvshmem" / "lib"
        if (lib / "libnvshmem_device.a").is_file():
            return lib
    pytest.skip("the NVSHMEM device library is not installed "
                "(pip install nvidia-nvshmem-cu13, about 180 MB)")


def bitcode(lib: Path) -> Path:
    # 3.8 ships one bitcode file per architecture; 3.4 had one for all.
    for name in ("libnvshmem_device_sm_90.bc", "libnvshmem_device.bc"):
        if (lib / name).is_file():
            return lib / name
    pytest.skip(f"no NVSHMEM bitcode library for sm_90 in {lib}")


class LinkRefused(Exception):
    """nvJitLink's error and its error log."""


def link(ptx: str, inputs: list[tuple[str, Path]], *, lto: bool) -> bytes:
    """Link `ptx` with `inputs` (nvJitLink's input type name, file) for sm_90a."""
    from cuda.bindings import nvjitlink as nj
    opts = ["-arch=sm_90a", *(["-lto"] if lto else [])]
    h = nj.create(len(opts), opts)
    try:
        data = ptx.encode()
        nj.add_data(h, nj.InputType.PTX, data, len(data), "peer_of.ptx")
        for kind, path in inputs:
            nj.add_file(h, getattr(nj.InputType, kind), str(path))
        nj.complete(h)
        cubin = bytearray(nj.get_linked_cubin_size(h))
        nj.get_linked_cubin(h, cubin)
        return bytes(cubin)
    except nj.nvJitLinkError as e:
        log = bytearray(nj.get_error_log_size(h))
        nj.get_error_log(h, log)
        raise LinkRefused(f"{e}: {log.rstrip(bytes(1)).decode(errors='replace').strip()}") \
            from None
    finally:
        nj.destroy(h)


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> dict[bool, Path]:
    """The shim compiled by nvcc as relocatable device code: SASS, and LTO-IR for `-lto`."""
    lib = nvshmem_lib()
    nvcc = package_binary("nvcc") or shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed (it compiles the CUDA C++ shim)")
    d = tmp_path_factory.mktemp("nvshmem_shim")
    (d / "shim.cu").write_text(SHIM)
    out = {}
    for lto, code in ((False, "sm_90a"), (True, "lto_90a")):
        out[lto] = d / f"shim_{code}.fatbin"
        run = subprocess.run([nvcc, f"-gencode=arch=compute_90a,code={code}", "-rdc=true",
                              "-fatbin", f"-I{lib.parent / 'include'}", str(d / "shim.cu"),
                              "-o", str(out[lto])], capture_output=True, text=True,
                             timeout=300)
        if run.returncode:
            pytest.skip(f"nvcc could not compile the shim: {run.stderr.strip()[-500:]}")
    return out


def test_the_call_builds_and_checks_clean():
    m = peer_of("ptxdsl_nvshmem_ptr")
    text = m.emit()
    assert ".extern .func (.param .b64 ret) ptxdsl_nvshmem_ptr (.param .b64 ptr, " \
           ".param .b32 pe);" in text
    assert "call.uni (r0), ptxdsl_nvshmem_ptr, (a0, a1);" in text
    assert m.check() == []


def test_without_the_library_the_call_is_undefined():
    with pytest.raises(LinkRefused, match="Undefined reference to 'ptxdsl_nvshmem_ptr'"):
        link(peer_of("ptxdsl_nvshmem_ptr").emit(), [], lto=False)


@pytest.mark.parametrize("lto", [False, True], ids=["sass", "lto"])
def test_nvjitlink_links_the_call_with_the_shim_and_the_device_archive(shim, lto):
    """The route that works: the shim gives the inline API a symbol, the archive
    (`libnvshmem_device.a`) the device state (`nvshmemi_device_state_d`) it reads."""
    archive = nvshmem_lib() / "libnvshmem_device.a"
    cubin = link(peer_of("ptxdsl_nvshmem_ptr").emit(),
                 [("FATBIN", shim[lto]), ("LIBRARY", archive)], lto=lto)
    assert cubin[:4] == b"\x7fELF" and b"peer_of" in cubin and b"nvshmemi_device_state_d" in cubin


def test_the_shim_alone_does_not_link(shim):
    """The archive is needed: the shim refers to the device state that it defines."""
    with pytest.raises(LinkRefused, match="nvshmemi_device_state_d"):
        link(peer_of("ptxdsl_nvshmem_ptr").emit(), [("FATBIN", shim[False])], lto=False)


def test_the_device_archive_has_no_extern_c_api():
    """`libnvshmem_device.a` defines NVSHMEM's internals only: the API is inline in its
    headers, so a PTX call of `nvshmem_ptr` finds nothing to link against."""
    archive = nvshmem_lib() / "libnvshmem_device.a"
    with pytest.raises(LinkRefused, match="Undefined reference to 'nvshmem_ptr'"):
        link(peer_of("nvshmem_ptr").emit(), [("LIBRARY", archive)], lto=False)


def test_nvjitlink_reads_the_bitcode_library_as_lto_ir():
    """The goal: the bitcode library defines the extern "C" API (`nvshmem_ptr`, ...), but it
    is LLVM bitcode, not NVVM's LTO-IR, and nvJitLink refuses it (xfail while it does)."""
    bc = bitcode(nvshmem_lib())
    try:
        cubin = link(peer_of("nvshmem_ptr").emit(), [("LTOIR", bc)], lto=True)
    except LinkRefused as e:
        assert "does not match type NVJITLINK_INPUT_LTOIR" in str(e), str(e)
        pytest.xfail(f"nvJitLink refuses NVSHMEM's bitcode as LTO-IR: {e}")
    assert cubin[:4] == b"\x7fELF"


def test_libnvvm_compiles_the_sm90_bitcode_library():
    """The other way to LTO-IR: libNVVM. For sm_90 it cannot read the bitcode (xfail while it
    cannot); the sm_100 file compiles with -arch=compute_100 (docs/multi_node.md)."""
    bc = bitcode(nvshmem_lib()).read_bytes()
    try:
        from cuda.bindings import nvvm
        prog = nvvm.create_program()
    except Exception as e:   # no libNVVM found: cuda.pathfinder's own error types
        pytest.skip(f"libNVVM is not available: {e}")
    try:
        nvvm.add_module_to_program(prog, bc, len(bc), "nvshmem")
        opts = ["-arch=compute_90a", "-gen-lto"]
        try:
            nvvm.compile_program(prog, len(opts), opts)
        except nvvm.nvvmError as e:
            log = bytearray(nvvm.get_program_log_size(prog))
            nvvm.get_program_log(prog, log)
            text = log.rstrip(bytes(1)).decode(errors="replace").strip()
            assert "Invalid value" in text, text
            pytest.xfail(f"libNVVM cannot read it: {e}: {text}")
    finally:
        nvvm.destroy_program(prog)
