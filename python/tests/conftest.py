# SPDX-License-Identifier: MIT
"""pytest set-up: import the package from this checkout (python/fmha) and its library
from the build folder, unless FMHA_LIBRARY says otherwise."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
