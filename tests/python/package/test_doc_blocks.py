"""The Python blocks of README.md and docs/guide/*.md, and their shell blocks marked `package`, run
with this interpreter and the installed package (tests/docs/run_doc_blocks.py --phase python;
docs/development/documentation.md). The shell blocks run in ctest (docs_blocks)."""
from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT


def test_python_blocks_of_the_docs_run(cli):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "docs", "run_doc_blocks.py"), "--phase", "python",
                        "--ropecheck", cli], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1200)
    print(r.stdout)
    assert r.returncode == 0, r.stdout
