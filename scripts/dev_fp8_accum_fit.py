#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""dev_fp8_accum_fit.py: fit the e4m3 wgmma accumulator's model to what
bench/micro/fp8_accum.cu measured (perf-notes run 165), bit for bit, beside the model the
fp8 rule used before (the sum truncated to 2^(e - 12) or 2^(e - 13), e the exponent of the
larger of |acc| and the step's sum of |products|), and write the unit test's vectors.

Usage: /usr/bin/python3 scripts/dev_fp8_accum_fit.py DIR [--vectors tests/unit/fp8_wgmma_steps.h]
DIR holds the probe's files (exact.bin, step_zero.bin, ...; *_rs.bin from its rs mode).
"""
import argparse
import os

import numpy as np


def e4m3_table():
    t = np.zeros(256)
    for x in range(256):
        e, m = (x >> 3) & 15, x & 7
        v = (1 + m / 8) * 2.0 ** (e - 7) if e else m / 8 * 2.0 ** -6
        t[x] = np.nan if (x & 0x7F) == 0x7F else -v if x >> 7 else v
    return t


E4M3 = e4m3_table()


def load(path):
    """(A codes [n, 64, K], B codes [n, 128, K], C [n, 64, 128], D [n, 64, 128])"""
    raw = open(path, "rb").read()
    magic, n, k, _ = np.frombuffer(raw[:16], np.int32)
    assert magic == 0x38463850, path
    o = 16
    a = np.frombuffer(raw, np.uint8, n * 64 * k, o).reshape(n, 64, k)
    o += a.size
    b = np.frombuffer(raw, np.uint8, n * 128 * k, o).reshape(n, 128, k)
    o += b.size
    c = np.frombuffer(raw, np.float32, n * 8192, o).reshape(n, 64, 128)
    o += c.size * 4
    d = np.frombuffer(raw, np.float32, n * 8192, o).reshape(n, 64, 128)
    return a, b, c, d


def exponent(x):
    """floor(log2 |x|); -1000 for 0"""
    with np.errstate(divide="ignore"):
        return np.where(x != 0, np.floor(np.log2(np.abs(x))), -1000.0)


def measured_step(acc, a, b):
    """The measured model, one k32 step: acc [..., M, N], a [..., M, 32], b [..., N, 32]
    (values). E: the largest of the products' exponent-field sums (subnormals at -6) and
    acc's exponent; products and acc truncated toward zero to 2^(E - 13), summed exactly;
    the sum truncated toward zero to 14 significant bits."""
    ea = np.where(a != 0, np.maximum(exponent(a), -6), -1000.0)
    eb = np.where(b != 0, np.maximum(exponent(b), -6), -1000.0)
    prod = a[..., :, None, :] * b[..., None, :, :]
    top = np.maximum((ea[..., :, None, :] + eb[..., None, :, :]).max(-1), exponent(acc))
    ulp = 2.0 ** (top - 13)
    s = (np.trunc(prod / ulp[..., None]).sum(-1) + np.trunc(acc / ulp)) * ulp
    kept = 2.0 ** (exponent(s) - 13)
    return np.trunc(s / kept) * kept


def rule_step(acc, a, b, bits):
    """The model the rule used until run 165 (harness/naive_fwd.c before it)."""
    prod = a[..., :, None, :] * b[..., None, :, :]
    big = np.maximum(np.abs(acc), np.abs(prod).sum(-1))
    ulp = 2.0 ** (exponent(big) - bits)
    s = acc + prod.sum(-1)
    return np.where(big > 0, np.trunc(s / ulp) * ulp, s).astype(np.float32).astype(np.float64)


def chain(step, a, b, c, *args):
    acc = c.astype(np.float64)
    for k0 in range(0, a.shape[-1], 32):
        acc = step(acc, a[..., k0:k0 + 32], b[..., k0:k0 + 32], *args)
    return acc


def c_array(name, rows):
    out = [f"static const fp8_step_vector_t {name}[] = {{"]
    for a, b, c, d in rows:
        out.append("    {\"%s\",\n     \"%s\",\n     0x%08Xu, 0x%08Xu}," % (bytes(a).hex(), bytes(b).hex(), c, d))
    out.append("};")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--vectors", help="write the unit test's vectors (a C header) here")
    ap.add_argument("--cases", type=int, default=8, help="cases of each set to fit (all: 0)")
    args = ap.parse_args()
    rng = np.random.default_rng(165)
    picked = {}
    sets = ["exact", "step_zero", "step_c", "step_real", "qk256", "pv128"]
    for name in sets + [n + "_rs" for n in sets]:
        path = os.path.join(args.dir, name + ".bin")
        if not os.path.exists(path):
            continue
        ac, bc, c, d = load(path)
        if args.cases:
            ac, bc, c, d = ac[:args.cases], bc[:args.cases], c[:args.cases], d[:args.cases]
        a, b, hw = E4M3[ac], E4M3[bc], d.astype(np.float64)
        exact = c + np.einsum("nmk,njk->nmj", a, b)
        model = chain(measured_step, a, b, c)
        old12, old13 = chain(rule_step, a, b, c, 12), chain(rule_step, a, b, c, 13)
        rel = np.abs(hw - exact).max() / np.abs(exact).max()
        print(f"{name:13s} K {ac.shape[-1]:3d}: {hw.size:7d} elements; bit-exact: measured model "
              f"{(model == hw).mean():.5f}, rule's old model (12 bits) {(old12 == hw).mean():.5f}, "
              f"(13 bits) {(old13 == hw).mean():.5f}; max|D - exact| / max|exact| {rel:.2e}", flush=True)
        if name.startswith("step_") or name == "qk256":
            # vectors: half where the old model (12 bits) is off, half at random
            want = 32 if name != "qk256" else 6
            off = np.argwhere(old12 != hw)
            alls = np.argwhere(np.ones_like(hw, bool))
            idx = np.concatenate([off[rng.choice(len(off), min(want // 2, len(off)), replace=False)],
                                  alls[rng.choice(len(alls), want - min(want // 2, len(off)), replace=False)]])
            picked[name] = [(ac[n, m], bc[n, j], int(np.float32(c[n, m, j]).view(np.uint32)),
                             int(np.float32(d[n, m, j]).view(np.uint32))) for n, m, j in idx]
    if args.vectors:
        steps = picked["step_zero"] + picked["step_c"] + picked["step_real"]
        with open(args.vectors, "w") as f:
            f.write("/* SPDX-License-Identifier: MIT */\n/* fp8_wgmma_steps.h: e4m3 wgmma results measured "
                    "on an H200 (bench/micro/fp8_accum.cu,\n * perf-notes run 165), written by "
                    "scripts/dev_fp8_accum_fit.py: A's and B's e4m3 codes\n * (hex), C's and D's fp32 bits. "
                    "Half of each set is where the rule's old model\n * (12 bits of the larger of |acc| and "
                    "the step's sum of |products|) is off. */\n")
            f.write("typedef struct {\n    const char *a, *b;\n    unsigned c, d;\n} fp8_step_vector_t;\n\n")
            f.write("/* one k32 step: 32 codes of a row of A and of B */\n")
            f.write(c_array("fp8_one_steps", steps) + "\n\n")
            f.write("/* hd256's S: eight steps, 256 codes, C = 0 */\n")
            f.write(c_array("fp8_eight_steps", picked["qk256"]) + "\n")
        print("wrote", args.vectors, len(steps), "+", len(picked["qk256"]), "vectors")


if __name__ == "__main__":
    main()
