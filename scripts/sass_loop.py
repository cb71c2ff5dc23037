#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sass_loop.py SASS [--all]: the innermost loop of a cuobjdump -sass listing that holds at
least 8 HGMMA or QGMMA (fp8) and an exponential (the sm90 forward's tile: S, softmax, P V),
its size and the counts that show how ptxas treated it: R2UR (registers copied to the
uniform datapath, e.g. wgmma descriptors built from a register), P2R (predicates parked
in registers), BRA.DIV and WARPSYNC.ALL (warp convergence not proved: every shuffle
guarded), uniform integer ops, local-memory spills. --all prints the loop's opcodes.
Then the TMA loads (UTMALDG) and the R2URs in the few instructions before each: a producer
whose box operands come from vector registers copies them to uniform ones before every box
(five R2UR a box cost the forward 1-3%: perf-notes runs 204-205), a uniform producer has
none. Used by fwd_sass.sh; perf-notes run 88 compares loops with it."""
import collections, re, sys

ins = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*/\*([0-9a-f]+)\*/\s+(.*?);", line)
    if m:
        ins.append((int(m.group(1), 16), re.sub(r"^@!?U?P[0-9T]+\s+", "", m.group(2).strip())))
R2UR_WINDOW = 8  # the instructions before a UTMALDG that set up its operands (ELECT, predicates)


def tma_boxes():
    """The TMA loads and the R2URs that set up their operands: those in the R2UR_WINDOW
    instructions before each, back to the box before it at the most."""
    at = [i for i, (_, text) in enumerate(ins) if text.startswith("UTMALDG")]
    r2ur = 0
    for i in at:
        for _, text in reversed(ins[max(0, i - R2UR_WINDOW):i]):
            if text.startswith("UTMALDG"):
                break
            r2ur += text.startswith("R2UR")
    return f"TMA boxes: {len(at)} UTMALDG, {r2ur} R2UR in the {R2UR_WINDOW} instructions before them"


best = None
for addr, text in ins:
    m = re.match(r"BRA(?:\.\w+)?\s+(?:!?U?P\d,\s*)?0x([0-9a-f]+)", text)
    if not m or int(m.group(1), 16) >= addr:
        continue
    body = [x for x in ins if int(m.group(1), 16) <= x[0] <= addr]
    gemms = sum(x[1][1:].startswith("GMMA") for x in body)
    has_exp = any(x[1].startswith("MUFU.EX2") for x in body)
    if gemms >= 8 and has_exp and (best is None or len(body) < len(best)):
        best = body
if best is None:
    print("no loop with 8 HGMMA or QGMMA and MUFU.EX2")
    print(tma_boxes())
    sys.exit(0)
ops = collections.Counter("GMMA" if x[1][1:].startswith("GMMA") else x[1].split()[0] for x in best)
keys = ["GMMA", "R2UR", "P2R", "BRA.DIV", "WARPSYNC.ALL", "UIADD3", "STL", "LDL", "MUFU.EX2"]
counts = ", ".join(f"{k} {ops[k]}" for k in keys)
print(f"tile loop {best[0][0]:#x}-{best[-1][0]:#x}: {len(best)} instructions; {counts}")
print(tma_boxes())
if "--all" in sys.argv:
    for k, v in sorted(ops.items()):
        print(v, k)
