"""`ptxdsl/ptx.pyi`, the typed stub of `ptxdsl.ptx`: current, complete, true to the dispatchers,
and useful to `mypy --strict` on user code (issue 31, "Types a user's checker can use")."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ptxdsl import Kernel, ptx, t
from ptxdsl.errors import PtxdslError
from ptxdsl.instructions import _ptx_args
from tools import ptx_stub

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "ptxdsl" / "ptx.pyi"


def _stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text())


def _stub_functions() -> dict[str, list[ast.FunctionDef]]:
    found: dict[str, list[ast.FunctionDef]] = {}
    for node in _stub_tree().body:
        if isinstance(node, ast.FunctionDef):
            found.setdefault(node.name, []).append(node)
    return found


def test_stub_is_generated_from_the_current_tables():
    assert ptx_stub.render() == STUB.read_text(), \
        "ptxdsl/ptx.pyi is stale: run `python -m tools.ptx_stub` and commit it"


def test_stub_declares_exactly_the_public_names():
    declared, stub_all = set(), None
    for node in _stub_tree().body:
        if isinstance(node, ast.FunctionDef):
            declared.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and ast.unparse(node.annotation) != "TypeAlias":   # aliases are the stub's own
            declared.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):   # `import X as X`: a re-export
            declared |= {a.name for a in node.names if a.asname == a.name}
        elif isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__":
            stub_all = ast.literal_eval(node.value)
    assert stub_all == list(ptx.__all__)
    assert declared == set(ptx.__all__)


def test_tag_constants_are_declared_with_their_members():
    assert "globals().update" not in (ROOT / "ptxdsl" / "ptx.py").read_text()
    constants = {}
    for node in _stub_tree().body:
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.annotation) != "TypeAlias":
            assert isinstance(node.target, ast.Name)
            m = re.fullmatch(r"Final\[Literal\[(\w+)\.(\w+)\]\]", ast.unparse(node.annotation))
            assert m, ast.unparse(node)
            constants[node.target.id] = m.groups()
    for name, (cls, member) in constants.items():
        value = getattr(ptx, name)
        assert (type(value).__name__, value.name) == (cls, member)
    assert {"space_shared", "scope_gpu", "sem_release", "op_and_op", "cta_group_1"} <= set(
        constants)
    assert ptx.space_shared is _ptx_args.S.shared_cta


def test_the_stubs_public_aliases_are_ptxs_at_run_time():
    """User code may annotate with them (`smem: ptx.Address`): the stub's alias and ptx's
    object are the same type, evaluated with the names the stub imports."""
    tree = _stub_tree()
    names: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(("ptxdsl." if node.level else "") + node.module)
            names |= {a.asname or a.name: getattr(module, a.name) for a in node.names}
    aliases = {node.target.id: ast.unparse(node.value) for node in tree.body
               if isinstance(node, ast.AnnAssign) and ast.unparse(node.annotation) == "TypeAlias"}
    public = {n: text for n, text in aliases.items() if not n.startswith("_")}
    assert {"Address", "Value", "SpaceArg"} <= set(public)
    for alias, text in public.items():
        expected = eval(text, {**names, **{a: getattr(ptx, a) for a in public}})  # noqa: S307
        assert getattr(ptx, alias) == expected, alias


class _Reached(Exception):
    """bind() was reached: the names it was given are recorded."""


_REAL_BIND = _ptx_args.bind
# Arguments a builder reads before it binds the rest (cta_group: which 7-argument form;
# disable_output_lane: which 8-argument tcgen05_mma form).
_VALUES = {"rank": 2, "driver_dtype": "UINT8", "cta_group": "cta_group::1",
           "disable_output_lane": [0] * 4}   # tcgen05_mma: a list, not enable_input_d


def _call(fn, node: ast.FunctionDef, monkeypatch) -> set[str] | None:
    """Call `fn` as the stub overload `node` says (every optional keyword given too); the
    names bind() then bound, or None when the builder does not bind (its signature decides)."""
    a = node.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    keywords = [p.arg for p in a.kwonlyargs]
    values = {n: _VALUES.get(n, object()) for n in (*positional, *keywords)}
    seen: list[set[str]] = []

    def bind(insn, args, kwargs, overloads):
        try:
            _, bound = _REAL_BIND(insn, args, kwargs, overloads)
        except PtxdslError as e:
            raise AssertionError(f"the stub's {ast.unparse(node.args)} is refused: {e}") from e
        seen.append(set(bound))
        raise _Reached

    monkeypatch.setattr(_ptx_args, "bind", bind)
    k = Kernel("t")
    args = [k, *(values[n] for n in positional[1:])]
    kwargs = {n: values[n] for n in keywords}
    inspect.signature(fn).bind(*args, **kwargs)    # the stub's names are the function's
    try:
        fn(*args, **kwargs)
    except _Reached:
        return seen[0]
    except PtxdslError:   # a builder that dispatches by itself (no bind() call)
        return None
    return None


def test_every_stub_overload_binds_as_the_dispatcher_binds(monkeypatch):
    """Each overload the stub shows, called with its names (keywords by keyword), reaches
    bind() with exactly those names (less the builder's own keywords), so the stub cannot
    promise a name or a form the code refuses; and each of bind()'s tables is in the stub."""
    stub = _stub_functions()
    checked, unbound = 0, set()
    for name in ptx.__all__:
        fn = inspect.unwrap(getattr(ptx, name))
        if not inspect.isfunction(fn):
            continue
        own = {p.name for p in inspect.signature(fn).parameters.values()
               if p.kind is p.KEYWORD_ONLY}
        table = getattr(fn, _ptx_args.OVERLOADS, None)
        forms = stub[name]
        if table is None:   # see test_builders_without_a_table_have_their_signature_in_the_stub
            continue
        assert len(forms) == len(table), name
        for node in forms:
            bound = _call(fn, node, monkeypatch)
            if bound is None:
                unbound.add(name)
                continue
            given = {p.arg for p in (*node.args.posonlyargs, *node.args.args,
                                     *node.args.kwonlyargs)} - {"k"}
            assert bound == given - own, (name, ast.unparse(node.args))
            checked += 1
    assert checked > 60   # the bind()-dispatched builders were reached
    # the builders that dispatch by themselves (their stub is checked against their signature)
    assert {n for n in unbound if not re.fullmatch(r"(ld|st)(_\w+)?", n)} == {
        "cp_async_bulk_prefetch_tensor"}


def test_builders_that_dispatch_by_themselves_take_each_stub_overload():
    """ld*/st* and cp_async_bulk_prefetch_tensor do not call bind(): each overload the stub
    shows is built, its positional-or-keyword arguments given by keyword."""
    k = Kernel("t")
    ptr = k.ld_param(k.param_ptr("p"))
    values = {"space": "global", "addr": ptr, "src": k.mov(1, type=t.b32),
              "cache_policy": ptx.createpolicy_fractional(k), "type": t.b32,
              "src_space": "global", "tensor_map": k.tensormap_addr(k.param_tensormap("m")),
              "tensor_coords": (0, 1)}
    built = 0
    for name, forms in _stub_functions().items():
        if not (re.fullmatch(r"(ld|st)(_\w+)?", name) and name not in ("st_async", "st_bulk")
                or name == "cp_async_bulk_prefetch_tensor"):
            continue
        for node in forms:
            a = node.args
            args = [k, *(values[p.arg] for p in a.posonlyargs[1:])]
            first = [] if a.posonlyargs else a.args[1:]
            kwargs = {p.arg: values[p.arg] for p in (*first, *a.kwonlyargs)
                      if p.arg in values}
            getattr(ptx, name)(*args, **kwargs)
            built += 1
    assert built == 2 * 6 * 2 * 4 + 6 * 2 + 4   # ld: nc, L1, hint, L2; st: L1, hint; prefetch


def test_builders_without_a_table_have_their_signature_in_the_stub():
    for name, forms in _stub_functions().items():
        fn = inspect.unwrap(getattr(ptx, name))
        if hasattr(fn, _ptx_args.OVERLOADS):
            continue
        (node,) = forms
        a = node.args
        stub = [(p.arg, "kw" if p in a.kwonlyargs else "pos")
                for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
        real = [(p.name, "kw" if p.kind is p.KEYWORD_ONLY else "pos")
                for p in inspect.signature(fn).parameters.values()]
        assert stub == real, name


def test_builders_show_their_overloads_to_inspect_and_help():
    """For IDEs without the stub and for Sphinx: one overload is the builder's signature,
    several are its docstring's first lines (autodoc's form for overloads)."""
    assert list(inspect.signature(ptx.tensormap_replace_box_dim).parameters) == [
        "k", "space", "tm_addr", "ord", "new_val"]
    assert ptx.mbarrier_arrive.__doc__.splitlines()[:2] == [
        "mbarrier_arrive(k, addr, *, space=None, sem=None, scope=None, dst=None) -> Reg | None",
        "mbarrier_arrive(k, addr, count, *, space=None, sem=None, scope=None, dst=None) -> "
        "Reg | None"]
    stub = _stub_functions()
    for name in ptx.__all__:
        fn = getattr(ptx, name)
        table = getattr(fn, _ptx_args.OVERLOADS, None)
        if table is None:
            continue
        if len(table) == 1:
            (node,) = stub[name]
            a = node.args
            assert list(inspect.signature(fn).parameters) == [
                p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)], name
        else:
            lines = fn.__doc__.splitlines()[:len(table) + 1]
            assert all(line.startswith(f"{name}(k") for line in lines[:-1]), name
            assert lines[-1] == "", name


def test_a_keyword_shown_optional_may_be_given_as_none():
    k = Kernel("t")
    tmap = k.tensormap_addr(k.param_tensormap("tmap"))
    ptx.cp_async_bulk_prefetch_tensor(k, tmap, (0, 1), mode=None, im2col=None, dim=None)
    text = "\n".join(line for line, _ in k.render())
    assert "cp.async.bulk.prefetch.tensor.2d.L2.global.tile [" in text, text


def test_the_generator_refuses_a_name_without_a_type():
    def builder(k, mystery):   # a new family's argument name, in no table
        return None
    builder.__annotations__["return"] = "None"
    with pytest.raises(SystemExit, match="no type for parameter 'mystery' of builder"):
        ptx_stub.overloads("builder", builder)


# -- mypy --strict on user code --------------------------------------------------------------
def _readme_example() -> str:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)[0]


CALLS = '''\
from typing import assert_type

from ptxdsl import Kernel, ptx, t
from ptxdsl.operands import Reg, Symbol

k = Kernel("calls")
bar = k.shared_array(t.b64, 1, align=8, name="bar")
ptx.mbarrier_init(k, bar, 1)
assert_type(ptx.mbarrier_arrive(k, bar), Reg | None)
ptx.mbarrier_arrive_expect_tx(k, ptx.sem_release, ptx.scope_cta, ptx.space_shared, bar, 128)
assert_type(ptx.mbarrier_try_wait_parity(k, addr=bar, phase_parity=0), Reg)
ptx.fence_proxy_async(k, "shared")
ptx.cp_async_bulk_prefetch_tensor(k, "global", bar, (0, 1))
assert_type(ptx.get_sreg_tid_x(k), Reg)
v = ptx.ld_L1_no_allocate(k, "global", bar, type=t.b32)
ptx.st_L2_cache_hint(k, "global", bar, v, v)
ptx.tensormap_replace_rank(k, ptx.space_shared, bar, rank=2)


def init(k: Kernel, bar: ptx.Address, count: ptx.Value) -> None:
    ptx.mbarrier_init(k, bar, count)


def consume(k: Kernel, bar: Symbol) -> Reg:
    phase = ptx.MbarrierPhase(k, bar)
    phase.wait()
    ptx.mbarrier_wait(k, bar, phase.parity, timeout=ptx.WaitTimeout(ns=1000))
    return phase.try_wait()
'''

WRONG = '''\
from ptxdsl import Kernel, ptx, t

k = Kernel("wrong")
bar = k.shared_array(t.b64, 1, align=8, name="bar")
ptx.mbarrier_init(k, bar, "one")
ptx.mbarrier_init(k, bar, 1, bogus=2)
ptx.ld(k, "global", bar)
'''


@pytest.fixture(scope="module")
def mypy_strict(tmp_path_factory) -> dict[str, list[str]]:
    """One `mypy --strict` run over the user files, as a user with ptxdsl installed runs it
    (errors inside ptxdsl are not the user's: --follow-imports=silent); errors by file."""
    pytest.importorskip("mypy")
    where = tmp_path_factory.mktemp("user")
    files = {"readme_example.py": _readme_example(), "calls.py": CALLS, "wrong.py": WRONG}
    for name, text in files.items():
        (where / name).write_text(text)
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(where / ".cache"), "--no-error-summary", *files],
        cwd=where, env=env, capture_output=True, text=True, timeout=300)
    errors: dict[str, list[str]] = {name: [] for name in files}
    for line in proc.stdout.splitlines():
        file, _, rest = line.partition(":")
        if file in errors and " error: " in rest:
            errors[file].append(rest)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return errors


def test_mypy_strict_accepts_the_readme_example(mypy_strict):
    assert mypy_strict["readme_example.py"] == []


def test_mypy_strict_accepts_cuda_ptx_calls_and_sees_their_types(mypy_strict):
    assert mypy_strict["calls.py"] == []


def test_mypy_strict_reports_wrong_calls(mypy_strict):
    errors = "\n".join(mypy_strict["wrong.py"])
    assert re.search(r'5: error: Argument 3 to "mbarrier_init" has incompatible type "str"',
                     errors), errors
    assert re.search(r'6: error: Unexpected keyword argument "bogus" for "mbarrier_init"',
                     errors), errors
    assert re.search(r'7: error: Missing named argument "type" for "ld"', errors), errors
    assert len(mypy_strict["wrong.py"]) == 3
