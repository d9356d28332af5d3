/*
 * test_margins.c - the top-k boundary figures (harness/measure/margins.c) on
 * constructed rows with hand-computed answers, and `dsv4q margins` end to
 * end on a synthesized tiny checkpoint.
 *
 *  - BF16 quanta: adjacent codes are 1 apart across a binade boundary
 *    (2.0 = 0x4000 vs 0x3fff), one binade is 128 (1.0 vs 0.5), +0 and -0
 *    are the same ordinal, the count crosses zero one value at a time,
 *    unrounded inputs are rounded to BF16 (RNE) first;
 *  - a row whose k-th and (k+1)-th scores are equal: margin 0 and the
 *    tie-run counted inside and outside the cut;
 *  - margins of exactly 1 and 13 quanta built from BF16 codes c, c-1, c-13;
 *  - fewer visible rows than k (prefill masks): no (k+1)-th score, margin
 *    n/a, tie-run on the visible rows only; visible == k likewise;
 *  - a pick list that is not a top-k (a rewritten selection): negative
 *    margin; masked / duplicate / out-of-range picks are ignored;
 *  - agreement with the oracle's own top-k (dsv4q_topk_f64) on a BF16 row
 *    full of ties: kth / next are the sorted k-th and (k+1)-th scores;
 *  - flips (set difference, -1 ignored) and nearest-rank percentiles;
 *  - the CLI on tiny (2 ratio-4 layers, index_topk 8) with --prompt-len
 *    120 --decode 4: exit 0, a CSV row per (layer, position) with
 *    inside + outside == tie-run and distinct <= k, rows without an
 *    f32/f64 flip have attn_nrms exactly 0, well-formed SVG, JSON, a
 *    receipt; bad --positions / --width exit 2.
 */
#include "tests/testutil.h"
#include "tests/tinyfix.h"
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cmds.h"
#include "harness/measure/margins.h"
#include "io/config.h"
#include "io/synth.h"
#include "oracle/formats.h"
#include "oracle/ops.h"

static double bf(uint16_t code) { return dsv4q_bf16_decode(code); }

static void quanta_definition(void **state)
{
    (void)state;
    assert_int_equal(dsv4q_bf16_ordinal(0.0), 0);
    assert_int_equal(dsv4q_bf16_ordinal(-0.0), 0);
    assert_int_equal(dsv4q_bf16_ordinal(1.0), 0x3f80);
    assert_int_equal(dsv4q_bf16_ordinal(-1.0), -0x3f80);
    assert_int_equal(dsv4q_bf16_ordinal(INFINITY), 0x7f80);
    assert_int_equal(dsv4q_bf16_ordinal(-INFINITY), -0x7f80);
    /* different binades: 2.0 and the BF16 just below it are adjacent */
    assert_true(bf(0x3fff) < 2.0 && bf(0x3fff) > 1.99);
    assert_int_equal(dsv4q_bf16_quanta(2.0, bf(0x3fff)), 1);
    assert_int_equal(dsv4q_bf16_quanta(1.0, 0.5), 128);
    assert_int_equal(dsv4q_bf16_quanta(4.0, 1.0), 256);
    assert_int_equal(dsv4q_bf16_quanta(0.5, 1.0), -128);
    /* zero: the smallest subnormals either side are 1 from zero, 2 apart */
    assert_int_equal(dsv4q_bf16_quanta(bf(0x0001), 0.0), 1);
    assert_int_equal(dsv4q_bf16_quanta(0.0, bf(0x8001)), 1);
    assert_int_equal(dsv4q_bf16_quanta(bf(0x0001), bf(0x8001)), 2);
    assert_int_equal(dsv4q_bf16_quanta(0.0, -0.0), 0);
    /* unrounded inputs are rounded first: 1 + 2^-10 is BF16 1.0; 1 + 3*2^-8
     * (spacing 2^-7 in [1, 2)) is 1 + 1.5 quanta: the midpoint between codes
     * 0x3f81 and 0x3f82 -> even 0x3f82; 1 + 3*2^-9 is 0.75 quanta -> 0x3f81 */
    assert_int_equal(dsv4q_bf16_quanta(1.0 + ldexp(1, -10), 1.0), 0);
    assert_int_equal(dsv4q_bf16_ordinal(1.0 + 3 * ldexp(1, -8)), 0x3f82);
    assert_int_equal(dsv4q_bf16_ordinal(1.0 + 3 * ldexp(1, -9)), 0x3f81);
}

/* Declared score dtypes (dsv4q_score_ordinal, dsv4q_margin_row_dt), by
 * hand: F16 1.0 = 0x3C00 and its neighbour below 0x3BFF = 1 - 2^-11 are 1
 * quantum apart, 1.0 and 0.5 (0x3800) 1024 (one binade = 2^10 codes);
 * F32 1.0 and nextafterf(1, 0) 1 quantum, across zero +-2^-149 2; BF16
 * keeps dsv4q_bf16_ordinal. At F16 granularity 1 + 2^-12 rounds to 1.0
 * (a quarter of F16's ulp 2^-10 at 1), so a row {1 + 2^-12, 1.0} with the
 * first picked is a tie-run of 2 (1 outside, margin 0) in F16, and a clean
 * cut of 2^11 F32 quanta (2^-12 / 2^-23) in F32. */
static void declared_score_dtypes(void **state)
{
    (void)state;
    assert_int_equal(dsv4q_score_ordinal(DSV4Q_DT_F16, 1.0) - dsv4q_score_ordinal(DSV4Q_DT_F16, 1.0 - 0x1p-11), 1);
    assert_int_equal(dsv4q_score_ordinal(DSV4Q_DT_F16, 1.0) - dsv4q_score_ordinal(DSV4Q_DT_F16, 0.5), 1024);
    assert_int_equal(dsv4q_score_ordinal(DSV4Q_DT_F16, 1.0), 0x3C00);
    assert_int_equal(dsv4q_score_ordinal(DSV4Q_DT_F16, -1.0), -0x3C00);
    assert_int_equal(dsv4q_score_ordinal(DSV4Q_DT_F32, 1.0) - dsv4q_score_ordinal(DSV4Q_DT_F32, 1.0 - 0x1p-24), 1);
    assert_int_equal(dsv4q_score_ordinal(DSV4Q_DT_F32, 0x1p-149) - dsv4q_score_ordinal(DSV4Q_DT_F32, -0x1p-149), 2);
    assert_int_equal(dsv4q_score_ordinal(DSV4Q_DT_BF16, 3.0), dsv4q_bf16_ordinal(3.0));
    const double row[2] = {1.0 + 0x1p-12, 1.0};
    const int32_t pick[1] = {0};
    dsv4q_margin m;
    assert_int_equal(dsv4q_margin_row_dt(row, 2, pick, 1, DSV4Q_DT_F16, &m), 0);
    assert_int_equal(m.margin, 0);
    assert_int_equal(m.tie_total, 2);
    assert_int_equal(m.tie_outside, 1);
    assert_int_equal(dsv4q_margin_row_dt(row, 2, pick, 1, DSV4Q_DT_F32, &m), 0);
    assert_int_equal(m.margin, 2048);
    assert_int_equal(m.tie_total, 1);
    assert_int_equal(m.tie_outside, 0);
    /* the raw rule (dsv4q_margin_row) sees no tie either */
    assert_int_equal(dsv4q_margin_row(row, 2, pick, 1, &m), 0);
    assert_int_equal(m.tie_total, 1);
    assert_int_equal(dsv4q_margin_row_dt(row, 2, pick, 1, DSV4Q_DT_F64, &m), -1);
}

static void equal_kth_and_next(void **state)
{
    (void)state;
    const double s[7] = {5, 4, 3, 3, 3, 3, 1};
    const int32_t p[4] = {0, 1, 2, 3};
    dsv4q_margin m;
    assert_int_equal(dsv4q_margin_row(s, 7, p, 4, &m), 0);
    assert_int_equal(m.k, 4);
    assert_int_equal(m.visible, 7);
    assert_int_equal(m.npicks, 4);
    assert_true(m.kth == 3.0 && m.next == 3.0);
    assert_int_equal(m.has_next, 1);
    assert_int_equal(m.margin, 0);
    assert_int_equal(m.tie_total, 4);
    assert_int_equal(m.tie_inside, 2);
    assert_int_equal(m.tie_outside, 2);
    assert_int_equal(m.distinct, 3);
    /* the pick order does not matter, and a cut at the end of the run
     * (k = 6) has the whole run inside and margin 3 -> 1 */
    const int32_t p6[6] = {5, 3, 0, 4, 2, 1};
    assert_int_equal(dsv4q_margin_row(s, 7, p6, 6, &m), 0);
    assert_true(m.kth == 3.0 && m.next == 1.0);
    assert_int_equal(m.margin, dsv4q_bf16_quanta(3.0, 1.0));
    assert_int_equal(m.margin, 0x4040 - 0x3f80);   /* 3.0 = 0x4040, 1.0 = 0x3f80: 192 */
    assert_int_equal(m.tie_total, 4);
    assert_int_equal(m.tie_inside, 4);
    assert_int_equal(m.tie_outside, 0);
}

static void margins_of_1_and_13_quanta(void **state)
{
    (void)state;
    const uint16_t c = 0x4049;   /* 3.140625 */
    for (int d = 1; d <= 13; d += 12) {
        /* k = 3: picks are the three largest, the (k+1)-th is code c - d */
        double s[6] = {bf(c + 40), bf(c), -INFINITY, bf(c - d), bf(c + 7), bf(c - d - 30)};
        const int32_t p[3] = {4, 0, 1};
        dsv4q_margin m;
        assert_int_equal(dsv4q_margin_row(s, 6, p, 3, &m), 0);
        assert_true(m.kth == bf(c));
        assert_true(m.next == bf(c - d));
        assert_int_equal(m.margin, d);
        assert_int_equal(m.visible, 5);
        assert_int_equal(m.tie_total, 1);
        assert_int_equal(m.tie_inside, 1);
        assert_int_equal(m.tie_outside, 0);
        assert_int_equal(m.distinct, 3);
    }
    /* the same in a different binade, negative scores: -1.0 vs the next
     * value below it (-1.0078125 = 0xbf81) is 1 quantum */
    double s[3] = {-1.0, bf(0xbf81), -2.0};
    const int32_t p[1] = {0};
    dsv4q_margin m;
    assert_int_equal(dsv4q_margin_row(s, 3, p, 1, &m), 0);
    assert_int_equal(m.margin, 1);
}

static void fewer_visible_than_k(void **state)
{
    (void)state;
    /* a prefill row that sees 2 of 6 compressed rows, k = 4: two picks, then -1 */
    const double s[6] = {2.0, 1.0, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    const int32_t p[4] = {0, 1, -1, -1};
    dsv4q_margin m;
    assert_int_equal(dsv4q_margin_row(s, 6, p, 4, &m), 0);
    assert_int_equal(m.visible, 2);
    assert_int_equal(m.npicks, 2);
    assert_true(m.kth == 1.0);
    assert_int_equal(m.has_next, 0);
    assert_true(isnan(m.next));
    assert_int_equal(m.margin, -1);
    assert_int_equal(m.tie_total, 1);
    assert_int_equal(m.tie_inside, 1);
    assert_int_equal(m.tie_outside, 0);
    assert_int_equal(m.distinct, 2);
    /* equal visible scores, all picked: the run is all inside */
    const double e[4] = {7.0, 7.0, 7.0, -INFINITY};
    const int32_t pe[4] = {0, 1, 2, -1};
    assert_int_equal(dsv4q_margin_row(e, 4, pe, 4, &m), 0);
    assert_int_equal(m.has_next, 0);
    assert_int_equal(m.tie_total, 3);
    assert_int_equal(m.tie_inside, 3);
    assert_int_equal(m.tie_outside, 0);
    assert_int_equal(m.distinct, 1);
    /* visible == k exactly: still no (k+1)-th */
    const int32_t p2[2] = {1, 0};
    assert_int_equal(dsv4q_margin_row(s, 6, p2, 2, &m), 0);
    assert_int_equal(m.has_next, 0);
    assert_int_equal(m.margin, -1);
    /* nothing visible (the first prefill rows): no cut at all */
    const int32_t none[2] = {-1, -1};
    assert_int_equal(dsv4q_margin_row(s + 2, 4, none, 2, &m), 0);
    assert_int_equal(m.visible, 0);
    assert_int_equal(m.npicks, 0);
    assert_true(isnan(m.kth));
    assert_int_equal(m.has_next, 0);
    assert_int_equal(m.tie_total + m.distinct, 0);
    /* T = 0, k = 0 (a call before the first compressed row) */
    assert_int_equal(dsv4q_margin_row(NULL, 0, NULL, 0, &m), 0);
    assert_int_equal(m.visible + m.npicks, 0);
    assert_int_equal(dsv4q_margin_row(s, -1, p, 4, &m), -1);
}

static void rewritten_picks_and_bad_entries(void **state)
{
    (void)state;
    const double s[5] = {4.0, 3.0, 2.0, 1.0, -INFINITY};
    /* picks {0, 2}: kth 2.0, next = 3.0 (row 1 unpicked) -> negative margin */
    const int32_t p[2] = {2, 0};
    dsv4q_margin m;
    assert_int_equal(dsv4q_margin_row(s, 5, p, 2, &m), 0);
    assert_true(m.kth == 2.0 && m.next == 3.0);
    assert_int_equal(m.margin, -dsv4q_bf16_quanta(3.0, 2.0));
    assert_true(m.margin < 0);
    /* a masked pick, an out-of-range pick and a duplicate are ignored */
    const int32_t q[5] = {0, 4, 9, 0, 1};
    assert_int_equal(dsv4q_margin_row(s, 5, q, 5, &m), 0);
    assert_int_equal(m.npicks, 2);
    assert_true(m.kth == 3.0 && m.next == 2.0);
    assert_int_equal(m.distinct, 2);
}

/* The figures agree with the oracle's top-k on a BF16 row full of ties. */
static void agrees_with_oracle_topk(void **state)
{
    (void)state;
    enum { T = 400, K = 64 };
    double s[T], sorted[T];
    int32_t pick[K];
    uint64_t z = 12345;
    for (int t = 0; t < T; t++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        /* 40 distinct BF16 values in [1, 1.3): ~10 copies of each */
        s[t] = t % 17 == 5 ? -INFINITY : bf((uint16_t)(0x3f80 + (z >> 33) % 40));
    }
    assert_int_equal(dsv4q_topk_f64(s, 1, T, K, pick), 0);
    int n = 0;
    for (int t = 0; t < T; t++)
        if (isfinite(s[t])) sorted[n++] = s[t];
    for (int i = 0; i < n; i++)   /* descending insertion sort */
        for (int j = i; j > 0 && sorted[j] > sorted[j - 1]; j--) {
            double x = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = x;
        }
    dsv4q_margin m;
    assert_int_equal(dsv4q_margin_row(s, T, pick, K, &m), 0);
    assert_int_equal(m.visible, n);
    assert_true(m.kth == sorted[K - 1]);
    assert_true(m.next == sorted[K]);
    assert_int_equal(m.margin, dsv4q_bf16_quanta(sorted[K - 1], sorted[K]));
    long total = 0, before = 0;
    for (int i = 0; i < n; i++) {
        total += sorted[i] == m.kth;
        before += i < K && sorted[i] == m.kth;
    }
    assert_int_equal(m.tie_total, total);
    assert_int_equal(m.tie_inside, before);
    assert_int_equal(m.tie_inside + m.tie_outside, m.tie_total);
    long distinct = 1;
    for (int i = 1; i < K; i++) distinct += sorted[i] != sorted[i - 1];
    assert_int_equal(m.distinct, distinct);
    assert_true(m.distinct <= K);
    /* the tie rule: inside the run the LOWER row indices are picked */
    long last_in = -1, first_out = T;
    for (int t = 0; t < T; t++) {
        if (s[t] != m.kth) continue;
        int in = 0;
        for (int j = 0; j < K; j++) in |= pick[j] == t;
        if (in) last_in = t;
        else if (t < first_out) first_out = t;
    }
    assert_true(last_in < first_out);
}

static void flips_and_percentiles(void **state)
{
    (void)state;
    const int32_t a[4] = {1, 2, 3, -1}, b[4] = {3, 4, -1, -1}, c[4] = {3, 2, 1, -1};
    assert_int_equal(dsv4q_pick_flips(a, 4, b, 4), 2);
    assert_int_equal(dsv4q_pick_flips(b, 4, a, 4), 1);
    assert_int_equal(dsv4q_pick_flips(a, 4, c, 4), 0);   /* order is not part of the set */
    const int32_t d[3] = {7, 7, 8};
    assert_int_equal(dsv4q_pick_flips(d, 3, a, 4), 2);   /* duplicates count once */
    assert_int_equal(dsv4q_pick_flips(a, 0, b, 4), 0);
    double v[5] = {5, 1, 3, 2, 4}, tmp[10];
    assert_true(dsv4q_percentile(v, 5, 0.5, tmp) == 3);
    assert_true(dsv4q_percentile(v, 5, 0.9, tmp) == 5);
    assert_true(dsv4q_percentile(v, 5, 1.0, tmp) == 5);
    double w[10] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
    assert_true(dsv4q_percentile(w, 10, 0.5, tmp) == 5);   /* lower median */
    assert_true(dsv4q_percentile(w, 10, 0.9, tmp) == 9);
    assert_true(isnan(dsv4q_percentile(w, 0, 0.5, tmp)));
    assert_true(v[0] == 5);   /* input untouched */
}

/* ---- the CLI on tiny ---- */

static char root[256], tiny[300];

static int setup(void **state)
{
    (void)state;
    return tinyfix_make(root, sizeof root, tiny, sizeof tiny, "margins", "tiny", 3);
}

static int teardown(void **state)
{
    (void)state;
    return tinyfix_remove(root);
}

#define call tinyfix_call

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

/* A small XML well-formedness check: every tag is closed in order, the
 * root is <svg ...>, attribute values are quoted, text has no raw '<' and
 * only the five predefined entities; nothing but whitespace after the
 * root. Returns the number of elements, or -1. */
static int xml_well_formed(const char *s, int *rects, int *groups)
{
    char stack[64][32];
    int depth = 0, elems = 0, closed_root = 0;
    *rects = *groups = 0;
    while (*s) {
        if (*s != '<') {
            if (closed_root && !strchr(" \t\r\n", *s)) return -1;
            if (depth == 0 && !strchr(" \t\r\n", *s)) return -1;
            if (*s == '&') {
                static const char *const ent[] = {"&lt;", "&gt;", "&amp;", "&quot;", "&apos;"};
                int ok = 0;
                for (int i = 0; i < 5; i++) ok |= !strncmp(s, ent[i], strlen(ent[i]));
                if (!ok) return -1;
            }
            s++;
            continue;
        }
        if (closed_root) return -1;
        if (s[1] == '/') {
            const char *e = strchr(s, '>');
            if (!e || depth == 0) return -1;
            size_t n = (size_t)(e - s - 2);
            if (n != strlen(stack[depth - 1]) || strncmp(s + 2, stack[depth - 1], n)) return -1;
            depth--;
            if (depth == 0) closed_root = 1;
            s = e + 1;
            continue;
        }
        const char *p = s + 1;
        size_t n = strcspn(p, " \t\n/>");
        if (n == 0 || n >= sizeof stack[0]) return -1;
        char name[32];
        memcpy(name, p, n);
        name[n] = 0;
        if (elems == 0 && strcmp(name, "svg")) return -1;
        p += n;
        /* attributes: name="value" */
        for (;;) {
            while (*p == ' ' || *p == '\n' || *p == '\t') p++;
            if (*p == '>' || (p[0] == '/' && p[1] == '>')) break;
            size_t an = strcspn(p, "= \t\n>");
            if (an == 0 || p[an] != '=' || p[an + 1] != '"') return -1;
            const char *v = p + an + 2, *ve = strchr(v, '"');
            if (!ve) return -1;
            for (const char *q = v; q < ve; q++)
                if (*q == '<') return -1;
            p = ve + 1;
        }
        elems++;
        *rects += !strcmp(name, "rect");
        *groups += !strcmp(name, "g");
        if (*p == '/') {
            if (depth == 0) closed_root = 1;
            s = p + 2;
        } else {
            if (depth == 64) return -1;
            snprintf(stack[depth++], sizeof stack[0], "%s", name);
            s = p + 1;
        }
    }
    return depth == 0 && closed_root ? elems : -1;
}

static void xml_checker_rejects_broken(void **state)
{
    (void)state;
    int r, g;
    assert_true(xml_well_formed("<svg a=\"1\"><g><rect x=\"1\"/></g></svg>\n", &r, &g) == 3);
    assert_int_equal(r, 1);
    assert_int_equal(g, 1);
    assert_int_equal(xml_well_formed("<svg><g></svg>", &r, &g), -1);
    assert_int_equal(xml_well_formed("<svg><text>a < b</text></svg>", &r, &g), -1);
    assert_int_equal(xml_well_formed("<svg><text>a & b</text></svg>", &r, &g), -1);
    assert_int_equal(xml_well_formed("<svg x=1></svg>", &r, &g), -1);
    assert_int_equal(xml_well_formed("<svg></svg><svg></svg>", &r, &g), -1);
}

/* split a CSV line in place */
static int split(char *line, char **f, int max)
{
    int n = 0;
    for (char *p = line; n < max;) {
        f[n++] = p;
        p = strchr(p, ',');
        if (!p) break;
        *p++ = 0;
    }
    return n;
}

static int col(char **hdr, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(hdr[i], name)) return i;
    fail_msg("CSV has no column %s", name);
    return -1;
}

static void cli_on_tiny(void **state)
{
    (void)state;
    char csv[400], json[400], svg[400], db[400];
    snprintf(csv, sizeof csv, "%s/m.csv", root);
    snprintf(json, sizeof json, "%s/m.json", root);
    snprintf(svg, sizeof svg, "%s/m.svg", root);
    snprintf(db, sizeof db, "%s/r.db", root);
    /* --threads 1: tiny's rows are too small to share, and on a loaded
     * machine OpenMP's spinning threads make 2 threads ~20x slower */
    assert_int_equal(call(dsv4q_cmd_margins, "margins", "--model", tiny, "--prompt-len", "120", "--decode", "4", "--csv",
                          csv, "--json", json, "--svg", svg, "--db", db, "--key", "", "--threads", "1", "--quiet", NULL),
                     0);

    /* CSV: one row per (layer, position): layers 1 and 3, positions 119..123 */
    char *text = slurp(csv);
    assert_non_null(text);
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    assert_non_null(line);
    char hline[1024], *hdr[40];
    snprintf(hline, sizeof hline, "%s", line);
    int nh = split(hline, hdr, 40);
    assert_int_equal(nh, 21);
    const int ci_layer = col(hdr, nh, "layer"), ci_pos = col(hdr, nh, "position"), ci_k = col(hdr, nh, "k"),
              ci_vis = col(hdr, nh, "visible"), ci_fw = col(hdr, nh, "flips_f32_f64"),
              ci_nrms = col(hdr, nh, "attn_nrms"), ci_margin = col(hdr, nh, "margin_quanta");
    const char *sfx[2] = {"", "_f32"};
    int ci_tot[2], ci_in[2], ci_out[2], ci_dist[2];
    for (int w = 0; w < 2; w++) {
        char b[64];
        snprintf(b, sizeof b, "tie_total%s", sfx[w]); ci_tot[w] = col(hdr, nh, b);
        snprintf(b, sizeof b, "tie_inside%s", sfx[w]); ci_in[w] = col(hdr, nh, b);
        snprintf(b, sizeof b, "tie_outside%s", sfx[w]); ci_out[w] = col(hdr, nh, b);
        snprintf(b, sizeof b, "distinct%s", sfx[w]); ci_dist[w] = col(hdr, nh, b);
    }
    int seen[2][5] = {{0}}, nrows = 0, flipped = 0;
    while ((line = strtok_r(NULL, "\n", &save))) {
        char *f[40];
        assert_int_equal(split(line, f, 40), 21);
        int layer = atoi(f[ci_layer]), pos = atoi(f[ci_pos]), k = atoi(f[ci_k]);
        assert_true(layer == 1 || layer == 3);
        assert_true(pos >= 119 && pos <= 123);
        seen[layer == 3][pos - 119]++;
        assert_int_equal(k, 8);
        assert_true(atoi(f[ci_vis]) >= 30);   /* decode rows see every compressed row */
        assert_true(strcmp(f[ci_margin], "NA") != 0);
        for (int w = 0; w < 2; w++) {
            assert_int_equal(atoi(f[ci_in[w]]) + atoi(f[ci_out[w]]), atoi(f[ci_tot[w]]));
            assert_true(atoi(f[ci_tot[w]]) >= 1);
            assert_true(atoi(f[ci_dist[w]]) >= 1 && atoi(f[ci_dist[w]]) <= k);
        }
        double nrms = strtod(f[ci_nrms], NULL);
        if (atoi(f[ci_fw]) == 0) assert_true(nrms == 0);   /* no flip: the rerun is bit-identical */
        else { assert_true(nrms > 0); flipped++; }
        nrows++;
    }
    free(text);
    assert_int_equal(nrows, 10);
    for (int l = 0; l < 2; l++)
        for (int p = 0; p < 5; p++) assert_int_equal(seen[l][p], 1);
    printf("tiny: %d of 10 rows with an f32/f64 support flip\n", flipped);

    /* SVG: well-formed, one panel (<g>) per indexed layer, 11 bins x 2 widths */
    text = slurp(svg);
    assert_non_null(text);
    assert_true(strncmp(text, "<svg ", 5) == 0);
    size_t n = strlen(text);
    assert_true(n > 7 && strcmp(text + n - 7, "</svg>\n") == 0);
    int rects, groups;
    assert_true(xml_well_formed(text, &rects, &groups) > 0);
    assert_int_equal(groups, 2);
    assert_int_equal(rects, 2 + 2 * 11 * 2);   /* legend + bars */
    free(text);

    /* JSON: layer summaries and every row */
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "profile")), "source");
    assert_string_equal(json_string_value(json_object_get(j, "compare_profile")), "model");
    json_t *layers = json_object_get(j, "layers");
    assert_int_equal(json_array_size(layers), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(layers, 1), "layer")), 3);
    json_t *mq = json_object_get(json_object_get(json_array_get(layers, 0), "f64"), "margin_quanta");
    assert_non_null(json_object_get(mq, "median"));
    assert_true(json_number_value(json_object_get(mq, "max")) >= json_number_value(json_object_get(mq, "p90")));
    assert_int_equal(json_array_size(json_object_get(j, "rows")), 10);
    json_decref(j);
    struct stat sb;
    assert_int_equal(stat(db, &sb), 0);
}

/* --chunk: margins fed its prefill in chunks (oracle/model.c M4) measure
 * the same cut: every row's scores, picks, margins, tie-runs, flips and
 * rerun NRMS are the one call's, so the JSON is the same but for
 * prefill_chunk (every prompt position and the decode rows; chunks of 9
 * cross the window of 16 and the ratio-4 blocks off their edges). */
static void cli_chunked_same_margins(void **state)
{
    (void)state;
    char a[400], b[400];
    snprintf(a, sizeof a, "%s/one.json", root);
    snprintf(b, sizeof b, "%s/chunk9.json", root);
    assert_int_equal(call(dsv4q_cmd_margins, "margins", "--model", tiny, "--prompt-len", "60", "--decode", "2",
                          "--positions", "all", "--json", a, "--threads", "1", "--quiet", NULL),
                     0);
    assert_int_equal(call(dsv4q_cmd_margins, "margins", "--model", tiny, "--prompt-len", "60", "--decode", "2",
                          "--positions", "all", "--chunk", "9", "--json", b, "--threads", "1", "--quiet", NULL),
                     0);
    json_error_t je;
    json_t *ja = json_load_file(a, 0, &je), *jb = json_load_file(b, 0, &je);
    assert_non_null(ja);
    assert_non_null(jb);
    assert_int_equal(json_integer_value(json_object_get(ja, "prefill_chunk")), 60);
    assert_int_equal(json_integer_value(json_object_get(jb, "prefill_chunk")), 9);
    assert_int_equal(json_array_size(json_object_get(ja, "rows")), 2 * 62);
    json_object_del(ja, "prefill_chunk");
    json_object_del(jb, "prefill_chunk");
    assert_true(json_equal(ja, jb));
    json_decref(ja);
    json_decref(jb);
}

static void cli_bad_options(void **state)
{
    (void)state;
    char db[400];
    snprintf(db, sizeof db, "%s/bad.db", root);
    assert_int_equal(call(dsv4q_cmd_margins, "margins", "--model", tiny, "--prompt-len", "20", "--decode", "1",
                          "--positions", "21", "--db", db, "--quiet", NULL), 2);
    assert_int_equal(call(dsv4q_cmd_margins, "margins", "--model", tiny, "--prompt-len", "20", "--decode", "1",
                          "--positions", "3,x", "--db", db, "--quiet", NULL), 2);
    assert_int_equal(call(dsv4q_cmd_margins, "margins", "--model", tiny, "--prompt-len", "20", "--decode", "1",
                          "--positions", "9-4", "--db", db, "--quiet", NULL), 2);
    assert_int_equal(call(dsv4q_cmd_margins, "margins", "--model", tiny, "--prompt-len", "20", "--decode", "1",
                          "--positions", "3,", "--db", db, "--quiet", NULL), 2);   /* trailing comma */
    assert_int_equal(call(dsv4q_cmd_margins, "margins", "--model", tiny, "--prompt-len", "20", "--decode", "1",
                          "--positions", "99999999999999999999", "--db", db, "--quiet", NULL), 2);   /* ERANGE */
    assert_int_equal(call(dsv4q_cmd_margins, "margins", "--model", tiny, "--width", "f32", "--db", db, "--quiet", NULL),
                     2);
    assert_int_equal(call(dsv4q_cmd_margins, "margins", "--model", tiny, "--positions", NULL), 2);
    struct stat sb;
    assert_int_equal(stat(db, &sb), -1);   /* nothing ran, nothing recorded */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(quanta_definition),          cmocka_unit_test(declared_score_dtypes),
        cmocka_unit_test(equal_kth_and_next),         cmocka_unit_test(margins_of_1_and_13_quanta),
        cmocka_unit_test(fewer_visible_than_k),       cmocka_unit_test(rewritten_picks_and_bad_entries),
        cmocka_unit_test(agrees_with_oracle_topk),    cmocka_unit_test(flips_and_percentiles),
        cmocka_unit_test(xml_checker_rejects_broken), cmocka_unit_test(cli_on_tiny),
        cmocka_unit_test(cli_chunked_same_margins),   cmocka_unit_test(cli_bad_options),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
