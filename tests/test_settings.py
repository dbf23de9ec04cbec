"""ptxdsl.settings: every environment variable the package reads is declared there and read
through it (at use time), and each knob reads the values its documentation promises."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest

from ptxdsl import settings

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "ptxdsl"


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
    # Each unreadable value is said once per process: start every test with none said.
    monkeypatch.setattr(settings, "_warned", set())


def _environ_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, variable) for each os.environ[...], os.environ.get(...), os.getenv(...) of a
    constant name in the tree."""
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
            name = node.slice
        elif isinstance(node, ast.Call) and node.args:
            func = ast.unparse(node.func)
            if func.endswith(("environ.get", "environ.pop", "environ.setdefault", "getenv")):
                name = node.args[0]
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            found.append((node.lineno, name.value))
    return found


def test_only_settings_reads_environment_variables():
    offenders = []
    for path in sorted(PKG.rglob("*.py")):
        if path == PKG / "settings.py":
            continue
        for line, var in _environ_reads(ast.parse(path.read_text(), str(path))):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {var}")
    assert not offenders, "read these through ptxdsl.settings: " + ", ".join(offenders)


def test_the_scan_sees_the_ways_of_reading():
    # The scan above proves nothing if it misses a spelling: each one here must be found.
    src = ("import os\nos.environ['PTXDSL_A']\nos.environ.get('PTXDSL_B')\n"
           "os.getenv('PTXDSL_C', '1')\nfrom os import environ\nenviron.get('PTXDSL_D')\n")
    assert [v for _, v in _environ_reads(ast.parse(src))] == [
        "PTXDSL_A", "PTXDSL_B", "PTXDSL_C", "PTXDSL_D"]


def test_every_variable_the_package_mentions_is_declared():
    declared = {k.name for k in settings.KNOBS}
    mentioned = set()
    for path in PKG.rglob("*.py"):
        mentioned |= set(re.findall(r"\bPTXDSL_[A-Z0-9_]*[A-Z0-9]", path.read_text()))
    assert mentioned <= declared, sorted(mentioned - declared)
    assert len(declared) == len(settings.KNOBS), "a variable is declared twice"


FLAG_ON = [*settings.ON, "TRUE", " On ", "Yes"]
FLAG_OFF = [*settings.OFF, "FALSE", " off\n", "No"]


@pytest.mark.parametrize("knob", [settings.CACHE, settings.C_LAUNCH, settings.STRICT,
                                  settings.NO_NET], ids=lambda k: k.name)
def test_flags_read_their_documented_spellings(knob, monkeypatch):
    assert settings._FLAG in knob.expected
    for text in FLAG_ON:
        monkeypatch.setenv(knob.name, text)
        assert knob.get() is True, text
    for text in FLAG_OFF:
        monkeypatch.setenv(knob.name, text)
        assert knob.get() is False, text
    for text in ("", "  "):      # empty: as unset
        monkeypatch.setenv(knob.name, text)
        assert knob.get() is knob.default
    monkeypatch.delenv(knob.name)
    assert knob.get() is knob.default


@pytest.mark.parametrize("knob", [settings.CACHE, settings.STRICT, settings.NO_NET,
                                  settings.C_LAUNCH], ids=lambda k: k.name)
def test_an_unreadable_flag_is_its_default_with_one_warning(knob, monkeypatch):
    monkeypatch.setenv(knob.name, "maybe")
    with pytest.warns(settings.PtxdslSettingWarning,
                      match=rf"{knob.name}='maybe' is not one of 1, true, yes, on \(on\) or "
                      rf"0, false, no, off \(off\), in any case; using the default, "
                      rf"{knob.shown_default}"):
        assert knob.get() is knob.default
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert knob.get() is knob.default       # said once per value


@pytest.mark.parametrize("text, mb", [("0", 0), ("1", 1), ("0.5", 0.5), ("2048", 2048),
                                      (" 16 ", 16)])
def test_cache_max_mb_reads_sizes(text, mb, monkeypatch):
    monkeypatch.setenv("PTXDSL_CACHE_MAX_MB", text)
    assert settings.CACHE_MAX_MB.get() == int(mb * 1024 * 1024)


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "1e-9", "big", "1e400"])
def test_cache_max_mb_refuses_what_is_no_size(text, monkeypatch):
    monkeypatch.setenv("PTXDSL_CACHE_MAX_MB", text)
    with pytest.warns(settings.PtxdslSettingWarning, match=r"is not a size in MB .*using the "
                      r"default, 1024 MB"):
        assert settings.CACHE_MAX_MB.get() == 1024 * 1024 * 1024


def test_cache_dir_expands_home_and_xdg_takes_absolute_paths_only(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PTXDSL_CACHE_DIR", "~/c")
    assert settings.CACHE_DIR.get() == tmp_path / "c"
    monkeypatch.setenv("XDG_CACHE_HOME", "/x")
    assert settings.XDG_CACHE_HOME.get() == Path("/x")
    monkeypatch.setenv("XDG_CACHE_HOME", "rel")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert settings.XDG_CACHE_HOME.get() is None


def test_fuzz_examples_reads_counts_and_takes_the_callers_default(monkeypatch):
    monkeypatch.delenv("PTXDSL_FUZZ_EXAMPLES", raising=False)
    assert settings.FUZZ_EXAMPLES.get() == 300
    assert settings.FUZZ_EXAMPLES.get(600) == 600
    monkeypatch.setenv("PTXDSL_FUZZ_EXAMPLES", "40")
    assert settings.FUZZ_EXAMPLES.get(600) == 40
    monkeypatch.setenv("PTXDSL_FUZZ_EXAMPLES", "0")
    with pytest.warns(settings.PtxdslSettingWarning,
                      match=r"PTXDSL_FUZZ_EXAMPLES='0' is not a whole number >= 1; using the "
                      r"default, 600"):
        assert settings.FUZZ_EXAMPLES.get(600) == 600


def test_values_are_read_at_use_time(monkeypatch):
    from ptxdsl.checker import strict_from_env
    from ptxdsl.runtime.cache import cache_enabled
    monkeypatch.setenv("PTXDSL_STRICT", "yes")
    monkeypatch.setenv("PTXDSL_CACHE", "off")
    assert strict_from_env() and not cache_enabled()
    monkeypatch.setenv("PTXDSL_STRICT", "no")
    monkeypatch.setenv("PTXDSL_CACHE", "on")
    assert not strict_from_env() and cache_enabled()


def test_no_net_zero_keeps_the_net(monkeypatch):
    # Before the settings module any value, "0" included, took the net away.
    from ptxdsl import Kernel
    from ptxdsl.errors import BuildError, fail_closed

    def boom(k):
        raise TypeError("raw")
    monkeypatch.setenv("PTXDSL_NO_NET", "0")
    with pytest.raises(BuildError, match="invalid argument"):
        fail_closed("boom", boom)(Kernel("k"))
    monkeypatch.setenv("PTXDSL_NO_NET", "1")
    with pytest.raises(TypeError, match="raw"):
        fail_closed("boom", boom)(Kernel("k"))


def test_knob_lookup_names_the_known_variables():
    assert settings.knob("PTXDSL_STRICT") is settings.STRICT
    with pytest.raises(KeyError, match="PTXDSL_CACHE, PTXDSL_CACHE_DIR"):
        settings.knob("PTXDSL_NOPE")
