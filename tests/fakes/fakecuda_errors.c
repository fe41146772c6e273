/*
 * fakecuda_errors.c: cuGetErrorName and cuGetErrorString, from fakecuda_errors.def.
 * Like the real driver they work before cuInit; an unknown code gives INVALID_VALUE and
 * *pStr = NULL. Thread safe: read-only tables.
 */
#include "fakecuda_internal.h"

struct fc_err {
    CUresult code;
    const char *name;
    const char *text;
};

static const struct fc_err g_errs[] = {
#define FC_ERR(code, text) {code, #code, text},
#include "fakecuda_errors.def"
#undef FC_ERR
};

static const struct fc_err *find(CUresult code)
{
    for (size_t i = 0; i < sizeof g_errs / sizeof g_errs[0]; i++)
        if (g_errs[i].code == code) return &g_errs[i];
    return NULL;
}

FC_API CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    const struct fc_err *e = find(error);
    *pStr = e ? e->name : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FC_API CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    const struct fc_err *e = find(error);
    *pStr = e ? e->text : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
