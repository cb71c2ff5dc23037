# SPDX-License-Identifier: MIT
# Thin wrapper over CMake (the source of truth). `make run` builds and runs the main job;
# `make test` builds and runs every test. CMAKE_ARGS passes extra options to CMake.
BUILD ?= build
CMAKE_ARGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps configure build run test clean

all: build

# What a fresh Debian machine lacks: cmake, a compiler, jansson (JSON), pkg-config (the
# install test), Python with NumPy and pytest (the package tests). Installed with
# apt-get when running as root, otherwise the command to run is printed.
DEB_PACKAGES = cmake make gcc libc6-dev libjansson-dev pkg-config python3 python3-numpy python3-pytest
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

clean:
	rm -rf $(BUILD)
