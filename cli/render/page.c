/*
 * render/page.c: `ncclguard report`'s page: the verdict first, then a picture of
 * each communicator that shows where its ranks stopped (render/svg.c), then the
 * ranks' stacks, the summary table and the evidence in words (render/html.c).
 */
#include "render/page.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "render/escape.h"
#include "render/html.h"
#include "render/svg.h"
#include "render/text.h"

/* Communicators drawn at most, those with most to show first. */
#define RN_MAX_COMMS 24

static const char style[] =
    "body{font:14px/1.4 sans-serif;margin:24px;color:#222;max-width:1100px}"
    "h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}"
    "h3{font-size:15px;margin-bottom:4px}h4{font-size:13px;margin:8px 0 2px}"
    ".verdict{font-size:16px;padding:10px 14px;border-radius:6px;background:#eef6ee;"
    "border:1px solid #6a6}.verdict.bad{background:#fdecec;border-color:#c33}"
    "pre{background:#f6f6f6;padding:6px 8px;overflow-x:auto;font-size:12px}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;"
    "font-size:13px;vertical-align:top}"
    "svg.comm text{font:12px sans-serif;fill:#222}svg.comm text.head{fill:#555}"
    "svg.comm .done{fill:#5a5}svg.comm .queued{fill:#e9b23b}svg.comm .none{fill:#ddd}"
    "svg.comm .culprit text{fill:#c00;font-weight:bold}"
    "svg.comm .culprit rect{stroke:#c00;stroke-width:2}"
    "summary{cursor:pointer}summary.culprit{color:#c00;font-weight:bold}";

static void verdict(const struct an *a, FILE *f)
{
    int bad = a->nculprits || a->hang;
    fprintf(f, "<h1>ncclguard report: job ");
    rn_escape(f, a->job ? an_intern_get(&a->strs, a->job) : "?");
    fprintf(f, "</h1>\n<div class=\"verdict%s\" id=\"verdict\">\n", bad ? " bad" : "");
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (m) {
        rn_print_verdict(a, m);
        fclose(m);
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            fputs("<p>", f);
            rn_escape(f, line);
            fputs("</p>\n", f);
        }
        free(text);
    }
    fprintf(f, "</div>\n<p>%zu dumps read of %zu files; %zu communicators; %llu ops.</p>\n",
            a->nranks, a->files, a->ncomms, (unsigned long long)a->nops);
    if (a->nbad) {
        fputs("<h3>Files not used</h3>\n<ul>\n", f);
        for (size_t i = 0; i < a->nbad && i < 100; i++) {
            fputs("<li>", f);
            rn_escape(f, a->bad[i]);
            fputs("</li>\n", f);
        }
        fputs("</ul>\n", f);
    }
}

static void comms(const struct an *a, FILE *f)
{
    size_t drawn = 0, quiet = 0;
    fputs("<h2>Communicators</h2>\n", f);
    for (int pass = 2; pass >= 0; pass--)
        for (uint32_t ci = 0; ci < a->ncomms; ci++) {
            if (rn_comm_worth(a, ci) != pass) continue; /* the ones with most to show first */
            if (drawn >= RN_MAX_COMMS) {
                quiet++;
                continue;
            }
            const struct an_comm *c = &a->comms[ci];
            const char *name = an_intern_get(&a->strs, c->name);
            fprintf(f, "<h3>comm %016llx", (unsigned long long)c->id);
            if (name) {
                fputs(" \"", f);
                rn_escape(f, name);
                fputs("\"", f);
            }
            fprintf(f, " (%lld ranks, %u dumped)</h3>\n", (long long)c->nranks, c->nmembers);
            rn_comm_svg(a, ci, f);
            drawn++;
        }
    if (quiet) fprintf(f, "<p>%zu more communicators not drawn.</p>\n", quiet);
}

int rn_write_page(const struct an *a, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "ncclguard report: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            "<title>ncclguard report</title>\n<style>%s</style></head><body>\n",
            style);
    verdict(a, f);
    comms(a, f);
    fputs("<h2>Stacks</h2>\n", f);
    rn_stacks(a, f);
    fputs("<h2>Summary</h2>\n", f);
    rn_summary(a, f);
    fputs("<h2>Evidence</h2>\n", f);
    rn_evidence(a, f);
    fputs("</body></html>\n", f);
    if (fclose(f) != 0) {
        fprintf(stderr, "ncclguard report: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}
