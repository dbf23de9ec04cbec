import subprocess, sys, json
from pathlib import Path
sys.path.insert(0, ".")
from tests.test_frontend_gpu import _texts, _loadable
for name, text in _texts():
    if not _loadable(text):
        continue
    for which in ("orig", "again"):
        code = f"""
import sys; sys.path.insert(0, '.')
from ptxdsl.frontend import parse_ptx
from ptxdsl.runtime import load_ptx
text = open({json.dumps(str(Path('tests')/name) if name.startswith('golden') else str(Path('tests/corpus/ptx')/name[len('corpus/'):]))}).read()
if {which!r} == 'again': text = parse_ptx(text).emit()
try:
    load_ptx(text, name='x', cache=False).unload(); print('ok')
except Exception as e: print('ERR', type(e).__name__, str(e).splitlines()[0][:200])
"""
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        out = (r.stdout.strip() or r.stderr.strip().splitlines()[-1:] or [""])
        if r.returncode or "ok" not in r.stdout:
            print(name, which, "rc", r.returncode, out if isinstance(out, str) else out, flush=True)
print("done")
