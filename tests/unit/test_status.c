/* SPDX-License-Identifier: MIT */
/* test_status.c: the status table, version and enum names. */
#include "testing.h"

static void test_status_names_and_messages(void)
{
#define X(name, value, msg)                                                         \
    CHECK(strcmp(fmha_status_name(FMHA_STATUS_##name), "FMHA_STATUS_" #name) == 0); \
    CHECK(strcmp(fmha_status_string(FMHA_STATUS_##name), msg) == 0);               \
    CHECK((int)FMHA_STATUS_##name == value);
    FMHA_STATUS_MAP(X)
#undef X
    CHECK(strcmp(fmha_status_name((fmha_status_t)999), "FMHA_STATUS_?") == 0);
    CHECK(strcmp(fmha_status_string((fmha_status_t)-1), "unknown status") == 0);
}

/* Values are ABI: pin a few so that a reorder of the table fails here. */
static void test_status_values_pinned(void)
{
    CHECK(FMHA_STATUS_SUCCESS == 0);
    CHECK(FMHA_STATUS_OUT_OF_RANGE == 3);
    CHECK(FMHA_STATUS_INVALID_PROBLEM == 4);
    CHECK(FMHA_STATUS_WORKSPACE_TOO_SMALL == 9);
    CHECK(FMHA_STATUS_INTERNAL == 13);
}

static void test_version(void)
{
    CHECK(fmha_version_number() == FMHA_VERSION_NUMBER);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", FMHA_VERSION_MAJOR, FMHA_VERSION_MINOR, FMHA_VERSION_PATCH);
    CHECK(strcmp(fmha_version_string(), want) == 0);
    CHECK_CONTAINS(fmha_build_info(), "backends=cpu");
    CHECK_CONTAINS(fmha_build_info(), "cuda=off");
}

static void test_enum_names(void)
{
    fmha_dtype_t dt;
#define X(name, value, size, str)                                    \
    CHECK(strcmp(fmha_dtype_name(FMHA_DTYPE_##name), str) == 0);      \
    CHECK(fmha_dtype_size(FMHA_DTYPE_##name) == size);               \
    CHECK_STATUS(fmha_dtype_parse(str, &dt), FMHA_STATUS_SUCCESS);   \
    CHECK(dt == FMHA_DTYPE_##name);
    FMHA_DTYPE_MAP(X)
#undef X
    CHECK(fmha_dtype_name(FMHA_DTYPE_NONE) == NULL);
    CHECK(fmha_dtype_size((fmha_dtype_t)77) == 0);
    CHECK_STATUS(fmha_dtype_parse("fp64", &dt), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fmha_dtype_parse(NULL, &dt), FMHA_STATUS_INVALID_ARGUMENT);
    CHECK(strcmp(fmha_family_name(FMHA_FAMILY_BATCH_PREFILL), "batch_prefill") == 0);
    CHECK(fmha_family_name((fmha_family_t)99) == NULL);
    CHECK(strcmp(fmha_tensor_role_name(FMHA_TENSOR_CU_SEQLENS_KV), "cu_seqlens_kv") == 0);
    CHECK(fmha_tensor_role_name((fmha_tensor_role_t)0) == NULL);
    CHECK(fmha_tensor_role_name(FMHA_TENSOR_ROLE_END_) == NULL);
}

int main(void)
{
    RUN(test_status_names_and_messages);
    RUN(test_status_values_pinned);
    RUN(test_version);
    RUN(test_enum_names);
    TEST_MAIN_END();
}
