/* SPDX-License-Identifier: MIT */
/*
 * fmha.h: the public C API of fmha, fused multi-head attention.
 *
 * This header is the manual: whatever is not declared here is not API.
 *
 * Usage, in three steps:
 *   1. Describe a problem (fmha_problem_t): family, shapes, features, and the
 *      memory layout of every tensor by role (dtype, dims, int64 element strides).
 *   2. Ask a context (fmha_context_t) for a plan (fmha_plan_t). The plan picks the
 *      kernels and sizes the workspace.
 *   3. Execute the plan with data pointers, as often as wanted. Execution never
 *      allocates or compiles.
 *
 * Error model: every fallible function returns fmha_status_t. A handle keeps the
 * message of its last failure (fmha_*_last_error); messages name what was found,
 * what was expected and the rule ("[rule heads.gqa] ..."). The library never
 * prints and never exits the process.
 *
 * Thread safety: a problem has a single owner, who alone may change it; planning and
 * explaining only read it, so several threads may plan one problem at once (its last
 * error is left as it was: their messages are on the context). A context may be used
 * from several threads at once: planning, explaining, executing and memory calls run
 * concurrently (tests/unit/test_threads.c); registering kernels and loading a tuning
 * database wait for the plans in progress. A context's last error is kept per thread.
 * A plan is immutable after creation and may be executed concurrently from several
 * threads (each with its own workspace). Destroying a context while another thread uses it is an error.
 *
 * Shapes (logical; memory order is given by strides, so BSHD, BHSD and packed QKV
 * all work):
 *   batch mode                              group (varlen) mode
 *   Q    [B, Sq, Hq, Dqk]                   Q    [total_q, Hq, Dqk]
 *   K    [B, Sk, Hk, Dqk]                   K    [total_k, Hk, Dqk]
 *   V    [B, Sk, Hk, Dv]                    V    [total_k, Hk, Dv]
 *   O    [B, Sq, Hq, Dv]                    O    [total_q, Hq, Dv]
 *   LSE  [B, Hq, Sq]            fp32        LSE  [Hq, total_q]            fp32
 *   BIAS [B|1, Hq|1, Sq, Sk]                BIAS [B|1, Hq|1, Sq, Sk] (Sq, Sk = the max seqlens)
 *   ALIBI_SLOPES [Hq] or [B, Hq] fp32
 *   SINK [Hq] fp32 (per-head sink logits)
 *   DROPOUT_MASK [B, Hq, Sq, Sk] uint8 (1 = kept)
 *   CU_SEQLENS_Q/KV [B+1] int32, SEQUSED_KV [B] int32 (group mode only)
 *   Q_DESCALE, K_DESCALE, V_DESCALE [1] or [B, Hk] fp32 (fp8 e4m3 inputs, fwd: each
 *   element of q, k, v is read as its e4m3 value times its descale; absent means 1)
 * The exact math is in docs/semantics.md (REFERENCE.md of the design).
 */
#ifndef FMHA_FMHA_H
#define FMHA_FMHA_H

#include <stddef.h> /* size_t */
#include <stdint.h> /* int64_t, uint32_t */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(FMHA_BUILDING_SHARED)
#define FMHA_API __declspec(dllexport)
#elif defined(__GNUC__)
#define FMHA_API __attribute__((visibility("default")))
#else
#define FMHA_API
#endif

/* ---------------------------------------------------------------- version */

#define FMHA_VERSION_MAJOR 0
#define FMHA_VERSION_MINOR 2
#define FMHA_VERSION_PATCH 0
#define FMHA_VERSION_NUMBER \
    (FMHA_VERSION_MAJOR * 10000 + FMHA_VERSION_MINOR * 100 + FMHA_VERSION_PATCH)

/** Runtime version, MAJOR*10000 + MINOR*100 + PATCH. Compare with FMHA_VERSION_NUMBER
 *  to detect a header/library mismatch. Since 0.1. */
FMHA_API unsigned fmha_version_number(void);
/** Runtime version as "MAJOR.MINOR.PATCH". Since 0.1. */
FMHA_API const char *fmha_version_string(void);

/* ----------------------------------------------------------------- status */

/* One table: X(NAME, value, message). Values are pinned forever; new codes append. */
#define FMHA_STATUS_MAP(X)                                                            \
    X(SUCCESS, 0, "success")                                                          \
    X(INVALID_ARGUMENT, 1, "invalid argument (NULL pointer, bad enum value)")         \
    X(UNKNOWN_PARAM, 2, "unknown parameter key")                                      \
    X(OUT_OF_RANGE, 3, "parameter value out of range")                                \
    X(INVALID_PROBLEM, 4, "problem failed validation")                                \
    X(BAD_STATE, 5, "call out of order")                                              \
    X(NOT_SUPPORTED, 6, "no kernel supports this problem")                            \
    X(NOT_COMPILED, 7, "feature or backend not compiled into this build")             \
    X(ARCH_MISMATCH, 8, "kernel does not run on this device architecture")            \
    X(WORKSPACE_TOO_SMALL, 9, "workspace smaller than the plan requires")             \
    X(ALLOC_FAILED, 10, "memory allocation failed")                                   \
    X(COMPILE_FAILED, 11, "kernel compilation failed")                                \
    X(CUDA_ERROR, 12, "CUDA driver error")                                            \
    X(INTERNAL, 13, "internal error")

typedef enum fmha_status {
#define FMHA_X_(name, value, msg) FMHA_STATUS_##name = value,
    FMHA_STATUS_MAP(FMHA_X_)
#undef FMHA_X_
} fmha_status_t;

/** Symbolic name, e.g. "FMHA_STATUS_OUT_OF_RANGE"; "FMHA_STATUS_?" for an unknown value. */
FMHA_API const char *fmha_status_name(fmha_status_t s);
/** One-line description, e.g. "parameter value out of range". */
FMHA_API const char *fmha_status_string(fmha_status_t s);

/* ------------------------------------------------------------------ enums */

/** Element types. X(NAME, value, size_bytes, short_name). */
#define FMHA_DTYPE_MAP(X)        \
    X(FP32, 1, 4, "fp32")        \
    X(FP16, 2, 2, "fp16")        \
    X(BF16, 3, 2, "bf16")        \
    X(FP8_E4M3, 4, 1, "fp8e4m3") \
    X(INT32, 5, 4, "int32")      \
    X(UINT8, 6, 1, "uint8")

typedef enum fmha_dtype {
    FMHA_DTYPE_NONE = 0,
#define FMHA_X_(name, value, size, str) FMHA_DTYPE_##name = value,
    FMHA_DTYPE_MAP(FMHA_X_)
#undef FMHA_X_
} fmha_dtype_t;

/** "fp16", "bf16", ...; NULL for an unknown value. */
FMHA_API const char *fmha_dtype_name(fmha_dtype_t dt);
/** Size of one element in bytes; 0 for an unknown value. */
FMHA_API size_t fmha_dtype_size(fmha_dtype_t dt);
/** Parse a short name ("fp16"); FMHA_STATUS_INVALID_ARGUMENT when unknown. */
FMHA_API fmha_status_t fmha_dtype_parse(const char *name, fmha_dtype_t *out);

/** API families. X(NAME, value, short_name). */
#define FMHA_FAMILY_MAP(X)                 \
    X(FWD, 0, "fwd")                       \
    X(FWD_SPLITKV, 1, "fwd_splitkv")       \
    X(FWD_PAGEDKV, 2, "fwd_pagedkv")       \
    X(APPENDKV, 3, "appendkv")             \
    X(BATCH_PREFILL, 4, "batch_prefill")   \
    X(BWD, 5, "bwd")

typedef enum fmha_family {
#define FMHA_X_(name, value, str) FMHA_FAMILY_##name = value,
    FMHA_FAMILY_MAP(FMHA_X_)
#undef FMHA_X_
} fmha_family_t;

FMHA_API const char *fmha_family_name(fmha_family_t f);
/** The family named s ("fwd_splitkv", ...). INVALID_ARGUMENT for another name. Since 0.2. */
FMHA_API fmha_status_t fmha_family_parse(const char *s, fmha_family_t *out);

typedef enum fmha_mode {
    FMHA_MODE_BATCH = 0, /**< fixed seqlens, tensors carry a batch dimension */
    FMHA_MODE_GROUP = 1  /**< varlen: packed tokens and cu_seqlens */
} fmha_mode_t;

typedef enum fmha_mask_align {
    FMHA_MASK_ALIGN_TOP_LEFT = 0,    /**< d = 0 (PyTorch is_causal) */
    FMHA_MASK_ALIGN_BOTTOM_RIGHT = 1 /**< d = Sk - Sq (FlashAttention) */
} fmha_mask_align_t;

/** Page layout of a paged KV cache: [pages, page_size, Hk, D] or [pages, Hk, page_size, D]. */
typedef enum fmha_kv_layout { FMHA_KV_LAYOUT_NHD = 0, FMHA_KV_LAYOUT_HND = 1 } fmha_kv_layout_t;

/** How a paged cache is looked up: vLLM block_table [B, max_pages] + seqlens_kv [B], or
 *  FlashInfer/SGLang CSR pages kv_indptr [B+1], kv_indices [nnz], kv_last_page_len [B]. */
typedef enum fmha_kv_lookup { FMHA_KV_LOOKUP_BLOCK_TABLE = 0, FMHA_KV_LOOKUP_CSR = 1 } fmha_kv_lookup_t;

typedef enum fmha_backend {
    FMHA_BACKEND_AUTO = 0, /**< CUDA when a driver and GPU are present, else CPU */
    FMHA_BACKEND_CPU = 1,
    FMHA_BACKEND_CUDA = 2
} fmha_backend_t;

/* ------------------------------------------------------------- parameters */

/*
 * Problem parameters. X(NAME, key, name, type, default, lo, hi, doc).
 * type is I64 or F64; read and write each with the setter of its type.
 * A value outside [lo, hi] is refused with FMHA_STATUS_OUT_OF_RANGE (never clamped);
 * a non-finite F64 value is refused the same way. A default of 0 for a dimension
 * means "not set yet": validation reports it.
 */
#define FMHA_PARAM_MAP(X)                                                                   \
    X(FAMILY, 1, "family", I64, 0, 0, 5, "API family (fmha_family_t)")                                \
    X(MODE, 2, "mode", I64, 0, 0, 1, "0 batch, 1 group (varlen)")                                   \
    X(BATCH, 3, "batch", I64, 0, 0, 2147483647, "B: number of sequences")                            \
    X(NUM_HEADS_Q, 4, "num_heads_q", I64, 0, 0, 1048576, "Hq: query heads")                                \
    X(NUM_HEADS_KV, 5, "num_heads_kv", I64, 0, 0, 1048576, "Hk: key/value heads (Hq % Hk == 0)")            \
    X(SEQLEN_Q, 6, "seqlen_q", I64, 0, 0, 2147483647, "Sq; in group mode max_seqlen_q")                 \
    X(SEQLEN_KV, 7, "seqlen_kv", I64, 0, 0, 2147483647, "Sk; in group mode max_seqlen_k")                \
    X(HEAD_DIM_QK, 8, "head_dim_qk", I64, 0, 0, 65536, "Dqk: head dim of Q and K")                        \
    X(HEAD_DIM_V, 9, "head_dim_v", I64, 0, 0, 65536, "Dv: head dim of V and O")                           \
    X(WINDOW_LEFT, 10, "window_left", I64, -1, -1, 2147483647, "keys left of the diagonal, -1 unbounded")  \
    X(WINDOW_RIGHT, 11, "window_right", I64, -1, -1, 2147483647, "keys right of the diagonal, -1 unbounded") \
    X(MASK_ALIGN, 12, "mask_align", I64, 0, 0, 1, "diagonal alignment (fmha_mask_align_t)")               \
    X(SINK_TOKENS, 13, "sink_tokens", I64, 0, 0, 2147483647, "StreamingLLM sink tokens always visible")    \
    X(SCALE, 20, "scale", F64, 0.0, -1e300, 1e300, "score scale; 0 means 1/sqrt(Dqk)")               \
    X(SOFTCAP, 21, "softcap", F64, 0.0, 0.0, 1e300, "logit soft-cap; 0 disables")                      \
    X(DROPOUT_P, 22, "dropout_p", F64, 0.0, 0.0, 0x1.fffffffffffffp-1, "dropout probability in [0, 1)") \
    X(DROPOUT_SEED, 23, "dropout_seed", I64, 0, INT64_MIN, INT64_MAX, "Philox seed (bits of a uint64)")     \
    X(DROPOUT_OFFSET, 24, "dropout_offset", I64, 0, INT64_MIN, INT64_MAX, "Philox offset (bits of a uint64)") \
    X(NUM_SPLITS, 30, "num_splits", I64, 0, 0, 256, "fwd_splitkv: KV splits; 0 lets the library choose")      \
    X(PAGE_SIZE, 31, "page_size", I64, 0, 0, 2147483647, "paged KV: tokens per page; 0 means a contiguous cache") \
    X(KV_LAYOUT, 32, "kv_layout", I64, 0, 0, 1, "paged KV page layout (fmha_kv_layout_t): 0 NHD, 1 HND")     \
    X(KV_LOOKUP, 33, "kv_lookup", I64, 0, 0, 1, "paged KV lookup (fmha_kv_lookup_t): 0 block table, 1 CSR pages") \
    X(SEQLEN_KNEW, 34, "seqlen_knew", I64, 0, 0, 2147483647, "appendkv: new tokens per sequence (Snew)")       \
    X(ROTARY_DIM, 35, "rotary_dim", I64, 0, 0, 256, "appendkv: rotated dims of each head (0 none, multiple of 16)") \
    X(ROTARY_INTERLEAVED, 36, "rotary_interleaved", I64, 0, 0, 1, "appendkv: 1 GPT-J pairs (2i, 2i+1), 0 GPT-NeoX halves") \
    X(DETERMINISTIC, 37, "deterministic", I64, 0, 0, 1, "bwd: 1 asks for bitwise-reproducible gradients")

typedef enum fmha_param {
#define FMHA_X_(NAME, key, name, type, def, lo, hi, doc) FMHA_PARAM_##NAME = key,
    FMHA_PARAM_MAP(FMHA_X_)
#undef FMHA_X_
} fmha_param_t;

typedef enum fmha_param_type { FMHA_PARAM_TYPE_I64 = 1, FMHA_PARAM_TYPE_F64 = 2 } fmha_param_type_t;

/** Description of one parameter. Filled by fmha_param_info. */
typedef struct fmha_param_info {
    uint32_t struct_size; /**< set to sizeof(fmha_param_info_t) before the call */
    const char *name;     /**< "batch", "num_heads_q", ... */
    const char *doc;
    fmha_param_type_t type;
    int64_t default_i64, lo_i64, hi_i64; /**< for I64 parameters */
    double default_f64, lo_f64, hi_f64;  /**< for F64 parameters */
} fmha_param_info_t;

/** Describe parameter k: name, type, default and bounds (inclusive).
 *  FMHA_STATUS_UNKNOWN_PARAM for a key not in the table; INVALID_ARGUMENT for a NULL
 *  info or a struct_size smaller than this version's struct. Since 0.1. */
FMHA_API fmha_status_t fmha_param_info(fmha_param_t k, fmha_param_info_t *info);
/** Find a parameter by its name ("num_heads_q"). UNKNOWN_PARAM when there is none. */
FMHA_API fmha_status_t fmha_param_lookup(const char *name, fmha_param_t *out);

/* ---------------------------------------------------------------- tensors */

/** Tensor roles. X(NAME, value, short_name). Values are pinned; new roles append. */
#define FMHA_TENSOR_ROLE_MAP(X)             \
    X(Q, 1, "q")                            \
    X(K, 2, "k")                            \
    X(V, 3, "v")                            \
    X(O, 4, "o")                            \
    X(LSE, 5, "lse")                        \
    X(BIAS, 6, "bias")                      \
    X(ALIBI_SLOPES, 7, "alibi_slopes")      \
    X(SINK, 8, "sink")                      \
    X(DROPOUT_MASK, 9, "dropout_mask")      \
    X(CU_SEQLENS_Q, 10, "cu_seqlens_q")     \
    X(CU_SEQLENS_KV, 11, "cu_seqlens_kv")   \
    X(SEQUSED_KV, 12, "seqused_kv")         \
    X(SEQLENS_KV, 13, "seqlens_kv")         \
    X(BLOCK_TABLE, 14, "block_table")       \
    X(KV_INDPTR, 15, "kv_indptr")           \
    X(KV_INDICES, 16, "kv_indices")         \
    X(KV_LAST_PAGE_LEN, 17, "kv_last_page_len") \
    X(CACHE_BATCH_IDX, 18, "cache_batch_idx") \
    X(K_NEW, 19, "k_new")                   \
    X(V_NEW, 20, "v_new")                   \
    X(ROTARY_COS, 21, "rotary_cos")         \
    X(ROTARY_SIN, 22, "rotary_sin")         \
    X(Q_ROT, 23, "q_rot")                   \
    X(DO, 24, "do")                         \
    X(DQ, 25, "dq")                         \
    X(DK, 26, "dk")                         \
    X(DV, 27, "dv")                         \
    X(DBIAS, 28, "dbias")                   \
    X(DSINK, 29, "dsink")                   \
    X(Q_DESCALE, 30, "q_descale")           \
    X(K_DESCALE, 31, "k_descale")           \
    X(V_DESCALE, 32, "v_descale")

typedef enum fmha_tensor_role {
#define FMHA_X_(name, value, str) FMHA_TENSOR_##name = value,
    FMHA_TENSOR_ROLE_MAP(FMHA_X_)
#undef FMHA_X_
    FMHA_TENSOR_ROLE_END_ /**< one past the largest role; not a role */
} fmha_tensor_role_t;

#define FMHA_MAX_RANK 6

/** "q", "lse", ...; NULL for an unknown value. */
FMHA_API const char *fmha_tensor_role_name(fmha_tensor_role_t role);

/** A data pointer for one role, passed to fmha_plan_execute. */
typedef struct fmha_tensor_ptr {
    fmha_tensor_role_t role;
    void *data; /**< device pointer on CUDA, host pointer on the CPU backend */
} fmha_tensor_ptr_t;

/* ---------------------------------------------------------------- problem */

typedef struct fmha_problem fmha_problem_t;

/** Create a problem with every parameter at its default and no tensors.
 *  ALLOC_FAILED when out of memory; INVALID_ARGUMENT when out is NULL. Since 0.1. */
FMHA_API fmha_status_t fmha_problem_create(fmha_problem_t **out);
/** Destroy a problem; NULL is a no-op. */
FMHA_API void fmha_problem_destroy(fmha_problem_t *p);
/** Restore every parameter to its default and drop every tensor. */
FMHA_API fmha_status_t fmha_problem_reset(fmha_problem_t *p);
/** Copy a problem (parameters and tensors). */
FMHA_API fmha_status_t fmha_problem_clone(const fmha_problem_t *p, fmha_problem_t **out);
/** The message of the last failure on this handle ("" if none). Never NULL; valid until
 *  the next call on the handle. */
FMHA_API const char *fmha_problem_last_error(const fmha_problem_t *p);

/** Set an I64 parameter. UNKNOWN_PARAM, OUT_OF_RANGE, or INVALID_ARGUMENT when k is an
 *  F64 parameter. A failed set leaves the old value. */
FMHA_API fmha_status_t fmha_problem_set_i64(fmha_problem_t *p, fmha_param_t k, int64_t v);
/** Set an F64 parameter. OUT_OF_RANGE for NaN, infinities and values outside bounds. */
FMHA_API fmha_status_t fmha_problem_set_f64(fmha_problem_t *p, fmha_param_t k, double v);
FMHA_API fmha_status_t fmha_problem_get_i64(const fmha_problem_t *p, fmha_param_t k, int64_t *v);
FMHA_API fmha_status_t fmha_problem_get_f64(const fmha_problem_t *p, fmha_param_t k, double *v);

/** Set the mask parameters (WINDOW_LEFT, WINDOW_RIGHT, MASK_ALIGN, SINK_TOKENS) from a
 *  mask string in CK's grammar: "0" none; "1"/"t" causal top-left; "2"/"b" causal
 *  bottom-right; "t:l,r" / "b:l,r" windows; "t:l,r,n" / "b:l,r,n" with n sink tokens;
 *  "xt:w" / "xb:w" xformers window of size w (w <= 0 means causal).
 *  INVALID_ARGUMENT with a message naming the grammar for anything else. */
FMHA_API fmha_status_t fmha_problem_set_mask(fmha_problem_t *p, const char *mask);

/** Describe the tensor of a role: dtype, rank (1..FMHA_MAX_RANK), dims and element
 *  strides. strides NULL means contiguous row-major. Replaces a previous description.
 *  Shape consistency with the parameters is checked by fmha_problem_validate. */
FMHA_API fmha_status_t fmha_problem_set_tensor(fmha_problem_t *p, fmha_tensor_role_t role,
                                               fmha_dtype_t dtype, int rank,
                                               const int64_t *dims, const int64_t *strides);
/** Remove the tensor of a role (no error if it was not set). */
FMHA_API fmha_status_t fmha_problem_clear_tensor(fmha_problem_t *p, fmha_tensor_role_t role);
/** 1 when the role has a tensor, 0 otherwise (also for NULL or an unknown role). */
FMHA_API int fmha_problem_has_tensor(const fmha_problem_t *p, fmha_tensor_role_t role);
/** Read back a tensor description; dims and strides must hold FMHA_MAX_RANK values.
 *  BAD_STATE when the role has no tensor. */
FMHA_API fmha_status_t fmha_problem_get_tensor(const fmha_problem_t *p, fmha_tensor_role_t role,
                                               fmha_dtype_t *dtype, int *rank, int64_t *dims,
                                               int64_t *strides);

/** Check the problem against every rule of its family. On failure returns
 *  INVALID_PROBLEM (or NOT_SUPPORTED for a family not implemented yet) and writes the
 *  message to why (snprintf contract: always NUL-terminated when why_len > 0; why may
 *  be NULL) and to the handle's last error. Messages start with "[rule <id>]". */
FMHA_API fmha_status_t fmha_problem_validate(const fmha_problem_t *p, char *why, size_t why_len);

/* ------------------------------------------------------------------ masks */

/** A parsed mask: window (left, right; -1 unbounded), alignment and sink tokens. */
typedef struct fmha_mask {
    int64_t left, right;
    fmha_mask_align_t align;
    int64_t sink_tokens;
} fmha_mask_t;

/** Parse a mask string (grammar at fmha_problem_set_mask). On failure returns
 *  INVALID_ARGUMENT and writes why (may be NULL). */
FMHA_API fmha_status_t fmha_mask_parse(const char *s, fmha_mask_t *out, char *why, size_t why_len);
/** Is key j visible to query i, for lengths sq, sk? (REFERENCE semantics) */
FMHA_API int fmha_mask_visible(const fmha_mask_t *m, int64_t sq, int64_t sk, int64_t i, int64_t j);
/** Number of visible (i, j) pairs of one sequence, for FLOP counts. */
FMHA_API int64_t fmha_mask_visible_pairs(const fmha_mask_t *m, int64_t sq, int64_t sk);

/* --------------------------------------------------------- random numbers */

/** Philox4x32-10 (Salmon et al., Random123): out = philox(counter, key). This is the
 *  generator behind dropout; exposed so callers can reproduce masks. */
FMHA_API void fmha_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

/* ---------------------------------------------------------------- context */

typedef struct fmha_context fmha_context_t;

/** Create a context on a backend. AUTO picks CUDA when a driver and a supported GPU are
 *  present, else CPU. For CUDA: NOT_COMPILED when this machine has no usable driver or
 *  device (fmha_build_info() says why), ARCH_MISMATCH for a GPU without kernels.
 *  device is the CUDA ordinal; ignored on the CPU. */
FMHA_API fmha_status_t fmha_context_create(fmha_context_t **out, fmha_backend_t backend, int device);
FMHA_API void fmha_context_destroy(fmha_context_t *ctx);
/** The backend the context runs on (never AUTO). */
FMHA_API fmha_backend_t fmha_context_backend(const fmha_context_t *ctx);
/** Why the calling thread's last failing call on ctx failed ("" after a success, or when
 *  this thread has not used ctx lately: each thread keeps the messages of the last 8
 *  contexts it used). Valid until this thread's next call on ctx. */
FMHA_API const char *fmha_context_last_error(const fmha_context_t *ctx);

/** Compiled-in backends, OpenMP, NVRTC availability and why CUDA or NVRTC is off, as one
 *  line of space-separated key=value pairs; a value with spaces is in double quotes and
 *  holds none itself: version=0.2.0 backends=cpu,cuda openmp=on cuda=off
 *  cuda_off="no CUDA driver (...)" nvrtc=on. Static storage. */
FMHA_API const char *fmha_build_info(void);

/** Create a virtual context for a GPU arch ("sm80", "sm86", "sm89", "sm90"): it selects
 *  and explains as a device of that arch would (sm_count 0 means the arch's default SM
 *  count), with the kernels such a device registers (since 0.2; before, the "default"
 *  receipt): fmha_explain and fmha_kernel_candidates answer, but nothing can run, so
 *  fmha_plan_create returns NOT_COMPILED, its message naming the kernel selected. Useful
 *  offline and in tests. Since 0.1. */
FMHA_API fmha_status_t fmha_context_create_virtual(fmha_context_t **out, const char *arch, int sm_count);
/** Why the last fmha_context_create or fmha_context_create_virtual on this thread failed
 *  ("" after a success). Never NULL; valid until the thread's next create. Since 0.2. */
FMHA_API const char *fmha_context_create_error(void);
/** The arch a context selects for: "cpu", "sm80", ... */
FMHA_API const char *fmha_context_arch(const fmha_context_t *ctx);

/** Memory of the context's device: device memory on CUDA, host memory on the CPU
 *  backend. For tools and tests; the library never allocates in execute. Since 0.1. */
FMHA_API fmha_status_t fmha_context_alloc(fmha_context_t *ctx, size_t bytes, void **ptr);
FMHA_API void fmha_context_free(fmha_context_t *ctx, void *ptr);
/** Copy host -> device (to_device 1) or device -> host (0); synchronous. */
FMHA_API fmha_status_t fmha_context_copy(fmha_context_t *ctx, void *dst, const void *src, size_t bytes, int to_device);
/** Wait for all work the context's device has been given. */
FMHA_API fmha_status_t fmha_context_synchronize(fmha_context_t *ctx);

/** Free memory the library returned (JSON and explain texts). NULL is a no-op. */
FMHA_API void fmha_free(void *ptr);

/* ------------------------------------------------------------ kernel sets */

/*
 * Kernel instances are named by their key: signature (what they compute) + algorithm
 * (how), e.g. fmha_fwd_bf16_hq128_hv128_causal_lse_sm90_mmasync_m128_n64_w4_s2.
 * docs/kernels.md lists the fields, rules and receipts.
 */
typedef struct fmha_kernel_set fmha_kernel_set_t;

/** Every valid instance of arch in a receipt ("default", "flash", "pytorch", "serving",
 *  "training", "fp8", "all"), kept when filter (an expression over key fields such as
 *  "hdim_qk==128 && dtype==bf16"; NULL keeps all) accepts it. INVALID_ARGUMENT with why
 *  for an unknown arch or receipt or a bad filter. */
FMHA_API fmha_status_t fmha_kernel_set_enumerate(const char *arch, const char *receipt, const char *filter,
                                                 fmha_kernel_set_t **out, char *why, size_t why_len);
/** Expand a declarative JSON config ({"variant": ..., "trait_config": {field: {"values":
 *  [...]}}}, a list of them, or {"configs": [...]}) over arch's valid instances. */
FMHA_API fmha_status_t fmha_kernel_set_from_json(const char *arch, const char *json, fmha_kernel_set_t **out,
                                                 char *why, size_t why_len);
/** Add src's kernels to dst (duplicates once). */
FMHA_API fmha_status_t fmha_kernel_set_merge(fmha_kernel_set_t *dst, const fmha_kernel_set_t *src);
FMHA_API void fmha_kernel_set_destroy(fmha_kernel_set_t *set);
FMHA_API size_t fmha_kernel_set_count(const fmha_kernel_set_t *set);
/** Name of kernel i; NULL past the end. */
FMHA_API const char *fmha_kernel_set_name(const fmha_kernel_set_t *set, size_t i);
/** Family of kernel i ("fwd", "splitkv", "combine", ...); NULL past the end. */
FMHA_API const char *fmha_kernel_set_family(const fmha_kernel_set_t *set, size_t i);
/** The key of a kernel name as a JSON object (snprintf contract into buf). Parsing is the
 *  exact inverse of naming. INVALID_ARGUMENT with why for a name that is not a key. */
FMHA_API fmha_status_t fmha_kernel_name_parse(const char *name, char *key_json, size_t len, char *why,
                                              size_t why_len);

/* ------------------------------------------------------------------ build */

/** Progress of fmha_build: called after each kernel, from the worker threads but never
 *  two at a time. */
typedef void (*fmha_build_progress_fn)(size_t done, size_t total, const char *kernel, int from_cache, void *user);

typedef struct fmha_build_options {
    uint32_t struct_size;            /**< sizeof(fmha_build_options_t) */
    const char *arch;                /**< "sm80", "sm86", "sm89", "sm90" */
    const char *receipt;             /**< NULL: "default" */
    const char *filter;              /**< NULL: all; e.g. "family==fwd && dtype==bf16" */
    int threads;                     /**< parallel compiles; 0: one per CPU */
    fmha_build_progress_fn progress; /**< may be NULL */
    void *user;
    /** NULL, or kernel names one per line: build exactly these (receipt and filter must
     *  be NULL, arch must be NULL or the names' arch). Added in 0.2: callers compiled
     *  before it pass a struct_size that ends at user, and get NULL. */
    const char *names;
} fmha_build_options_t;

typedef struct fmha_build_result {
    size_t compiled, cached; /**< newly compiled into the cache / already there */
    size_t skipped;          /**< instances of the set this build has no kernel source for */
    size_t failed;
} fmha_build_result_t;

/** Precompile a kernel set into the on-disk cache (NVRTC; no GPU needed), so that plan
 *  creation only loads. NOT_COMPILED when NVRTC is absent; COMPILE_FAILED when any
 *  kernel failed (why holds the first log). */
FMHA_API fmha_status_t fmha_build(const fmha_build_options_t *opt, fmha_build_result_t *res, char *why, size_t why_len);

/* --------------------------------------------------------------- registry */

/** Register a set's kernels in the context's registry with a priority: a kernel whose
 *  name is already there replaces it only with a strictly higher priority. Kernels of
 *  another arch are kept but never selected. Thread-safe. */
FMHA_API fmha_status_t fmha_context_register(fmha_context_t *ctx, const fmha_kernel_set_t *set, int priority);
/** The registry as JSON: {"metadata", "statistics" (with_stats), "kernels"}. Free with
 *  fmha_free. NULL when out of memory. Thread-safe. */
FMHA_API char *fmha_context_kernels_json(fmha_context_t *ctx, int with_stats);
/** Load a tuning database (JSON {"entries": [{"class": ..., "kernel": ...}]}): when a
 *  problem's class has an entry whose kernel can run it, the selector takes it. */
FMHA_API fmha_status_t fmha_context_load_tune_db(fmha_context_t *ctx, const char *path);


/* ------------------------------------------------------------------- plan */

typedef struct fmha_plan fmha_plan_t;

/* The type behind both cudaStream_t and CUstream, declared here so that this header needs
 * no CUDA include. */
struct CUstream_st;

/** Options for fmha_plan_create. Zero-initialise, then set struct_size. */
typedef struct fmha_plan_options {
    uint32_t struct_size;     /**< sizeof(fmha_plan_options_t) */
    const char *force_kernel; /**< a kernel name to use instead of the selector's choice */
    int num_threads;          /**< CPU backend threads; 0 means the OpenMP default. The
                                   workspace holds per-thread scratch, so it grows with this. */
    int check_index_data;     /**< Since 0.2. 1: before each execute on a device backend, copy
                                   the index tensors (cu_seqlens, seqused_kv, seqlens_kv,
                                   cache_batch_idx, block_table, CSR kv_indptr / kv_indices /
                                   kv_last_page_len) to the host, stream-ordered, and check
                                   them by the rules the CPU backend applies; a bad entry fails
                                   the call with INVALID_PROBLEM naming it, before any kernel
                                   runs. Costs the copies and a synchronise of the stream, and
                                   is refused during CUDA graph capture. 0: the kernels bound
                                   every access instead (docs/semantics.md). The environment
                                   variable FMHA_CHECK_INDEX=1 turns it on for every plan. Host
                                   backends always check. */
} fmha_plan_options_t;

/** Validate the problem, choose kernels, size the workspace. The plan keeps its own copy
 *  of the problem. opt may be NULL. Statuses: INVALID_PROBLEM, NOT_SUPPORTED, ... with
 *  the message on the context. */
FMHA_API fmha_status_t fmha_plan_create(fmha_context_t *ctx, const fmha_problem_t *p,
                                        const fmha_plan_options_t *opt, fmha_plan_t **out);
FMHA_API void fmha_plan_destroy(fmha_plan_t *plan);
/** Bytes of workspace execute needs (may be 0). */
FMHA_API fmha_status_t fmha_plan_workspace_size(const fmha_plan_t *plan, size_t *bytes);
/** Run the plan. ptrs lists one pointer per tensor role of the problem (order free,
 *  no role twice, no role the problem lacks). workspace may be NULL when the size is 0.
 *  stream must be NULL on the CPU backend. Execute does not allocate or compile.
 *  Errors: INVALID_ARGUMENT (missing/extra/duplicate pointer, outputs overlapping
 *  inputs), WORKSPACE_TOO_SMALL, INVALID_PROBLEM (data-dependent rules such as
 *  cu_seqlens content, checked where the data is visible to the host). The message is
 *  on the plan (fmha_plan_last_error; per-thread use of one plan may interleave it). */
FMHA_API fmha_status_t fmha_plan_execute(const fmha_plan_t *plan, const fmha_tensor_ptr_t *ptrs,
                                         size_t n_ptrs, void *workspace, size_t workspace_bytes,
                                         struct CUstream_st *stream);
/** Human-readable summary: family, shapes, features, kernels per stage, workspace.
 *  snprintf contract: returns the length of the full text, writes at most len bytes
 *  including the NUL. */
FMHA_API size_t fmha_plan_describe(const fmha_plan_t *plan, char *buf, size_t len);
/** Name of the kernel of stage i (0-based); NULL past the last stage. */
FMHA_API const char *fmha_plan_kernel_name(const fmha_plan_t *plan, int stage);
FMHA_API const char *fmha_plan_last_error(const fmha_plan_t *plan);

/* ------------------------------------------------------------- plan cache */

/** A context caches its plans: fmha_plan_create for a problem equal to one planned
 *  before (parameters, tensor dtypes, shapes and strides, and the plan options; data
 *  pointers are not part of a problem) copies the cached plan instead of validating and
 *  selecting again. Least recently used plans go first past the capacity ($FMHA_PLAN_CACHE,
 *  default 256; 0 turns caching off). Registering kernels or loading a tuning database
 *  empties it. Thread-safe. */
typedef struct fmha_plan_cache_stats {
    uint32_t struct_size; /**< sizeof(fmha_plan_cache_stats_t) */
    uint64_t hits, misses;
    size_t entries, capacity;
} fmha_plan_cache_stats_t;

FMHA_API fmha_status_t fmha_context_plan_cache_stats(fmha_context_t *ctx, fmha_plan_cache_stats_t *out);
FMHA_API fmha_status_t fmha_context_plan_cache_clear(fmha_context_t *ctx);

/** Explain kernel selection for a problem: every candidate of every stage with the
 *  reason it was rejected or its estimated cost, and the choice. *text is malloc'd (free
 *  with fmha_free) and is written even when validation or selection fails (the status
 *  says so). opt may be NULL. */
FMHA_API fmha_status_t fmha_explain(fmha_context_t *ctx, const fmha_problem_t *p, const fmha_plan_options_t *opt,
                                    char **text);

/** Since 0.3. The kernels that can run stage `stage` (0-based, in execution order; fmha
 *  explain lists a problem's stages) of a problem on this context: one name per line,
 *  in registration order, unranked, the tuning database not consulted. What `fmha bench
 *  --all` and `fmha tune` measure; each name can be given as force_kernel. *names is
 *  malloc'd (free with fmha_free; "" when none can). INVALID_PROBLEM for an invalid
 *  problem, INVALID_ARGUMENT for a stage the problem does not have. Thread-safe. */
FMHA_API fmha_status_t fmha_kernel_candidates(fmha_context_t *ctx, const fmha_problem_t *p, int stage, char **names);

/** Since 0.3. The problem's class, the key of the tuning database's entries (e.g.
 *  "fwd_bf16_hq128_hv128_causal_batch_sq1024_sk1024": family, dtype, head dims, mask kind,
 *  mode, and the sequence lengths rounded up to powers of two). snprintf contract. */
FMHA_API size_t fmha_problem_class(const fmha_problem_t *p, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* FMHA_FMHA_H */
