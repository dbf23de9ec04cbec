#!/usr/bin/env python3
"""Regenerate the corpus of compiler-generated PTX (tests/corpus/ptx) and its MANIFEST.json.

    python tests/corpus/build.py [--only GEN] [--venv DIR] [--setup]

GEN is one of `nvcc_ptx` (our CUDA C++ on cuda::ptx), `nvcc_cutlass` (CUTLASS 3.x Hopper
GEMMs from the CollectiveBuilders) and `triton` (Triton and Gluon kernels compiled offline for
sm_90). The compilers live in their own virtual environment (default $CORPUS_VENV, else
/work/cvenv), made with the pinned versions below by `--setup`; no GPU is needed. CI reads only
the committed outputs (tests/test_corpus_files.py), so this script is for regeneration.

Reproducibility: sources are copied to a fixed staging directory before compiling, because
nvcc hashes the absolute source path into the names of internal-linkage symbols
(`_ZN..._INTERNAL_<hash>_...`). In `.file` directives the staging directory is rewritten to the
repository path (tests/corpus/src/...) and the compilers' virtual environment to
`site-packages/...`; nothing else in the compilers' output is touched.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SRC = HERE / "src"
OUT = HERE / "ptx"
MANIFEST = HERE / "MANIFEST.json"
STAGE = Path("/tmp/ptxdsl_corpus")
TARGET = "sm_90a"
GENERATORS = ("nvcc_ptx", "nvcc_cutlass", "triton")
PINS = {
    "nvidia-cuda-nvcc": "13.5.37",
    "nvidia-cuda-cccl": "13.3.5.0.6",
    "nvidia-cutlass": "4.2.0.0",
    "triton": "3.9.0",
    "numpy": "2.4.6",
}
NVCC_BASE = ("-arch=sm_90a", "-ptx", "-std=c++17", "-O3")
CUTLASS_FLAGS = ("-DNDEBUG", "--expt-relaxed-constexpr", "-lineinfo")


@dataclass(frozen=True)
class Job:
    """One PTX file to make: `name` is its stem under ptx/<generator>/."""

    generator: str
    name: str
    source: str                       # relative to src/
    flags: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    expect: tuple[str, ...] = ()      # hazard ids (ptxdsl/checker/findings.py) of the bug
    bug: str | None = None            # the bug in one line (buggy variants only)
    undecidable: str | None = None    # why the bug cannot be found from the PTX alone
    repaired: str | None = None       # why a buggy source still compiled to clean PTX


def _bug(generator: str, name: str, source: str, define: str, expect: tuple[str, ...],
         bug: str) -> Job:
    return Job(generator, name, source, ("-lineinfo",), (define,), expect, bug)


CUDA_JOBS: tuple[Job, ...] = (
    Job("nvcc_ptx", "tma_ring_2d", "cuda/tma_ring_2d.cu", ("-lineinfo",)),
    Job("nvcc_ptx", "tma_ring_2d_debug", "cuda/tma_ring_2d.cu", ("-G",)),
    Job("nvcc_ptx", "tmap_device_encode", "cuda/tmap_device_encode.cu", ("-lineinfo",)),
    Job("nvcc_ptx", "bulk_copy_1d", "cuda/bulk_copy_1d.cu"),
    Job("nvcc_ptx", "tma_store_2d", "cuda/tma_store_2d.cu"),
    Job("nvcc_ptx", "cluster_dsmem", "cuda/cluster_dsmem.cu", ("-lineinfo",)),
    Job("nvcc_ptx", "cluster_multicast", "cuda/cluster_multicast.cu"),
    Job("nvcc_ptx", "ws_producer_consumer", "cuda/ws_producer_consumer.cu", ("-lineinfo",)),
    Job("nvcc_ptx", "noinline_calls", "cuda/noinline_calls.cu", ("-lineinfo",)),
    Job("nvcc_ptx", "cluster_ring", "cuda/cluster_ring.cu", ("-lineinfo",)),
    Job("nvcc_ptx", "fa3_pingpong", "cuda/fa3_pingpong.cu", ("-lineinfo",)),
    Job("nvcc_ptx", "tma_store_epilogue", "cuda/tma_store_epilogue.cu", ("-lineinfo",)),
    Job("nvcc_ptx", "tma_store_epilogue_elect", "cuda/tma_store_epilogue.cu", ("-lineinfo",),
        ("CORPUS_ELECT_IN_STORER_WARP",)),
    Job("nvcc_ptx", "wgmma_staged_a", "cuda/wgmma_staged_a.cu", ("-lineinfo",)),
    Job("nvcc_ptx", "cluster_ring_mc2", "cuda/cluster_ring_mc2.cu", ("-lineinfo",)),
    # Wave 3: ordinary CUDA C++ and library code (CUB, cooperative_groups, the ABI's calls,
    # locals, printf, alloca and textures), for breadth beyond TMA and wgmma.
    Job("nvcc_ptx", "cub_scan", "cuda/cub_scan.cu", ("-lineinfo",)),
    Job("nvcc_ptx", "lookback_scan", "cuda/lookback_scan.cu"),
    Job("nvcc_ptx", "warp_coop", "cuda/warp_coop.cu", ("-lineinfo", "-rdc=true")),
    Job("nvcc_ptx", "device_misc", "cuda/device_misc.cu", ("-lineinfo",)),
    Job("nvcc_ptx", "device_misc_debug", "cuda/device_misc.cu", ("-G",)),
    Job("nvcc_ptx", "libcu_async", "cuda/libcu_async.cu", ("-lineinfo",)),
    Job("nvcc_ptx", "cub_device_reduce_select", "cuda/cub_device.cu"),
    Job("nvcc_ptx", "cub_device_radix_sort", "cuda/cub_device.cu", (),
        ("CORPUS_CUB_RADIX_SORT",)),
    # Built here with the local nvcc 13.0 (its CCCL has no cuda::ptx::elect_sync, so the source
    # does not include ptx_common.cuh); a rebuild with the pinned nvcc gives other bytes.
    Job("nvcc_ptx", "noinline_mbar_args", "cuda/noinline_mbar_args.cu", ("-lineinfo",)),
    _bug("nvcc_ptx", "bug_noinline_wait_wrong_barrier", "cuda/noinline_mbar_args.cu",
         "CORPUS_BUG_WAIT_WRONG_BARRIER", ("wait-wrong-barrier",),
         "the consumer's __noinline__ wait_stage is passed the stage's empty barrier (through "
         "a returned pointer and a by-value struct .param) instead of the full one its TMA "
         "load completes on"),
    _bug("nvcc_ptx", "bug_ring_parity", "cuda/tma_ring_2d.cu",
         "CORPUS_BUG_PARITY_PER_ITERATION", ("ring-parity",),
         "4-stage ring waits with parity i & 1 instead of (i / 4) & 1"),
    _bug("nvcc_ptx", "bug_read_before_wait", "cuda/tma_ring_2d.cu",
         "CORPUS_BUG_READ_BEFORE_WAIT", ("smem-read-before-wait",),
         "consumers read the TMA tile without waiting on its full barrier"),
    _bug("nvcc_ptx", "bug_tmap_no_acquire", "cuda/tmap_device_encode.cu",
         "CORPUS_BUG_NO_ACQUIRE", ("tmap-no-acquire",),
         "tmap_encode_smem_publish: map published with cp_fenceproxy is used by TMA with no "
         "fence.proxy.tensormap::generic.acquire"),
    _bug("nvcc_ptx", "bug_tmap_no_release", "cuda/tmap_device_encode.cu",
         "CORPUS_BUG_NO_RELEASE", ("tmap-replace-no-release",),
         "tmap_encode_global: tensormap.replace in global memory, then acquire with no "
         "fence.proxy.tensormap::generic.release in between"),
    _bug("nvcc_ptx", "bug_expect_tx_bulk", "cuda/bulk_copy_1d.cu",
         "CORPUS_BUG_EXPECT_TX", ("expect-tx-mismatch",),
         "expect_tx announces 4096 bytes, the 1-D cp.async.bulk delivers 8192"),
    _bug("nvcc_ptx", "bug_bulk_store_no_fence", "cuda/bulk_copy_1d.cu",
         "CORPUS_BUG_NO_PROXY_FENCE", ("smem-no-proxy-fence",),
         "st.shared results stored by cp.async.bulk shared->global with no fence.proxy.async"),
    _bug("nvcc_ptx", "bug_tma_store_no_fence", "cuda/tma_store_2d.cu",
         "CORPUS_BUG_NO_PROXY_FENCE", ("smem-no-proxy-fence",),
         "st.shared tile stored by a 2-D TMA store with no fence.proxy.async"),
    _bug("nvcc_ptx", "bug_dsmem_released_early", "cuda/cluster_dsmem.cu",
         "CORPUS_BUG_NO_FINAL_SYNC", ("dsmem-released-early",),
         "cluster_exchange: no cluster barrier after reading the peer's shared memory, so "
         "a CTA may exit while its peer still reads it"),
    _bug("nvcc_ptx", "bug_multicast_init_unsynced", "cuda/cluster_multicast.cu",
         "CORPUS_BUG_INIT_UNSYNCED", ("mbar-init-unsynced",),
         "rank 0's multicast TMA signals rank 1's mbarrier with no cluster barrier after "
         "its init"),
    _bug("nvcc_ptx", "bug_producer_first_phase", "cuda/ws_producer_consumer.cu",
         "CORPUS_BUG_PRODUCER_PARITY", ("wait-parity-first-phase",),
         "producer's first wait on a fresh empty barrier asks for parity 0 (hangs)"),
    _bug("nvcc_ptx", "bug_cluster_empty_count", "cuda/cluster_ring.cu",
         "CORPUS_BUG_EMPTY_COUNT", ("mbar-arrive-count",),
         "rank 0's empty barrier is initialised for 1 arrival a phase, but both CTAs of the "
         "cluster release each stage to it (remote arrive)"),
    _bug("nvcc_ptx", "bug_fa3_no_v_wait", "cuda/fa3_pingpong.cu",
         "CORPUS_BUG_NO_V_WAIT", ("wait-wrong-barrier",),
         "FA3 consumers issue P V on the V stage having waited only on the K ring's and Q's "
         "full barriers (V's wait dropped; all rings in one dynamic buffer)"),
    _bug("nvcc_ptx", "bug_fa3_k_released_early", "cuda/fa3_pingpong.cu",
         "CORPUS_BUG_K_RELEASED_EARLY", ("wgmma-smem-released",),
         "FA3 consumers arrive on the K stage's empty barrier before the wgmma.wait_group "
         "that retires the QK^T wgmmas reading it"),
    _bug("nvcc_ptx", "bug_fa3_both_prearrive", "cuda/fa3_pingpong.cu",
         "CORPUS_BUG_BOTH_PREARRIVE", ("named-barrier-surplus",),
         "both consumer warpgroups pre-arrive on ping-pong barrier 1 (256 threads): a phase "
         "completes with nobody waiting, and the GEMMs are no longer ordered"),
    _bug("nvcc_ptx", "bug_epilogue_no_fence", "cuda/tma_store_epilogue.cu",
         "CORPUS_BUG_NO_PROXY_FENCE", ("smem-no-proxy-fence",),
         "stmatrix-staged epilogue tile stored by TMA after the named bar.sync with no "
         "fence.proxy.async.shared::cta"),
    _bug("nvcc_ptx", "bug_epilogue_no_wait_read", "cuda/tma_store_epilogue.cu",
         "CORPUS_BUG_NO_WAIT_READ", ("bulk-src-overwrite",),
         "persistent epilogue restages the next tile (stmatrix) with no "
         "cp.async.bulk.wait_group.read for the previous tile's TMA store"),
    _bug("nvcc_ptx", "bug_epilogue_bar_count", "cuda/tma_store_epilogue.cu",
         "CORPUS_BUG_BAR_COUNT", ("named-barrier-count",),
         "epilogue's named bar.sync counts the CTA's 256 threads, but only the 128 consumer "
         "threads reach it (hangs)"),
    _bug("nvcc_ptx", "bug_wgmma_staged_no_fence", "cuda/wgmma_staged_a.cu",
         "CORPUS_BUG_NO_PROXY_FENCE", ("wgmma-smem-no-proxy-fence",),
         "operand A staged with st.shared is read by wgmma after __syncthreads with no "
         "fence.proxy.async.shared::cta"),
    _bug("nvcc_ptx", "bug_cluster_release_own_cta", "cuda/cluster_ring_mc2.cu",
         "CORPUS_BUG_RELEASE_OWN_CTA", ("mbar-arrive-count",),
         "both operands multicast by the two CTAs' producers, but each consumer warp releases "
         "the stage only on its own CTA's empty barrier: 4 of the 8 arrivals a phase (hangs)"),
    Job("nvcc_cutlass", "cutlass_ws_bf16", "cuda/cutlass_ws_bf16.cu", CUTLASS_FLAGS),
    Job("nvcc_cutlass", "cutlass_pingpong_bf16", "cuda/cutlass_pingpong_bf16.cu",
        CUTLASS_FLAGS),
    Job("nvcc_cutlass", "cutlass_coop_bf16_cluster", "cuda/cutlass_coop_bf16_cluster.cu",
        CUTLASS_FLAGS),
    Job("nvcc_cutlass", "cutlass_fp8", "cuda/cutlass_fp8.cu", CUTLASS_FLAGS),
    Job("nvcc_cutlass", "cutlass_grouped_bf16", "cuda/cutlass_grouped_bf16.cu", CUTLASS_FLAGS),
)


class Env:
    """The compilers' virtual environment and what it holds."""

    def __init__(self, venv: Path):
        self.venv = venv
        self.python = venv / "bin" / "python"
        found = sorted(venv.glob("lib/python3*/site-packages"))
        if not self.python.exists() or not found:
            raise SystemExit(f"no compiler venv at {venv}: run `python {Path(__file__).name} "
                             f"--setup --venv {venv}` first")
        self.site = found[0]
        self.nvcc = self.site / "nvidia" / "cu13" / "bin" / "nvcc"
        self.ptxas = self.nvcc.with_name("ptxas")
        self.cutlass_include = self.site / "cutlass_library" / "source" / "include"
        self.cccl_include = self.site / "nvidia" / "cu13" / "include" / "cccl"

    def versions(self) -> dict[str, str]:
        code = ("import importlib.metadata as m, json, sys; print(json.dumps({n: m.version(n) "
                "for n in sys.argv[1:]}))")
        out = subprocess.run([str(self.python), "-c", code, *PINS], check=True,
                             capture_output=True, text=True).stdout
        versions: dict[str, str] = json.loads(out)
        nvcc = subprocess.run([str(self.nvcc), "--version"], check=True, capture_output=True,
                              text=True).stdout
        versions["nvcc --version"] = next(x for x in nvcc.splitlines() if "release" in x).strip()
        versions["CCCL_VERSION"] = _macro(self.cccl_include / "cuda/std/__cccl/version.h",
                                          "CCCL_VERSION")
        versions["CUTLASS"] = ".".join(
            _macro(self.cutlass_include / "cutlass/version.h", f"CUTLASS_{part}")
            for part in ("MAJOR", "MINOR", "PATCH"))
        return versions


def _macro(header: Path, name: str) -> str:
    m = re.search(rf"#define\s+{name}\s+(\S+)", header.read_text())
    return m.group(1) if m else "?"


def normalise(text: str, env: Env) -> str:
    """Rewrite machine-specific paths in `.file` directives (only there)."""
    def fix(m: re.Match[str]) -> str:
        path = m.group(2)
        path = path.replace(f"{STAGE}/src/", "tests/corpus/src/")
        path = path.replace(f"{env.site}/", "site-packages/")
        return f"{m.group(1)}\"{path}\""
    return re.sub(r'^(\s*\.file\s+\d+\s+)"([^"]*)"', fix, text, flags=re.M)


def stage_sources() -> None:
    shutil.rmtree(STAGE, ignore_errors=True)
    shutil.copytree(SRC, STAGE / "src", ignore=shutil.ignore_patterns("__pycache__"))


def nvcc_command(job: Job, env: Env, out: Path) -> tuple[list[str], list[str]]:
    """The full command, and its options as recorded (with no machine paths)."""
    options = [*NVCC_BASE, *job.flags, *(f"-D{d}" for d in job.defines)]
    recorded = list(options)
    if job.generator == "nvcc_cutlass":
        options.append(f"-I{env.cutlass_include}")
        recorded.append("-I<site-packages>/cutlass_library/source/include")
    return [str(env.nvcc), *options, str(STAGE / "src" / job.source), "-o", str(out)], recorded


def build_cuda(generator: str, env: Env) -> tuple[dict, list]:
    entries, failures = {}, []
    scratch = STAGE / "out" / generator
    scratch.mkdir(parents=True, exist_ok=True)
    for job in (j for j in CUDA_JOBS if j.generator == generator):
        tmp = scratch / f"{job.name}.ptx"
        cmd, options = nvcc_command(job, env, tmp)
        print(f"[{generator}] {job.name}: nvcc {' '.join(options)} {job.source}", flush=True)
        proc = subprocess.run(cmd, cwd=STAGE, capture_output=True, text=True)
        if proc.returncode != 0 or not tmp.exists():
            failures.append({"generator": generator, "name": job.name, "source": job.source,
                             "error": (proc.stderr or proc.stdout).strip()[-2000:]})
            print(f"  FAILED: {(proc.stderr or proc.stdout).strip()[-500:]}", flush=True)
            continue
        record = {"source": f"tests/corpus/src/{job.source}",
                  "command": f"nvcc {' '.join(options)} tests/corpus/src/{job.source}",
                  "options": options, "defines": list(job.defines)}
        entries[job.name] = (normalise(tmp.read_text(), env), record, job)
    return entries, failures


def build_triton(env: Env) -> tuple[dict, list]:
    entries, failures = {}, []
    scratch = STAGE / "out" / "triton"
    scratch.mkdir(parents=True, exist_ok=True)
    runner = HERE / "triton_runner.py"
    for src in sorted((STAGE / "src" / "triton").glob("*.py")):
        rel = f"triton/{src.name}"
        print(f"[triton] {rel}", flush=True)
        proc = subprocess.run([str(env.python), str(runner), str(src), str(scratch)],
                              capture_output=True, text=True, cwd=STAGE)
        if proc.returncode != 0:
            failures.append({"generator": "triton", "name": src.stem, "source": rel,
                             "error": proc.stderr.strip()[-2000:]})
            print(f"  FAILED: {proc.stderr.strip()[-800:]}", flush=True)
            continue
        for line in proc.stdout.splitlines():
            if not line.startswith("{"):
                continue
            res = json.loads(line)
            if "error" in res:
                error = res["error"].replace(f"{STAGE}/src/", "tests/corpus/src/")
                failures.append({"generator": "triton", "name": res["name"], "source": rel,
                                 "error": error})
                print(f"  {res['name']}: FAILED: {res['error'][-400:]}", flush=True)
                continue
            job = Job("triton", res["name"], rel, expect=tuple(res.get("expect", ())),
                      bug=res.get("bug"), undecidable=res.get("undecidable"),
                      repaired=res.get("repaired"))
            record = {"source": f"tests/corpus/src/{rel}", "kernel_fn": res["fn"],
                      "command": res["command"], "options": res["options"]}
            text = (scratch / f"{res['name']}.ptx").read_text()
            entries[res["name"]] = (normalise(text, env), record, job)
            print(f"  {res['name']}: ok", flush=True)
    return entries, failures


def assemble(path: Path, env: Env) -> str:
    """ptxas's verdict on the file for the corpus target: "ok" or its first error lines."""
    proc = subprocess.run([str(env.ptxas), f"-arch={TARGET}", str(path), "-o", os.devnull],
                          capture_output=True, text=True)
    errors = [x for x in (proc.stderr + proc.stdout).splitlines() if "error" in x.lower()]
    return "ok" if proc.returncode == 0 else "\n".join(errors[:5]) or f"rc {proc.returncode}"


def describe(text: str, record: dict, job: Job, tools: dict) -> dict:
    version = re.search(r"^\s*\.version\s+(\S+)", text, re.M)
    target = re.search(r"^\s*\.target\s+([^\s/]+)", text, re.M)
    entry = {
        "generator": job.generator,
        **record,
        "tools": tools,
        "target": target.group(1) if target else None,
        "ptx_version": version.group(1) if version else None,
        "entries": re.findall(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$]+)", text, re.M),
        "lines": text.count("\n"),
        "bytes": len(text.encode()),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "expect": list(job.expect),
    }
    if job.bug:
        entry["bug"] = job.bug
    if job.undecidable:
        entry["expect_undecidable"] = job.undecidable
    if job.repaired:
        entry["bug_repaired_by_compiler"] = job.repaired
    return entry


def tools_for(generator: str, versions: dict[str, str]) -> dict[str, str]:
    keys = {"nvcc_ptx": ("nvidia-cuda-nvcc", "nvcc --version", "nvidia-cuda-cccl",
                         "CCCL_VERSION"),
            "nvcc_cutlass": ("nvidia-cuda-nvcc", "nvcc --version", "nvidia-cuda-cccl",
                             "CCCL_VERSION", "nvidia-cutlass", "CUTLASS"),
            "triton": ("triton",)}[generator]
    return {k: versions[k] for k in keys}


def sizes(files: dict, generator: str | None) -> tuple[int, int, int, int]:
    """Files, lines, bytes and files with expected hazards, of one generator (None: all)."""
    mine = [e for e in files.values() if generator in (None, e["generator"])]
    return (len(mine), sum(e["lines"] for e in mine), sum(e["bytes"] for e in mine),
            sum(bool(e["expect"]) for e in mine))


def update_readme(files: dict) -> None:
    """Keep the size table of README.md true (tests/test_corpus_files.py checks it)."""
    readme = HERE / "README.md"
    text = readme.read_text()
    for gen in (*GENERATORS, None):
        n, lines, size, buggy = sizes(files, gen)
        label = f"`{gen}`" if gen else "total"
        shown = f"{size / 1e6:.1f} M" if size >= 1e6 else f"{round(size / 1e3)} k"
        text = re.sub(rf"^\| {re.escape(label)} \| [^|]+\| [^|]+\| [^|]+\| [^|]+\|",
                      f"| {label} | {n} | {lines:,} | {shown} | {buggy} |", text, flags=re.M)
    readme.write_text(text)


def setup(venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q",
                    *(f"{n}=={v}" for n, v in PINS.items())], check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=GENERATORS, action="append",
                    help="regenerate only this generator (repeatable); others keep their files")
    ap.add_argument("--venv", type=Path,
                    default=Path(os.environ.get("CORPUS_VENV", "/work/cvenv")))
    ap.add_argument("--setup", action="store_true",
                    help="create the compilers' venv with the pinned versions, then build")
    args = ap.parse_args(argv)
    if args.setup:
        setup(args.venv)
    env = Env(args.venv)
    versions = env.versions()
    chosen = args.only or list(GENERATORS)

    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    files = {k: v for k, v in manifest.get("files", {}).items()
             if v["generator"] not in chosen}
    failures = [f for f in manifest.get("failures", []) if f["generator"] not in chosen]
    tools = {**manifest.get("tools", {}), **versions}

    stage_sources()
    for gen in chosen:
        entries, failed = build_triton(env) if gen == "triton" else build_cuda(gen, env)
        shutil.rmtree(OUT / gen, ignore_errors=True)
        (OUT / gen).mkdir(parents=True)
        for name, (text, record, job) in entries.items():
            path = OUT / gen / f"{name}.ptx"
            path.write_text(text)
            record["ptxas"] = assemble(path, env)
            files[f"{gen}/{name}.ptx"] = describe(text, record, job, tools_for(gen, versions))
        failures += failed

    manifest = {
        "about": "PTX generated by compilers from tests/corpus/src; see tests/corpus/README.md",
        "target": TARGET,
        "tools": tools,
        "files": dict(sorted(files.items())),
        "failures": sorted(failures, key=lambda f: (f["generator"], f["name"])),
    }
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
    update_readme(files)
    for gen in (*GENERATORS, None):
        n, lines, size, buggy = sizes(files, gen)
        print(f"{gen or 'total'}: {n} files, {lines} lines, {size} bytes, {buggy} with "
              "expected hazards", flush=True)
    print(f"{len(failures)} failures", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
