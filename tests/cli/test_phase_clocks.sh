#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_phase_clocks.sh PYTHON SRC: bench/phase_clocks.py on made-up diagnostic output (the
# GPU prints it: scripts/phase_clocks.sh): two launches of a persistent kernel whose items
# outlast any gap between item starts, and tile notes that are zero or left from an earlier
# launch, as the serial loop and short items leave them; only the last launch counts.
set -eu
python=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
    # PH <cta> <y> <tag> <start ns> <report ns> <marks 1..15> <sm>: launch 1, then launch 2
    for l in 1 2; do
        for cta in 0 1; do
            echo "PH $cta 0 0 $((l * 10000000)) $((l * 10000000 + 900000)) 0 0 $((l * 1000 + cta)) 0 2 0 0 0 0 0 0 0 0 0 0 $cta"
        done
    done
    # PI <cta> <slot> <item> <start ns> <loop cycles> <sm> <done ns>: items 300 us apart
    for l in 1 2; do
        t=$((l * 10000000))
        echo "PI 0 0 0 $t 500000 0 $((t + 700000))"
        echo "PI 0 1 2 $((t + 300000)) 500000 0 $((t + 700000))"
        echo "PI 1 0 1 $((t + 100)) 500000 1 $((t + 800000))"
        echo "PI 1 1 3 $((t + 400000)) $((l * 400000)) 1 $((t + 800000))"
    done
    # PT: zeros (tiles not noted), and a next tile from another launch (clock far off)
    echo "PT 0 0 40 0 0 0 0 0 0"
    echo "PT 0 0 41 100 200 300 400 150 250"
    echo "PT 0 0 42 90000000000 1 1 1 1 1"
} >"$work/ph.txt"
out=$("$python" "$src/bench/phase_clocks.py" --names "3:tile loops,5:items" "$work/ph.txt")
echo "$out"
grep -q "^items: 4 on 2 CTAs" <<<"$out" || { echo "FAIL: not the last launch's 4 items"; exit 1; }
grep -q "slot  1:    2 CTAs, median    650000 min    500000 max    800000" <<<"$out" ||
    { echo "FAIL: slot 1 is not the last launch's"; exit 1; }
grep -q "^tile steps: none noted" <<<"$out" || { echo "FAIL: a tile made of notes from two launches"; exit 1; }
grep -q "^ 3 tile loops *2000 *2001" <<<"$out" || { echo "FAIL: the PH marks"; exit 1; }
grep -q "cycles against its key tiles" <<<"$out" && { echo "FAIL: a cost fit from PI lines without tiles"; exit 1; }

# PI lines with key tiles and start cycles (9 fields): a tile loop of 2000 a tile + 3000,
# then 1500 more before the next item starts, so the whole item is 2000 a tile + 4500
{
    echo "PH 0 0 0 0 900000 0 0 1 0 2 0 0 0 0 0 0 0 0 0 0 0"
    for cta in 0 1; do
        clk=1000
        for slot in 0 1 2 3; do
            tiles=$((1 + 3 * slot + 7 * cta)) loop=$((2000 * (1 + 3 * slot + 7 * cta) + 3000))
            echo "PI $cta $slot $((2 * slot + cta)) $((100 + slot)) $loop $cta 900000 $tiles $clk"
            clk=$((clk + loop + 1500))
        done
    done
} >"$work/pi.txt"
out=$("$python" "$src/bench/phase_clocks.py" --names "3:tile loops" "$work/pi.txt")
echo "$out"
grep -q "tile loop :     2000 a tile +     3000 an item (1.50 tiles), over 8 items" <<<"$out" ||
    { echo "FAIL: the tile loop's fit"; exit 1; }
grep -q "whole item:     2000 a tile +     4500 an item (2.25 tiles), over 6 items" <<<"$out" ||
    { echo "FAIL: the whole item's fit (each item's start to the next one's in its CTA)"; exit 1; }
echo "ok"
