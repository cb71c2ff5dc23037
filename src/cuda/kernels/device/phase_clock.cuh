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
 * the last consumer warpgroup's first thread) of each CTA reports one line as it leaves:
 *   PH <blockIdx.x> <blockIdx.y> <tag> <globaltimer at start, ns> <at the report, ns>
 *      <cycles from mark 0 to mark 1> ... <to mark PHASE_MARKS - 1> <the SM it ran on>
 * (0 for a mark not reached). bench/phase_clocks.py turns a launch's lines into medians
 * and counts the SMs (two CTAs on one SM share its bandwidth: perf-notes run 122).
 *
 * A kernel does not print: a printf is a function call, and ptxas serialises every wgmma
 * of a function that makes one (C7510: each wgmma waited for before the next, the sm90
 * forward's phase clocks measured such a kernel until perf-notes run 206). A report is a
 * line of numbers in the module's phase_lines_ (phase_line), and fmha_phase_print, a
 * kernel of its own that the loader finds in a diagnostic module (loader.c) and the launch
 * runs after each launch of the module's kernel on its stream, prints the lines and
 * empties the buffer.
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

/* The marks live in local memory (volatile: at constant offsets from the stack, no
 * register held), not in registers, where they made ptxas serialise the sm90 forward's
 * wgmmas for want of registers (C7511). */
#define PHASE_START()                                                                                                  \
    volatile long long phase_cycles_[PHASE_MARKS] = {0}, phase_t_[PHASE_MARKS], phase_start_ns_;                      \
    phase_start_ns_ = (long long)phase_globaltimer();                                                                  \
    phase_cycles_[0] = clock64()
#define PHASE_MARK(i) (phase_cycles_[(i)] = clock64())
/* Sums instead of marks, for a loop (the persistent forward's items): PHASE_T(i) notes
 * the clock where a stretch of sum i starts (in local memory too: a clock held in
 * registers across a tile loop was one more cause of C7511), PHASE_AT(i) is that clock,
 * PHASE_ADD(i) adds the cycles since it to slot i, PHASE_COUNT(i) adds one; the report
 * prints each slot's sum (a slot starts at mark 0's clock). */
#define PHASE_T(i)  (phase_t_[(i)] = clock64())
#define PHASE_AT(i) phase_t_[(i)]
#define PHASE_ADD(i)                                                                                                   \
    (phase_cycles_[(i)] = (phase_cycles_[(i)] ? phase_cycles_[(i)] : phase_cycles_[0]) + (clock64() - phase_t_[(i)]))
#define PHASE_COUNT(i) (phase_cycles_[(i)] = (phase_cycles_[(i)] ? phase_cycles_[(i)] : phase_cycles_[0]) + 1)
/* A report line: its kind ('H', 'I', 'T': "PH", "PI", "PT") and up to PHASE_LINE_WORDS
 * numbers; lines past PHASE_MAX_LINES are dropped and counted (fmha_phase_print says so). */
#define PHASE_LINE_WORDS 21
#define PHASE_MAX_LINES 32768
__device__ long long phase_lines_[PHASE_MAX_LINES][PHASE_LINE_WORDS + 1];
__device__ unsigned phase_nlines_, phase_dropped_;
/* a new line of `kind` for the caller to fill in (all its words start at 0), or NULL */
__device__ __forceinline__ long long *phase_line(char kind)
{
    const unsigned n = atomicAdd(&phase_nlines_, 1u);
    if (n >= PHASE_MAX_LINES) {
        atomicAdd(&phase_dropped_, 1u);
        return NULL;
    }
    long long *l = phase_lines_[n];
    l[0] = kind;
    for (int i = 1; i <= PHASE_LINE_WORDS; i++) l[i] = 0;
    return l + 1;
}
#define PHASE_REPORT(tag)                                                                                              \
    do {                                                                                                               \
        long long *l_;                                                                                                 \
        if (threadIdx.x == PHASE_REPORTER && (l_ = phase_line('H'))) {                                                 \
            l_[0] = blockIdx.x, l_[1] = blockIdx.y, l_[2] = (tag);                                                     \
            l_[3] = phase_start_ns_, l_[4] = (long long)phase_globaltimer();                                \
            for (int i_ = 1; i_ < PHASE_MARKS; i_++)                                                                   \
                l_[4 + i_] = phase_cycles_[i_] ? phase_cycles_[i_] - phase_cycles_[0] : 0;                             \
            l_[4 + PHASE_MARKS] = phase_smid();                                                                        \
        }                                                                                                              \
    } while (0)
static_assert(5 + PHASE_MARKS <= PHASE_LINE_WORDS, "a PH line's numbers fit a report line");

/* The lines of the launch before, printed by one thread in the order they were reserved
 * (PH lines: 21 numbers; PI: 9; PT: 9), and the buffer emptied for the next launch. */
extern "C" __global__ void fmha_phase_print()
{
    const unsigned n = phase_nlines_ < PHASE_MAX_LINES ? phase_nlines_ : PHASE_MAX_LINES;
    for (unsigned i = 0; i < n; i++) {
        const long long *v = phase_lines_[i] + 1;
        switch ((char)phase_lines_[i][0]) {
        case 'H':
            printf("PH %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld "
                   "%lld %lld\n",
                   v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14], v[15],
                   v[16], v[17], v[18], v[19], v[20]);
            break;
        case 'I':
        case 'T':
            printf("P%c %lld %lld %lld %lld %lld %lld %lld %lld %lld\n", (char)phase_lines_[i][0], v[0], v[1], v[2],
                   v[3], v[4], v[5], v[6], v[7], v[8]);
            break;
        }
    }
    if (phase_dropped_) printf("phase_clock.cuh: %u report lines dropped (PHASE_MAX_LINES)\n", phase_dropped_);
    phase_nlines_ = 0, phase_dropped_ = 0;
}
#else
#define PHASE_START()     ((void)0)
#define PHASE_MARK(i)     ((void)0)
#define PHASE_T(i)        ((void)0)
#define PHASE_ADD(i)      ((void)0)
#define PHASE_COUNT(i)    ((void)0)
#define PHASE_REPORT(tag) ((void)0)
#endif

#endif /* FMHA_KERNEL_PHASE_CLOCK_CUH */
