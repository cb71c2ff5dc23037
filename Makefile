# Thin wrapper over CMake (the source of truth). `make run` builds and runs the main job;
# `make test` builds and runs every test. CMAKE_ARGS passes extra options to CMake.
BUILD ?= build
CMAKE_ARGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all configure build run test clean

all: build

configure:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/fmha run -b=2 -h=8 -s=1024 -d=128 -mask=b -v=1

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD)
