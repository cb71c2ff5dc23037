# SPDX-License-Identifier: MIT
# Thin wrapper over CMake (the source of truth). `make run` builds and runs the main job;
# `make test` builds and runs every test. CMAKE_ARGS passes extra options to CMake.
BUILD ?= build
CMAKE_ARGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps configure build run test wheel-test tsan-test fuzz-test clean

all: build

# What a fresh Debian machine lacks: cmake, a compiler, jansson (JSON), pkg-config (the
# install test), Python with NumPy and pytest (the package tests) and matplotlib (the
# bench plot test). Installed with
# apt-get when running as root, otherwise the command to run is printed.
DEB_PACKAGES = cmake make gcc libc6-dev libjansson-dev pkg-config python3 python3-numpy python3-pytest python3-matplotlib
deps:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
		else echo "missing Debian packages:$$missing; run: sudo apt-get install$$missing"; exit 1; fi; \
	fi

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/fmha run -b=2 -h=8 -s=1024 -d=128 -mask=b -v=1

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The Python wheel (pyproject.toml, setup.py: libfmha.so and jansson inside), installed in
# a fresh venv and the package's tests run against the installed copy, not the checkout.
WHEEL_PACKAGES = python3-venv python3-setuptools python3-wheel
wheel-test: deps
	@missing=""; for p in $(WHEEL_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
		else echo "missing Debian packages:$$missing; run: sudo apt-get install$$missing"; exit 1; fi; \
	fi
	rm -rf $(BUILD)/venv $(BUILD)/wheel
	/usr/bin/python3 -m venv --system-site-packages $(BUILD)/venv
	$(BUILD)/venv/bin/python -m pip wheel . --no-build-isolation --no-index --no-deps -w $(BUILD)/wheel
	$(BUILD)/venv/bin/python -m pip install --no-index --no-deps $(BUILD)/wheel/fmha-*.whl
	cd $(BUILD) && env -u FMHA_LIBRARY -u PYTHONPATH FMHA_TEST_INSTALLED=1 venv/bin/python -c \
		'import fmha, os; assert os.path.dirname(fmha.LIBRARY_PATH) == os.path.dirname(fmha.__file__), fmha.LIBRARY_PATH; print("installed:", fmha.LIBRARY_PATH)'
	cd $(BUILD) && env -u FMHA_LIBRARY -u PYTHONPATH FMHA_TEST_INSTALLED=1 venv/bin/python -m pytest -q -p no:cacheprovider $(CURDIR)/python/tests

# ThreadSanitizer over the tests that use one context (and one kernel cache) from several
# threads or processes: a data race fails them (TSAN_OPTIONS halt_on_error). OpenMP is
# kept to one thread per plan there: libgomp is not instrumented, so its barriers would
# read as races (test_api, whose plans use two threads, is left out for that reason).
TSAN_TESTS = test_threads test_plan_cache test_jit_cache
tsan-test: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFMHA_TSAN=ON -DFMHA_WERROR=ON $(CMAKE_ARGS)
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 exitcode=66" OMP_NUM_THREADS=1 \
		ctest --output-on-failure -R '^($(shell echo $(TSAN_TESTS) | tr ' ' '|'))$$'

# The libFuzzer harnesses (tests/fuzz) under ASan + UBSan, each for FUZZ_SECONDS from its
# seeds; clang and its libFuzzer runtime from Debian.
FUZZ_PACKAGES = clang libclang-rt-14-dev
FUZZ_SECONDS ?= 20
fuzz-test: deps
	@missing=""; for p in $(FUZZ_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
		else echo "missing Debian packages:$$missing; run: sudo apt-get install$$missing"; exit 1; fi; \
	fi
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFMHA_FUZZ=ON \
		-DFMHA_BUILD_TESTS=OFF -DFMHA_INSTALL=OFF -DFMHA_FUZZ_SECONDS=$(FUZZ_SECONDS) $(CMAKE_ARGS)
	cmake --build build-fuzz -j $(JOBS) --target $(patsubst %,fuzz_%,mask filter kset_json tune_json problem cli_flags cache_entry bench_files)
	ctest --test-dir build-fuzz -L fuzz --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD)
