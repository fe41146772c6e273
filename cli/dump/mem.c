/*
 * dump/mem.c: see dump/mem.h. Strings go into blocks of 16 KiB (or one of their
 * own), arrays are each one allocation that the dump tracks.
 */
#include "dump/mem.h"

#include <stdlib.h>
#include <string.h>

struct mem_block {
    struct mem_block *next;
    size_t used, size;
    char data[];
};

char *dr_mem_strdup(struct dr_mem *m, const char *s, size_t len)
{
    struct mem_block *b = m->blocks;
    if (!b || b->size - b->used < len + 1) {
        size_t size = len + 1 > 16384 ? len + 1 : 16384;
        b = malloc(sizeof *b + size);
        if (!b) return NULL;
        b->next = m->blocks;
        b->used = 0;
        b->size = size;
        m->blocks = b;
    }
    char *p = b->data + b->used;
    memcpy(p, s, len);
    p[len] = '\0';
    b->used += len + 1;
    return p;
}

void *dr_mem_push(struct dr_mem *m, void **vec, size_t *n, size_t *cap, size_t el)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        void *p = realloc(*vec, ncap * el);
        if (!p) return NULL;
        if (!*vec) { /* a new array: m owns it from now on */
            if (m->nvecs == m->capvecs) {
                size_t nc = m->capvecs ? m->capvecs * 2 : 16;
                void **nv = realloc(m->vecs, nc * sizeof *nv);
                if (!nv) {
                    free(p);
                    return NULL;
                }
                m->vecs = nv;
                m->capvecs = nc;
            }
            m->vecs[m->nvecs++] = p;
        } else {
            for (size_t i = m->nvecs; i-- > 0;)
                if (m->vecs[i] == *vec) {
                    m->vecs[i] = p;
                    break;
                }
        }
        *vec = p;
        *cap = ncap;
    }
    char *e = (char *)*vec + (*n)++ * el;
    memset(e, 0, el);
    return e;
}

void dr_mem_free(struct dr_mem *m)
{
    for (struct mem_block *b = m->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    for (size_t i = 0; i < m->nvecs; i++) free(m->vecs[i]);
    free(m->vecs);
}
