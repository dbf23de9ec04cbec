"""Generate `ptxdsl/ptx.pyi`, the typed stub of `ptxdsl.ptx`, from the builders' overload tables.

    python -m tools.ptx_stub            # rewrite ptxdsl/ptx.pyi
    python -m tools.ptx_stub --check    # exit 1 when the committed stub is stale

`ptxdsl.ptx` gathers its builders with star imports, and most take `(k, *args, **kw)` because
they dispatch over cuda::ptx's overloads (`instructions/_ptx_args.bind`), so a type checker sees
neither the names nor the arguments. The stub declares every name of `ptxdsl.ptx.__all__`: the
tag constants as `Final` enum members, the classes re-exported, and each builder with one
`@overload` per entry of the table it records with `_ptx_args.overloads` (or its own
signature, when it has no table). A parameter's type comes from `OVERRIDES` (per builder), the
builder's own annotation, or `TYPES` (per name: a name means the same in every family, as the
calling convention says); a name in none of them stops the generator, so a new family states
the types of its new argument names here. tests/test_ptx_types.py checks the stub against the
code and runs mypy on user code with it.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import enum
import fnmatch
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "ptxdsl" / "ptx.pyi"

# Type aliases the stub defines; the parameter types below are written with them. ptx.py
# defines the public ones too, for user code that annotates its own helpers (tested equal).
ALIASES = {
    "Int": ("int | SupportsIndex", "An integer: a Python int or a numpy integer"),
    "Value": ("Reg | Imm | Int", "A register or an immediate"),
    "Address": ("Reg | Symbol | Addr", "A symbol (a parameter too), a register, or "
                "symbol/register + offset"),
    "Coords": ("Sequence[Value]", "Tensor coordinates (a tuple or list)"),
    "SpaceArg": ("StateSpace | str", "A state space: 'shared', 'cluster', 'global', ... or "
                 "ptx.space_*"),
    "ScopeArg": ("Scope | str", "A scope: 'cta', 'cluster', 'gpu', 'sys' or ptx.scope_*"),
    "SemArg": ("Sem | str", "Semantics: 'release', 'acquire', 'relaxed', ... or ptx.sem_*"),
    "OpArg": ("RedOp | str", "A reduction: 'add', 'min', ..., 'op_and_op', ... or ptx.op_*"),
    "TypeArg": ("ScalarType | str", "A ptxdsl type (t.b32) or its name"),
    # private: ptx.py defines the others at run time, and this one would import numpy there
    "_NumpyType": ("np.dtype[Any] | type[np.generic]", "A numpy dtype or scalar type"),
    "Desc": ("Reg | Imm | Int | MatrixDescriptor", "A wgmma matrix descriptor"),
    "WgmmaTypeArg": ("WgmmaType | ScalarType | str", "A wgmma element type"),
}

TYPES: dict[str, str] = {
    "k": "Kernel",
    **dict.fromkeys(("addr", "tm_addr", "dst_mem", "src_mem", "smem_bar", "rdsmem_bar",
                     "tensor_map", "remote_bar", "dest", "bar"), "Address"),
    **dict.fromkeys(("space", "dst_space", "src_space"), "SpaceArg"),
    "sem": "SemArg", "scope": "ScopeArg", "op": "OpArg",
    **dict.fromkeys(("count", "tx_count", "size", "new_val", "cta_mask", "byte_mask",
                     "target_cta", "membermask", "primary_size", "total_size", "val", "value",
                     "suspend_time_hint", "phase_parity", "parity", "a_reg", "b_reg", "c_reg",
                     "access_property"), "Value"),
    **dict.fromkeys(("ord", "rank", "n", "sp_sel", "imm_scale_a", "imm_scale_b", "tnspA",
                     "tnspB"), "Int"),
    **dict.fromkeys(("state", "cache_policy", "dst", "sp_meta"), "Reg"),
    "tensor_coords": "Coords", "im2col": "Coords",
    "type": "TypeArg", "mode": "TensorMode | str", "dim": "int",
    "cta_group": "CtaGroup | Int | str", "level": "str",
    **dict.fromkeys(("primary", "secondary"), "L2Priority | str"),
    "fraction": "float", "driver_dtype": "str | Int | enum.Enum",
    "d": "Fragment | Sequence[Reg]", "a": "Desc | Fragment | AFragment | Sequence[Reg]",
    "b_desc": "Desc", "scale_d": "Reg | NegPred | Int",
    **dict.fromkeys(("atype", "btype"), "WgmmaTypeArg"), "dtype": "TypeArg",
    "satfinite": "bool",
    # tcgen05 (alloc, dealloc, commit, shift, cp, ld, st)
    "n_cols": "Value", "taddr": "Reg | Addr", "s_desc": "Reg | Imm | Int",
    "imm_half_splitoff": "Int", "out": "Int | Sequence[Reg]", "values": "Sequence[Reg]",
    # tcgen05.mma / tcgen05.mma.ws
    "kind": "Kind | str", "a_desc": "Reg | Imm | Int | SmemDesc100",
    "idesc": "Reg | Imm | Int | InstrDesc",
    **dict.fromkeys(("d_tmem", "a_tmem", "scale_A_tmem", "scale_B_tmem"), "Reg | Addr"),
    "disable_output_lane": "Sequence[Value]", "enable_input_d": "Reg | NegPred | Imm | Int",
    "scale_input_d": "Int", "zero_column_mask_desc": "Value",
}

# (builder pattern, parameter): a type that differs from the name's usual meaning.
OVERRIDES: dict[tuple[str, str], str] = {
    ("tensormap_cp_fenceproxy", "dst"): "Address",
    ("tcgen05_alloc", "dst"): "Address",
    ("tcgen05_mma*", "b_desc"): "Reg | Imm | Int | SmemDesc100",
    ("tensormap_cp_fenceproxy", "src"): "Address",
    ("cp_async_bulk_prefetch", "src"): "Address",
    ("fence_proxy_tensormap_generic", "size"): "Int",
    ("st*", "src"): "Value | Sequence[Value]",
    ("st_async", "value"): "Value | Sequence[Value]",
    ("multimem_st", "val"): "Value | Sequence[Value]",
    ("multimem_red", "val"): "Value | Sequence[Value]",
    ("mbarrier_arrive*", "dst"): 'Reg | Sink | Literal["_"]',
    # the barrier builders take None for "left out" in cuda::ptx's positions too
    ("mbarrier_*", "sem"): "SemArg | None",
    ("mbarrier_*", "scope"): "ScopeArg | None",
    ("mbarrier_*", "space"): "SpaceArg | None",
    ("mbarrier_wait", "on_timeout"): "Callable[[Kernel], object]",
    ("tensormap_replace_elemtype", "new_val"): "Imm | Int | str | _NumpyType",
    ("bfind*", "a_reg"): "Reg",     # an immediate alone does not say the type
    # annotated int in the source; numpy integers are taken too (base.int_like)
    ("setmaxnreg_*", "count"): "Int",
    ("cp_async_bulk_wait_group*", "n"): "Int",
    **{(f"tensormap_replace_{f}", "new_val"): "Imm | Int | str"
       for f in ("interleave_layout", "swizzle_mode", "swizzle_atomicity", "fill_mode")},
}

# Where the stub imports the names its types use (besides each builder's own annotations).
IMPORTS = {
    "Kernel": ".kernel", "Fragment": ".fragments", "AFragment": ".fragments",
    "Reg": ".operands", "Imm": ".operands", "Symbol": ".operands", "Addr": ".operands",
    "NegPred": ".operands", "Sink": ".operands", "StateSpace": ".types", "Scope": ".types",
    "Sem": ".types",
    "ScalarType": ".types", "RedOp": ".instructions.bulk", "CtaGroup": ".instructions.bulk",
    "TensorMode": ".instructions.bulk_tensor", "L2Priority": ".instructions.cache_policy",
    "WgmmaType": ".instructions.wgmma", "MatrixDescriptor": ".instructions.wgmma_desc",
    "Kind": ".instructions.tcgen05_desc", "SmemDesc100": ".instructions.tcgen05_desc",
    "InstrDesc": ".instructions.tcgen05_desc",
    "Sequence": "collections.abc", "Callable": "collections.abc", "Any": "typing",
    "Literal": "typing", "SupportsIndex": "typing", "np": "numpy", "enum": "enum",
}


class Param(NamedTuple):
    name: str
    kind: str        # "posonly", "pos" or "kw"
    type: str
    default: bool    # has a default (rendered `= ...`)


def _type(fn_name: str, name: str, annotation: Any) -> str:
    for (pattern, param), t in OVERRIDES.items():
        if param == name and fnmatch.fnmatchcase(fn_name, pattern):
            return t
    if isinstance(annotation, str) and annotation:
        return annotation
    if name not in TYPES:
        raise SystemExit(f"tools/ptx_stub.py: no type for parameter {name!r} of {fn_name}: "
                         "add it to TYPES (or OVERRIDES)")
    return TYPES[name]


def _optional(t: str) -> str:
    return t if "None" in t.split(" | ") else f"{t} | None"


def overloads(fn_name: str, fn: Callable[..., Any]) -> list[list[Param]]:
    """The builder's overloads as typed parameter lists: the table it recorded with
    `_ptx_args.overloads` (read by `_ptx_args.signatures`), or its own signature."""
    from ptxdsl.instructions import _ptx_args
    own = inspect.signature(fn)

    def annotation(name: str) -> Any:
        p = own.parameters.get(name)
        return p.annotation if p is not None and p.annotation is not p.empty else None

    result = []
    for sig in _ptx_args.signatures(fn) or [own]:
        params = []
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise SystemExit(f"tools/ptx_stub.py: {fn_name} takes *{p.name}: record its "
                                 "overloads with _ptx_args.overloads")
            t = _type(fn_name, p.name, annotation(p.name))
            kind = {p.POSITIONAL_ONLY: "posonly", p.KEYWORD_ONLY: "kw"}.get(p.kind, "pos")
            params.append(Param(p.name, kind, _optional(t) if p.default is None else t,
                                p.default is not p.empty))
        result.append(params)
    return result


def _render_params(params: list[Param]) -> str:
    out: list[str] = []
    for i, p in enumerate(params):
        before = params[i - 1].kind if i else None
        if before == "posonly" and p.kind != "posonly":
            out.append("/")
        if p.kind == "kw" and before != "kw":
            out.append("*")
        out.append(f"{p.name}: {p.type}" + (" = ..." if p.default else ""))
    if params[-1].kind == "posonly":
        out.append("/")
    return ", ".join(out)


def _names(type_text: str) -> set[str]:
    """The top-level names a type expression uses (`np.dtype` -> np)."""
    found = set()
    for node in ast.walk(ast.parse(type_text, mode="eval")):
        if isinstance(node, ast.Name):
            found.add(node.id)
    return found


def render() -> str:
    import ptxdsl.ptx as ptx
    imports: dict[str, set[str]] = {}

    def need(type_text: str, fn: Callable[..., Any] | None = None) -> None:
        for name in _names(type_text):
            if name in ALIASES or hasattr(builtins, name) and name not in IMPORTS:
                continue
            module = IMPORTS.get(name)
            if module is None and fn is not None and name in fn.__globals__:
                module = "." + fn.__globals__[name].__module__.removeprefix("ptxdsl.")
            if module is None:
                raise SystemExit(f"tools/ptx_stub.py: where is {name!r} from? add it to IMPORTS")
            imports.setdefault(module, set()).add(name)

    for text, _ in ALIASES.values():
        need(text)
    body: list[str] = []
    reexports: dict[str, set[str]] = {}
    for name in ptx.__all__:
        value = getattr(ptx, name)
        if isinstance(value, enum.Enum):
            cls = type(value).__name__
            imports.setdefault("." + type(value).__module__.removeprefix("ptxdsl."),
                               set()).add(cls)
            body.append(f"{name}: Final[Literal[{cls}.{value.name}]]")
        elif inspect.isclass(value):
            module = "." + value.__module__.removeprefix("ptxdsl.")
            reexports.setdefault(module, set()).add(name)
        else:
            fn = inspect.unwrap(value)
            ret = inspect.signature(fn).return_annotation
            if not isinstance(ret, str) or not ret:
                raise SystemExit(f"tools/ptx_stub.py: {name} has no return annotation")
            need(ret, fn)
            forms = overloads(name, fn)
            for params in forms:
                for p in params:
                    need(p.type, fn)
                head = "@overload\n" if len(forms) > 1 else ""
                body.append(f"{head}def {name}({_render_params(params)}) -> {ret}: ...")
    for module, names in reexports.items():
        imports.setdefault(module, set()).update(names)
    imports.setdefault("typing", set()).update(("Final", "TypeAlias", "overload"))
    lines = ['"""Typed stub of `ptxdsl.ptx`, generated by `python -m tools.ptx_stub` from the '
             "builders'", "overload tables: do not edit (docs/CONTRIBUTING.md, Typing).", '"""',
             ""]
    # isort's sections: the standard library, numpy, then ptxdsl's own modules
    lines += ["import enum"] if "enum" in imports else []
    lines += [_import(m, imports[m], set()) for m in ("collections.abc", "typing")
              if m in imports]
    lines += ["", "import numpy as np", ""] if "numpy" in imports else [""]
    lines += [_import(m, imports[m], reexports.get(m, set()))
              for m in sorted(m for m in imports if m.startswith("."))]
    lines += ["", f"__all__ = {list(ptx.__all__)!r}", ""]
    for alias, (text, doc) in ALIASES.items():
        lines += [f"{alias}: TypeAlias = {text}", f'"""{doc}."""']
    lines += ["", *body, ""]
    return _wrap("\n".join(lines))


def _import(module: str, names: set[str], exported: set[str]) -> str:
    """`from module import a, b` and one `from module import c as c` per re-exported name,
    wrapped and ordered as ruff's isort wants them."""
    plain = sorted(names - exported, key=_isort_key)
    lines = []
    if plain:
        line = f"from {module} import {', '.join(plain)}"
        lines.append(line if len(line) <= 100 else "\n".join(
            [f"from {module} import (", *(f"    {n}," for n in plain), ")"]))
    lines += [f"from {module} import {n} as {n}" for n in sorted(exported, key=_isort_key)]
    return "\n".join(lines)


def _isort_key(name: str) -> tuple[int, str]:
    # isort's order: CONSTANTS, then Classes, then functions
    return (0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2, name)


def _wrap(text: str) -> str:
    """Lines of the stub kept to the project's width (black-style breaks of long calls)."""
    out = []
    for line in text.splitlines():
        if len(line) <= 100 or not line.startswith(("def ", "__all__")):
            out.append(line)
            continue
        opening = line.index("(" if line.startswith("def ") else "[")
        closing = line.rindex(")" if line.startswith("def ") else "]")
        items = _split(line[opening + 1:closing])
        out.append(line[:opening + 1])
        out += [f"    {item}," for item in items]
        out.append(line[closing:])
    return "\n".join(out) + "\n"


def _split(args: str) -> list[str]:
    """Split at the top-level commas."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(args):
        depth += c in "([" and 1 or c in ")]" and -1 or 0
        if c == "," and depth == 0:
            items.append(args[start:i].strip())
            start = i + 1
    items.append(args[start:].strip())
    return [item for item in items if item]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.ptx_stub", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed stub instead of writing it")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not STUB.exists() or STUB.read_text() != text:
            print(f"{STUB.relative_to(ROOT)} is stale: run python -m tools.ptx_stub",
                  file=sys.stderr)
            return 1
        return 0
    STUB.write_text(text)
    print(f"wrote {STUB.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
