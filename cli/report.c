/*
 * report.c: `ncclguard report DIR -o FILE`: the analysis of `ncclguard analyze` as
 * one self-contained HTML page (no script, no style sheet, font or image fetched:
 * it opens from a mail attachment): the verdict first, then a picture of each
 * communicator that shows where its ranks stopped, then the ranks' stacks, the
 * summary table and the evidence in words.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report.h"

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
    rp_text(f, a->job ? ng_intern_get(&a->strs, a->job) : "?");
    fprintf(f, "</h1>\n<div class=\"verdict%s\" id=\"verdict\">\n", bad ? " bad" : "");
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (m) {
        an_print_verdict(a, m);
        fclose(m);
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            fputs("<p>", f);
            rp_text(f, line);
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
            rp_text(f, a->bad[i]);
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
            if (rp_comm_worth(a, ci) != pass) continue; /* the ones with most to show first */
            if (drawn >= RP_MAX_COMMS) {
                quiet++;
                continue;
            }
            const struct an_comm *c = &a->comms[ci];
            const char *name = ng_intern_get(&a->strs, c->name);
            fprintf(f, "<h3>comm %016llx", (unsigned long long)c->id);
            if (name) {
                fputs(" \"", f);
                rp_text(f, name);
                fputs("\"", f);
            }
            fprintf(f, " (%lld ranks, %u dumped)</h3>\n", (long long)c->nranks, c->nmembers);
            rp_comm_svg(a, ci, f);
            drawn++;
        }
    if (quiet) fprintf(f, "<p>%zu more communicators not drawn.</p>\n", quiet);
}

static int write_page(const struct an *a, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "ncclguard report: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<title>ncclguard report</title>\n<style>%s</style></head><body>\n", style);
    verdict(a, f);
    comms(a, f);
    fputs("<h2>Stacks</h2>\n", f);
    rp_stacks(a, f);
    fputs("<h2>Summary</h2>\n", f);
    rp_summary(a, f);
    fputs("<h2>Evidence</h2>\n", f);
    rp_evidence(a, f);
    fputs("</body></html>\n", f);
    if (fclose(f) != 0) {
        fprintf(stderr, "ncclguard report: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ncclguard report DIR -o FILE [--incident ID] [--launcher-log FILE]\n\n"
            "Writes the analysis of `ncclguard analyze DIR` as one self-contained HTML file:\n"
            "the verdict, a picture per communicator of where each rank stopped (the last seq\n"
            "it enqueued and completed; identical ranks are one bar, the culprit in red), the\n"
            "ranks' stacks (identical ones grouped), and the evidence. No network fetches.\n"
            "Options as for analyze (--incident, --launcher-log, --parser, --threads).\n"
            "Exit status: as analyze's (0 healthy, 1 culprit, 2 no culprit, 3 unusable input,\n"
            "64 usage); the file is written in the first three cases.\n");
}

int ncclguard_cli_report(int argc, char **argv)
{
    struct an_opts o;
    const char *dir, *out;
    int rc = an_parse_args(argc, argv, &o, &dir, NULL, &out);
    if (rc) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : NG_EXIT_USAGE;
    }
    struct an a;
    an_init(&a, &o);
    int status = an_run(&a, dir, "report");
    if (status != AN_EXIT_UNUSABLE) {
        if (write_page(&a, out)) status = AN_EXIT_UNUSABLE;
        else printf("ncclguard report: %s\n", out);
    }
    an_free(&a);
    return status;
}
