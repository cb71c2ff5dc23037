# SPDX-License-Identifier: MIT
"""Every example under examples/ runs (torch's and transformers' only where they are installed)."""
import glob
import os
import subprocess
import sys

import pytest

EXAMPLES = sorted(p for p in glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "*.py"))
                  if not os.path.basename(p).startswith("_"))


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_runs(path):
    if "torch" in os.path.basename(path):
        pytest.importorskip("torch")
    if "transformers" in os.path.basename(path):
        pytest.importorskip("transformers")
    r = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
