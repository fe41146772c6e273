/*
 * jsonread_impl.h: what the two backends of jsonread.h share. A value and a
 * parser start with a table of the backend's functions; jsonread.c dispatches.
 */
#ifndef NCCLGUARD_JSONREAD_IMPL_H
#define NCCLGUARD_JSONREAD_IMPL_H

#include <stddef.h>

#include "jsonread.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ng_jv_ops {
    int (*kind)(ng_jv *v);
    int (*integer)(ng_jv *v, int64_t *out);
    int (*boolean)(ng_jv *v, int *out);
    int (*string)(ng_jv *v, const char **s, size_t *len);
    int (*object)(ng_jv *v, const struct ng_jkeys *keys, ng_jmember_fn fn, void *ctx);
    int (*array)(ng_jv *v, ng_jelem_fn fn, void *ctx);
    int (*record)(ng_jv *v, const struct ng_jrecord *rec, void *out, uint64_t *seen, int *bad);
};

struct ng_jv {
    const struct ng_jv_ops *ops;
};

struct ng_jparser {
    void (*free)(ng_jparser *p);
    int (*parse)(ng_jparser *p, const char *buf, size_t len, int (*root)(void *, ng_jv *),
                 void *ctx, char *err, size_t errlen);
};

/* The index of the name s[0..len) in k, or -1; *hint is the last index found. */
int ng_jkeys_find(const struct ng_jkeys *k, const char *s, size_t len, int *hint);

/* The index of the member named s[0..len) in rec, or -1; *hint as above. */
int ng_jrecord_find(const struct ng_jrecord *rec, const char *s, size_t len, int *hint);

ng_jparser *ng_jparser_new_simdjson(void);
ng_jparser *ng_jparser_new_jansson(void);

#ifdef __cplusplus
}
#endif

#endif
