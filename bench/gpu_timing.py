# SPDX-License-Identifier: MIT
"""GPU timing shared by the Python benchmarks (decode_bench.py, append_bench.py): eager
event timing, CUDA-graph timing (no host time between kernels) and the device's copy
bandwidth."""
import sys

import torch


def eager_ms(fn, reps=50):
    """Median time of one call between two events: the host's own time per call is in it
    whenever the GPU finishes first (small problems)."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def gpu_ms(fn, reps=30, calls=10):
    """GPU time per call: `calls` calls captured in a CUDA graph, the median replay / calls
    (no host time between the kernels, for fmha and torch alike); eager timing where a
    call cannot be captured (said on stderr)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
    except RuntimeError as e:
        print(f"note: graph capture failed ({e}); eager timing", file=sys.stderr)
        return eager_ms(fn)
    graph.replay()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    times.sort()
    del graph
    return times[len(times) // 2]


def copy_bandwidth():
    """The device's copy bandwidth in GB/s: a 1 GiB device-to-device copy, bytes read +
    written / time."""
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = eager_ms(lambda: y.copy_(x), reps=20)
    return 2 * x.numel() / ms / 1e6
