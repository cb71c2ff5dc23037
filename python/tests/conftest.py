# SPDX-License-Identifier: MIT
"""pytest set-up: import the package from this checkout (python/fmha) and its library
from the build folder, unless FMHA_LIBRARY says otherwise; with FMHA_TEST_INSTALLED=1
the installed package (a wheel in a venv) instead."""
import os
import sys

if os.environ.get("FMHA_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
