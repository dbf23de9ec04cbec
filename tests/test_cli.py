"""`python -m ptxdsl`: --version, help on every argument, the fuzz subcommand, and the progress
line of long runs."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

import pytest

import ptxdsl
from ptxdsl.__main__ import main, parser
from ptxdsl.progress import Progress

ROOT = Path(__file__).resolve().parent.parent


def test_version(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["--version"])
    assert ei.value.code == 0
    out = capsys.readouterr().out.strip()
    import importlib.util
    built = importlib.util.find_spec("ptxdsl._launch_c") is not None
    assert out == f"ptxdsl {ptxdsl.__version__} (C launch path: " + (
        "built)" if built else "not built; launches use cuda.bindings)")


def _parsers():
    yield "python -m ptxdsl", parser()
    for action in parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()
    from ptxdsl.fuzz.__main__ import main as fuzz_main
    captured = {}

    class Stop(Exception):
        pass

    def grab(self, args=None, namespace=None):
        captured["p"] = self
        raise Stop
    orig = argparse.ArgumentParser.parse_args
    argparse.ArgumentParser.parse_args = grab
    try:
        with pytest.raises(Stop):
            fuzz_main([])
    finally:
        argparse.ArgumentParser.parse_args = orig
    yield "fuzz", captured["p"]


def test_every_argument_has_help():
    seen = 0
    for name, p in _parsers():
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            seen += 1
            assert action.help, f"{name}: argument {action.dest} has no help text"
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    assert choice.help, f"{name}: command {choice.dest} has no help text"
    assert seen >= 12


def test_fuzz_is_a_subcommand_with_the_same_options(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["fuzz", "--help"])
    assert ei.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m ptxdsl fuzz")
    for opt in ("--examples", "--families", "--seed", "--progress"):
        assert opt in out
    with pytest.raises(SystemExit) as ei:       # its own argument checks
        main(["fuzz", "--examples", "0"])
    assert ei.value.code == 2 and "argument --examples" in capsys.readouterr().err


def test_fuzz_subcommand_runs_a_campaign():
    proc = subprocess.run([sys.executable, "-m", "ptxdsl", "fuzz", "--examples", "1",
                           "--families", "fence", "--seed", "1", "--progress"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "total: 40 cases" in proc.stdout and "0 disagreements" in proc.stdout
    # the forced progress line counted the family's cases and was erased at the end
    assert "fence" in proc.stderr and "40/40 (100%) cases" in proc.stderr
    assert proc.stderr.splitlines()[-1].strip() == ""   # (text mode reads \r as a newline)


def test_fuzz_subcommand_without_hypothesis_names_the_extra():
    code = ("import sys; sys.modules['hypothesis'] = None\n"
            "from ptxdsl.__main__ import main; sys.exit(main(['fuzz', '--examples', '1']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 2
    assert "python -m ptxdsl fuzz: ptxdsl.fuzz needs hypothesis" in proc.stderr
    assert "Traceback" not in proc.stderr


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_draws_on_a_terminal_only():
    quiet = io.StringIO()
    p = Progress("fam", total=10, stream=quiet)
    p.update(5, force=True)
    p.close()
    assert quiet.getvalue() == ""
    tty = _Tty()
    p = Progress("fam", total=10, stream=tty, interval=3600)
    p.update(3)                        # first update draws
    p.update(4)                        # within the interval: skipped
    p.update(7, force=True)
    p.close()
    frames = tty.getvalue().split("\r")
    assert frames[1].startswith("fam 3/10 (30%)")
    assert frames[2].startswith("fam 7/10 (70%)")
    assert len(frames) == 5 and frames[3].strip() == "" and frames[4] == ""


def test_fuzz_progress_is_closed_before_the_interrupted_tally(monkeypatch):
    from ptxdsl.fuzz import __main__ as fz
    closed = []
    monkeypatch.setattr(fz.Progress, "close", lambda self: closed.append(self.done))

    def interrupted(*a, **kw):
        def run():
            raise KeyboardInterrupt
        return run
    monkeypatch.setattr(fz, "_runner", interrupted)
    with pytest.raises(fz.Interrupted) as ei:
        fz.campaign(["fence"], 1, out=io.StringIO(), progress=True)
    assert closed == [0] and ei.value.report.outcomes == []


def test_a_ctrl_c_lost_in_a_gc_callback_still_stops_the_campaign(monkeypatch):
    """SIGINT during a gc callback (hypothesis installs one) only prints 'Exception ignored':
    the handler remembers it and the batch that was running re-raises it when it ends."""
    from ptxdsl.fuzz import __main__ as fz
    from ptxdsl.fuzz.oracle import Report
    batches = []

    def swallowed(cases):
        batches.append(len(cases))
        fz._ctrl_c.seen = True        # what the handler records before its raise is lost
        return Report()
    monkeypatch.setattr(fz, "check", swallowed)
    with fz._ctrl_c, pytest.raises(fz.Interrupted):
        fz.campaign(["fence"], 10 * fz.BATCH, seed_=1, out=io.StringIO(), progress=False)
    assert batches == [fz.BATCH]      # stopped after the first batch, not after ten


def test_ctrl_c_inside_a_gc_callback_is_deferred_not_lost():
    import gc
    import signal

    from ptxdsl.fuzz import __main__ as fz
    raised = []

    def callback(phase, info):
        if phase == "start" and not raised:
            try:
                signal.raise_signal(signal.SIGINT)     # handled right here, inside the callback
            except KeyboardInterrupt:
                raised.append("in the callback")
    gc.callbacks.append(callback)
    try:
        with fz._ctrl_c:
            gc.collect()
            assert raised == [] and fz._ctrl_c.seen
            with pytest.raises(KeyboardInterrupt):
                fz._ctrl_c.check()                     # the batch's end raises it
            fz._ctrl_c.seen = False
            signal.raise_signal(signal.SIGINT)         # elsewhere too: only remembered, so
            assert fz._ctrl_c.seen                     # a batch is never cut short
            with pytest.raises(KeyboardInterrupt):
                fz._ctrl_c.check()
    finally:
        gc.callbacks.remove(callback)
