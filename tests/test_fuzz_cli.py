"""`python -m ptxdsl.fuzz`: argument checks, Ctrl-C keeps the tally, and the nvJitLink worker
child never outlives its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ptxdsl.fuzz import strategies
from ptxdsl.fuzz.__main__ import main
from ptxdsl.fuzz.worker import Assembler
from tests.child_env import child_env

ROOT = Path(__file__).resolve().parent.parent
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.mark.parametrize("value", ["0", "-5", "many"])
def test_examples_must_be_positive(value, capsys):
    with pytest.raises(SystemExit) as ei:
        main(["--examples", value, "--families", "arith"])
    assert ei.value.code == 2
    assert "argument --examples" in capsys.readouterr().err


def test_unknown_family_lists_the_valid_ones(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["--families", "arith,nope", "--examples", "1"])
    err = capsys.readouterr().err
    assert ei.value.code == 2 and "unknown family 'nope'" in err
    assert all(f in err for f in strategies)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"   # a zombie has exited (whoever adopted it may not reap it at once)


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _wait(cond, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@linux_only
def test_worker_exits_on_eof_when_the_parent_end_closes():
    asm = Assembler()
    assert asm(".version 8.0\n.target sm_90\n.address_size 64\n", "sm_90") is None
    pid = asm.pid
    asm._conn.close()   # what the kernel does to the pipe when the parent dies
    assert _wait(lambda: not _alive(pid), 10), "worker kept running after its pipe closed"
    asm._stop()


def _campaign(tmp_path) -> subprocess.Popen:
    env = child_env(PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "ptxdsl.fuzz", "--examples", "1000000",
                             "--families", "arith"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)


def _worker_of(proc: subprocess.Popen) -> int:
    proc.stdout.readline()   # the header: the campaign is about to start
    assert _wait(lambda: _children(proc.pid), 120), "no worker process started"
    (pid,) = _children(proc.pid)
    return pid


@linux_only
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_parent_leaves_no_worker(tmp_path, sig):
    proc = _campaign(tmp_path)
    try:
        worker = _worker_of(proc)
        proc.send_signal(sig)
        proc.wait(30)
        assert _wait(lambda: not _alive(worker), 10), f"worker {worker} outlived its parent"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


@linux_only
def test_ctrl_c_prints_the_partial_tally_and_exits_130(tmp_path):
    proc = _campaign(tmp_path)
    try:
        worker = _worker_of(proc)
        time.sleep(1.0)   # let some cases be judged
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:   # a failed run must not leave a million-case campaign behind
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "(interrupted)" in out and "\ninterrupted: " in out and "cases in" in out
    assert "Traceback" not in err
    assert _wait(lambda: not _alive(worker), 10)


def test_ctrl_c_mid_batch_is_neither_lost_nor_a_disagreement(monkeypatch):
    # The signal lands while a batch is being judged (where a raised KeyboardInterrupt could be
    # swallowed by a gc callback or recorded as a failure): the campaign stops after that
    # batch, the earlier batches are tallied, and nothing counts as a disagreement.
    from ptxdsl.fuzz import __main__ as cli
    from ptxdsl.fuzz.oracle import Report

    calls = []

    def fake_check(cases):
        calls.append(len(cases))
        if len(calls) == 2:
            try:   # what a gc callback does to an exception raised inside it
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                pass
        return Report()

    monkeypatch.setattr(cli, "check", fake_check)
    with pytest.raises(cli.Interrupted) as ei, cli._ctrl_c:
        cli.campaign(["arith"], examples=100 * cli.BATCH, out=open(os.devnull, "w"),
                     progress=False)
    assert len(calls) == 2 and not ei.value.report.failures
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
