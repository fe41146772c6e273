/*
 * test_render_output.c: the printers of a finished analysis (cli/render/): what
 * `analyze --json` says of each finding (render/json.c), the text's verdict and
 * summary rows (render/text.c, render/summary.c), and HTML escaping (render/escape.c).
 * The model comes from small hand-written dumps (analyze_dumps.h) read through the
 * real reader and verdict, as `ncclguard analyze` runs them.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/model.h"
#include "analyze_dumps.h"
#include "check_main.h"
#include "render/escape.h"
#include "render/json.h"
#include "render/text.h"

static char g_dir[64];
static struct an g_an;

static void setup(void)
{
    ng_check_tmpdir(g_dir, sizeof g_dir, "render");
}

static void teardown(void)
{
    an_free(&g_an);
    (void)ng_check_rmtree(g_dir);
}

/* Rank r of an n-rank world: completed AllReduce #1, and #2 started (or, with
 * behind, never called). */
static void rank_at(int r, int n, int behind)
{
    struct fdump d = {.rank = r};
    comm(&d, W, r, n, behind ? 1 : 2, 1, NULL);
    op(&d, (struct fop){1, W, 1, 0, 0, "AllReduce", SW, "completed", 0});
    if (!behind) op(&d, (struct fop){2, W, 2, 0, 0, "AllReduce", SW, "started", 0});
    ad_write(g_dir, &d);
}

/* What fn printed of the model, as one string (freed by the caller). */
static char *printed(void (*fn)(const struct an *, FILE *))
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(m);
    fn(&g_an, m);
    ck_assert_int_eq(fclose(m), 0);
    return text;
}

static void print_json(const struct an *a, FILE *f)
{
    ck_assert_int_eq(rn_print_json(a, f), 0);
}

/* The JSON document of the analysis. */
static json_t *analysis_json(void)
{
    char *text = printed(print_json);
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    ck_assert_msg(j != NULL, "not JSON: %s: %s", e.text, text);
    free(text);
    return j;
}

/* The verdict's first culprit in j. */
static json_t *first_culprit(json_t *j)
{
    return json_array_get(json_object_get(json_object_get(j, "verdict"), "culprits"), 0);
}

/* The first culprit's cause and global rank are these. */
static void culprit_is(json_t *c, const char *cause, int rank)
{
    ck_assert_str_eq(json_string_value(json_object_get(c, "cause")), cause);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "rank")), rank);
}

/* Analysed, the dumps have a culprit first with this cause and rank, whose key is null. */
static void culprit_has_null(const char *cause, int rank, const char *key)
{
    ck_assert_int_eq(ad_analyze(&g_an, g_dir, NULL), AN_EXIT_CULPRIT);
    json_t *j = analysis_json();
    json_t *c = first_culprit(j);
    culprit_is(c, cause, rank);
    ck_assert(json_is_null(json_object_get(c, key)));
    json_decref(j);
}

NG_TEST(json_names_the_missing_rank_and_its_op)
{
    for (int r = 0; r < 4; r++) rank_at(r, 4, r == 2);
    ck_assert_int_eq(ad_analyze(&g_an, g_dir, NULL), AN_EXIT_CULPRIT);
    json_t *j = analysis_json();
    ck_assert_str_eq(json_string_value(json_object_get(j, "schema")), "ncclguard.analysis/1");
    json_t *v = json_object_get(j, "verdict");
    ck_assert(json_is_false(json_object_get(v, "healthy")));
    json_t *c = first_culprit(j);
    ck_assert_int_eq(json_array_size(json_object_get(v, "culprits")), 1);
    culprit_is(c, "missing", 2);
    ck_assert_str_eq(json_string_value(json_object_get(c, "op")), "AllReduce");
    ck_assert_int_eq(json_integer_value(json_object_get(c, "seq")), 2);
    ck_assert(json_is_false(json_object_get(c, "p2p")));
    ck_assert(json_is_null(json_object_get(c, "peer")));
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(c, "dump")), "/ncclguard-r2-"));
    json_decref(j);
}
END_TEST

NG_TEST(json_has_no_dump_for_a_rank_without_one)
{
    /* rank 3 of 4 left no dump: a no_dump finding, about no op of its own */
    for (int r = 0; r < 3; r++) rank_at(r, 4, 0);
    culprit_has_null("no_dump", 3, "dump");
}
END_TEST

NG_TEST(json_has_no_op_for_a_crash)
{
    /* rank 1's dump was written by the crash handler: a finding about no op */
    for (int r = 0; r < 3; r++) {
        struct fdump d = {.rank = r, .reason = r == 1 ? "crash" : NULL};
        comm(&d, W, r, 3, 2, 1, NULL);
        op(&d, (struct fop){1, W, 1, 0, 0, "AllReduce", SW, "completed", 0});
        op(&d, (struct fop){2, W, 2, 0, 0, "AllReduce", SW, "started", 0});
        ad_write(g_dir, &d);
    }
    culprit_has_null("crashed", 1, "op");
}
END_TEST

NG_TEST(text_starts_with_the_verdict_and_groups_ranks)
{
    for (int r = 0; r < 6; r++) rank_at(r, 6, r == 4);
    ck_assert_int_eq(ad_analyze(&g_an, g_dir, NULL), AN_EXIT_CULPRIT);
    char *text = printed(rn_print_text);
    ck_assert_msg(!strncmp(text, "culprit: rank 4 (host h, pid 1004): ", 36), "%s", text);
    /* the summary: the five waiting ranks in one row, as a range */
    ck_assert_msg(strstr(text, "0-3,5"), "no row of ranks 0-3,5 in:\n%s", text);
    free(text);
}
END_TEST

NG_TEST(healthy_text_and_json)
{
    for (int r = 0; r < 2; r++) {
        struct fdump d = {.rank = r, .reason = "exit"};
        comm(&d, W, r, 2, 1, 1, NULL);
        op(&d, (struct fop){1, W, 1, 0, 0, "AllReduce", SW, "completed", 0});
        ad_write(g_dir, &d);
    }
    ck_assert_int_eq(ad_analyze(&g_an, g_dir, NULL), AN_EXIT_HEALTHY);
    char *text = printed(rn_print_verdict);
    ck_assert_msg(!strncmp(text, "healthy: 2 ranks", 16), "%s", text);
    free(text);
    json_t *j = analysis_json();
    ck_assert(json_is_true(json_object_get(json_object_get(j, "verdict"), "healthy")));
    json_decref(j);
}
END_TEST

static void escape_sample(const struct an *a, FILE *f)
{
    (void)a;
    rn_escape(f, "<module> & \"x\" 'y' ok");
    rn_escape(f, NULL);
}

NG_TEST(html_escapes_every_markup_character)
{
    char *text = printed(escape_sample);
    ck_assert_str_eq(text, "&lt;module&gt; &amp; &quot;x&quot; &#39;y&#39; ok");
    free(text);
}
END_TEST

int main(void)
{
    return ng_check_run(
        ng_check_fixture_suite("render_output", "printers", 30, setup, teardown, NULL));
}
