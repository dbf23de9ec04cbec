"""Compile the kernels one Triton source file lists, for sm_90, with no GPU (run by build.py
in the compilers' venv).

    python triton_runner.py SOURCE.py OUTDIR

SOURCE.py defines `CORPUS`, a list of dicts: name, fn (a @triton.jit or @gluon.jit function),
signature, constexprs, and optionally attrs, options (num_warps, num_stages, ...), expect,
bug, undecidable (why the bug cannot be decided from the PTX), repaired (why the buggy source
compiles to clean PTX). Each kernel's PTX goes to OUTDIR/<name>.ptx; one JSON line per
kernel goes to stdout, with "error" in place of the result where triton.compile raised.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile

# A fresh cache: a cached kernel from another Triton build must not stand in for a compile.
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="corpus_triton_cache_")
atexit.register(shutil.rmtree, os.environ["TRITON_CACHE_DIR"], ignore_errors=True)
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)


@contextlib.contextmanager
def _stderr_lines():
    """Capture file descriptor 2 (C++ diagnostics included) into the list it yields."""
    lines: list[str] = []
    saved = os.dup(2)
    with tempfile.TemporaryFile("w+") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines += tmp.read().splitlines()


def main(source: str, outdir: str) -> int:
    spec = importlib.util.spec_from_file_location(os.path.basename(source)[:-3], source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for k in module.CORPUS:
        options = dict(k.get("options", {}))
        gluon = getattr(k["fn"], "is_gluon", lambda: False)()
        command = (f"triton.compile({'Gluon' if gluon else ''}ASTSource("
                   f"fn={k['fn'].__name__}, signature="
                   f"{k['signature']!r}, constexprs={k.get('constexprs', {})!r}"
                   + (f", attrs={k['attrs']!r}" if k.get("attrs") else "") + "), "
                   f"target=GPUTarget('cuda', 90, 32), options={options!r})")
        result = {"name": k["name"], "fn": k["fn"].__name__, "command": command,
                  "options": options, "expect": list(k.get("expect", ())),
                  "bug": k.get("bug"), "undecidable": k.get("undecidable"),
                  "repaired": k.get("repaired")}
        diagnostics: list[str] = []
        try:
            source_cls = GluonASTSource if gluon else triton.compiler.ASTSource
            src = source_cls(fn=k["fn"], signature=k["signature"],
                             constexprs=k.get("constexprs", {}), attrs=k.get("attrs"))
            with _stderr_lines() as diagnostics:
                compiled = triton.compile(src, target=TARGET, options=options)
            with open(os.path.join(outdir, f"{k['name']}.ptx"), "w") as f:
                f.write(compiled.asm["ptx"])
        except Exception as e:   # recorded as a generation failure in the manifest
            # MLIR reports a failed pass on the C++ side's stderr; its "error:" lines say why.
            why = [x for x in diagnostics if "error:" in x or "note:" in x]
            result["error"] = "\n".join([*why, f"{type(e).__name__}: {str(e)[-1500:]}"])
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
