/* strdist.c: see strdist.h. */
#include "policy/strdist.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

int ncclguard_edit_distance_within(const char *a, const char *b, int limit)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > NG_NAME_MAX || m > NG_NAME_MAX) return 1 << 20;
    /* three rows of the dynamic programme: i-2, i-1 and i */
    int rows[3][NG_NAME_MAX + 1];
    int *pp = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= m; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            int cost = ca != cb;
            int best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            if (prev[j - 1] + cost < best) best = prev[j - 1] + cost;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && pp[j - 2] + 1 < best)
                best = pp[j - 2] + 1;
            cur[j] = best;
        }
        /* every later row is at least this row's minimum: stop once it exceeds limit */
        int low = cur[0];
        for (size_t j = 1; j <= m; j++)
            if (cur[j] < low) low = cur[j];
        if (low > limit) return limit + 1;
        int *t = pp;
        pp = prev;
        prev = cur;
        cur = t;
    }
    return prev[m];
}

int ncclguard_suggest_limit(const char *name)
{
    size_t n = strlen(name);
    return n <= 8 ? 1 : n <= 16 ? 2 : 3;
}

int ncclguard_suggest(const char *name, size_t n, const char *(*get)(size_t i, const void *ctx),
                      const void *ctx, char *out, size_t outlen)
{
    int limit = ncclguard_suggest_limit(name);
    size_t best[3];
    int dist[3], found = 0;
    size_t len = strlen(name);
    for (size_t i = 0; i < n; i++) {
        const char *cand = get(i, ctx);
        size_t clen = strlen(cand);
        /* the distance is at least the difference in length: skip the far ones cheaply */
        if ((clen > len ? clen - len : len - clen) > (size_t)limit) continue;
        int d = ncclguard_edit_distance_within(name, cand, limit);
        if (d > limit || d == 0) continue;
        /* keep the three closest, in order of distance then of appearance */
        int pos = found;
        while (pos > 0 && dist[pos - 1] > d) pos--;
        if (pos >= 3) continue;
        for (int k = (found < 3 ? found : 2); k > pos; k--) {
            best[k] = best[k - 1];
            dist[k] = dist[k - 1];
        }
        best[pos] = i;
        dist[pos] = d;
        if (found < 3) found++;
    }
    /* suggest only the names at the smallest distance */
    int shown = 0;
    size_t used = 0;
    if (outlen) out[0] = '\0';
    for (int k = 0; k < found && dist[k] == dist[0]; k++, shown++) {
        int w = snprintf(out + used, outlen > used ? outlen - used : 0, "%s%s", k ? " or " : "",
                         get(best[k], ctx));
        if (w > 0) used += (size_t)w;
        if (used >= outlen) break;
    }
    return shown;
}
