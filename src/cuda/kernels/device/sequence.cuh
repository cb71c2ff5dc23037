/*
 * sequence.cuh: where one (batch, head)'s sequence lives, for any family's params with
 * the forward's layout fields (q/k/v/o/lse strides; cu_seqlens_q, cu_seqlens_k and
 * seqused_k in group mode). Batch mode: b's slice, lengths seqlen_q / seqlen_k. Group
 * mode (FMHA_GROUP): the token offsets cu_seqlens_q[b] and cu_seqlens_k[b], the lengths
 * their differences (seqused_k[b] keys when given).
 *
 * The group-mode integers live on the device and are the caller's: whatever they say,
 * the sequence stays inside the tensors (docs/semantics.md, "Index data"). Offsets are
 * clamped into [0, total tokens], an end before its start makes an empty sequence,
 * seqused_k into [0, allocated keys], and lengths to the problem's maxima (the grid,
 * the bias and the host's window clamp are sized by them). Valid data pass unchanged;
 * check_index_data reports invalid data instead.
 */
#ifndef FMHA_KERNEL_SEQUENCE_CUH
#define FMHA_KERNEL_SEQUENCE_CUH

typedef struct {
    int sq, sk;
    long long tq0;            /* the sequence's first query token (group mode; else 0) */
    long long q, k, v, o, lse; /* element offsets of row 0 of head h (q, o, lse) or hk (k, v) */
} seq_t;

template <typename Params>
__device__ __forceinline__ seq_t sequence_of(const Params &p, int b, int h, int hk)
{
    seq_t s;
#if FMHA_GROUP
    const int *cu_q = (const int *)p.cu_seqlens_q, *cu_k = (const int *)p.cu_seqlens_k;
    const int tq0 = min(max(cu_q[b], 0), p.total_q), tq1 = min(max(cu_q[b + 1], tq0), p.total_q);
    const int tk0 = min(max(cu_k[b], 0), p.total_k), tk1 = min(max(cu_k[b + 1], tk0), p.total_k);
    int sk = tk1 - tk0;
    if (p.seqused_k) sk = min(max(((const int *)p.seqused_k)[b], 0), sk);
    s.tq0 = tq0;
    s.sq = min(tq1 - tq0, p.seqlen_q);
    s.sk = min(sk, p.seqlen_k);
    s.q = s.tq0 * p.q_row;
    s.k = (long long)tk0 * p.k_row;
    s.v = (long long)tk0 * p.v_row;
    s.o = s.tq0 * p.o_row;
    s.lse = s.tq0 * p.lse_row;
#else
    s.tq0 = 0;
    s.sq = p.seqlen_q, s.sk = p.seqlen_k;
    s.q = (long long)b * p.q_batch;
    s.k = (long long)b * p.k_batch;
    s.v = (long long)b * p.v_batch;
    s.o = (long long)b * p.o_batch;
    s.lse = (long long)b * p.lse_batch;
#endif
    s.q += (long long)h * p.q_head;
    s.k += (long long)hk * p.k_head;
    s.v += (long long)hk * p.v_head;
    s.o += (long long)h * p.o_head;
    s.lse += (long long)h * p.lse_head;
    return s;
}

#endif /* FMHA_KERNEL_SEQUENCE_CUH */
