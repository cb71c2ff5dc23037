/* SPDX-License-Identifier: MIT */
/*
 * phase_clock.cuh: where one CTA's time goes, for diagnosis only (perf-notes run 106
 * found the decode's fences and its cold tail this way; a sampling profile had spread
 * them over every CTA). A kernel marks the ends of its phases with PHASE_MARK(i) and
 * reports with PHASE_REPORT(tag); both compile to nothing unless FMHA_PHASE_CLOCKS is
 * defined, which only a diagnostic build does (scripts/phase_clocks.sh).
 *
 * Defined, each thread keeps clock64() at its marks (mark 0: the kernel's start) and
 * thread PHASE_REPORTER (default 0; a kernel or a diagnostic edit may name another, e.g.
 * the last consumer warpgroup's first thread) of each CTA prints one line as it leaves:
 *   PH <blockIdx.x> <blockIdx.y> <tag> <globaltimer at start, ns> <at the report, ns>
 *      <cycles from mark 0 to mark 1> ... <to mark PHASE_MARKS - 1> <the SM it ran on>
 * (0 for a mark not reached). bench/phase_clocks.py turns a launch's lines into medians
 * and counts the SMs (two CTAs on one SM share its bandwidth: perf-notes run 122).
 */
#ifndef FMHA_KERNEL_PHASE_CLOCK_CUH
#define FMHA_KERNEL_PHASE_CLOCK_CUH

#define PHASE_MARKS 16
#ifndef PHASE_REPORTER
#define PHASE_REPORTER 0
#endif

#ifdef FMHA_PHASE_CLOCKS
__device__ __forceinline__ unsigned long long phase_globaltimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ unsigned phase_smid()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}

#define PHASE_START()                                                                                                  \
    long long phase_cycles_[PHASE_MARKS] = {0};                                                                        \
    const unsigned long long phase_start_ns_ = phase_globaltimer();                                                    \
    phase_cycles_[0] = clock64()
#define PHASE_MARK(i) (phase_cycles_[(i)] = clock64())
/* Sums instead of marks, for a loop (the persistent forward's items): PHASE_T(t) notes
 * the clock in t, PHASE_ADD(i, t) adds the cycles since t to slot i, PHASE_COUNT(i)
 * adds one; the report prints each slot's sum (a slot starts at mark 0's clock). */
#define PHASE_T(t) const long long t = clock64()
#define PHASE_ADD(i, t)                                                                                                \
    (phase_cycles_[(i)] = (phase_cycles_[(i)] ? phase_cycles_[(i)] : phase_cycles_[0]) + (clock64() - (t)))
#define PHASE_COUNT(i) (phase_cycles_[(i)] = (phase_cycles_[(i)] ? phase_cycles_[(i)] : phase_cycles_[0]) + 1)
#define PHASE_REPORT(tag)                                                                                              \
    do {                                                                                                               \
        if (threadIdx.x == PHASE_REPORTER) {                                                                           \
            long long d_[PHASE_MARKS];                                                                                 \
            for (int i_ = 1; i_ < PHASE_MARKS; i_++)                                                                   \
                d_[i_] = phase_cycles_[i_] ? phase_cycles_[i_] - phase_cycles_[0] : 0;                                 \
            printf("PH %d %d %d %llu %llu %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld "           \
                   "%lld %lld %u\n",                                                                                   \
                   (int)blockIdx.x, (int)blockIdx.y, (int)(tag), phase_start_ns_, phase_globaltimer(), d_[1], d_[2],   \
                   d_[3], d_[4], d_[5], d_[6], d_[7], d_[8], d_[9], d_[10], d_[11], d_[12], d_[13], d_[14], d_[15],    \
                   phase_smid());                                                                                      \
        }                                                                                                              \
    } while (0)
#else
#define PHASE_START()     ((void)0)
#define PHASE_MARK(i)     ((void)0)
#define PHASE_T(t)        ((void)0)
#define PHASE_ADD(i, t)   ((void)0)
#define PHASE_COUNT(i)    ((void)0)
#define PHASE_REPORT(tag) ((void)0)
#endif

#endif /* FMHA_KERNEL_PHASE_CLOCK_CUH */
