/*
 * secret.h: which environment variables may hold a secret, by their name. A
 * name that contains PASSWORD, PASSWD, TOKEN, SECRET, KEY or CREDENTIAL,
 * anywhere and in any case (NCCL_PASSWORD, TORCH_NCCL_TOKEN, AWS_SECRET_ACCESS_KEY,
 * my_api_key), is one: its value is never written anywhere (logs, dumps, the
 * policy's marker for children), not even as a hash.
 *
 * Threads: any, signal handlers included (no locale, no library call).
 */
#ifndef NCCLGUARD_SECRET_H
#define NCCLGUARD_SECRET_H

#include <stddef.h>

/* Whether the first len bytes of name contain the upper-case word w, in any case. */
static inline int ng_secret_has_word(const char *name, size_t len, const char *w)
{
    size_t wl = 0;
    while (w[wl]) wl++;
    for (size_t i = 0; i + wl <= len; i++) {
        size_t k = 0;
        while (k < wl) {
            char c = name[i + k];
            if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
            if (c != w[k]) break;
            k++;
        }
        if (k == wl) return 1;
    }
    return 0;
}

/* Whether the variable named by the first len bytes of name may hold a secret. */
static inline int ng_secret_name(const char *name, size_t len)
{
    static const char *const words[] = {"PASSWORD", "PASSWD", "TOKEN",
                                        "SECRET",   "KEY",    "CREDENTIAL"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (ng_secret_has_word(name, len, words[i])) return 1;
    return 0;
}

#endif
