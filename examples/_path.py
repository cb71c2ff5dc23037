# SPDX-License-Identifier: MIT
"""Lets the examples run from a source checkout: the package from ../python, the library
from ../build (or $FMHA_LIBRARY)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
