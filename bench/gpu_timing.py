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
    call cannot be captured (said on stderr). fn may be a list of calls on different
    inputs (rotating_sets): the graph then takes them in turn, at least `calls` and a
    whole number of rounds."""
    fns = list(fn) if isinstance(fn, (list, tuple)) else [fn]
    calls = -(-max(calls, len(fns)) // len(fns)) * len(fns)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for i in range(calls):
                fns[i % len(fns)]()
    except RuntimeError as e:
        print(f"note: graph capture failed ({e}); eager timing", file=sys.stderr)
        return eager_ms(fns[0])
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


def rotating_sets(bytes_per_set, limit=64):
    """How many copies of a problem's inputs the timed calls must rotate over so that the
    L2 cache cannot serve a call's reads from an earlier call's: together at least three
    times its size. Repeated calls over one small input measure L2, not memory (a 33 MB
    decode cache read at 107% of the copy bandwidth); in a model, the other layers' caches
    pass between two reads of one. At most `limit`."""
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    return max(1, min(limit, -(-3 * l2 // bytes_per_set)))


def copy_bandwidth():
    """The device's copy bandwidth in GB/s: a 1 GiB device-to-device copy, bytes read +
    written / time."""
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = eager_ms(lambda: y.copy_(x), reps=20)
    return 2 * x.numel() / ms / 1e6
