# SPDX-License-Identifier: MIT
"""Builds the wheel's native part (pyproject.toml holds the metadata): CMake builds
libfmha.so alone (no CLI, no tests) with the run path $ORIGIN, and it goes into the
package folder, where fmha._lib looks first. The shared libraries it needs that are not
part of every Linux system (jansson, and OpenMP's libgomp; Debian ships no
position-independent libjansson.a to link in) are copied beside it, so the wheel works
on a machine without them. The
CUDA driver and NVRTC stay the system's: fmha loads them at run time when a GPU is used.
"""
import os
import re
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = ("libjansson.so", "libgomp.so")  # dependencies the wheel carries (libgomp: OpenMP, GCC's runtime)


class BinaryDistribution(Distribution):
    """A platform wheel: it carries a native library."""

    def has_ext_modules(self):
        return True


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        out = os.path.join(self.build_lib, "fmha")
        with tempfile.TemporaryDirectory(prefix="fmha-wheel-") as build:
            cmake = ["cmake", "-S", HERE, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DFMHA_BUILD_TOOLS=OFF",
                     "-DFMHA_BUILD_TESTS=OFF", "-DFMHA_INSTALL=OFF", "-DFMHA_RPATH_ORIGIN=ON"]
            subprocess.check_call(cmake)
            subprocess.check_call(["cmake", "--build", build, "--target", "fmha", "-j", str(os.cpu_count() or 2)])
            lib = os.path.realpath(os.path.join(build, "libfmha.so"))
            shutil.copyfile(lib, os.path.join(out, "libfmha.so"))
            for path in needed_libraries(lib):
                shutil.copyfile(path, os.path.join(out, os.path.basename(path)))


def needed_libraries(lib):
    """The resolved paths of lib's dependencies named in BUNDLED (from ldd)."""
    text = subprocess.run(["ldd", lib], capture_output=True, text=True, check=True).stdout
    found = []
    for line in text.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m and m.group(1).startswith(BUNDLED):
            found.append(m.group(2))
    return found


setup(distclass=BinaryDistribution, cmdclass={"build_py": BuildWithLibrary})
