/*
 * stage_ops.c - operator <-> stage links from the stage tables' `ops`
 * column (see stage_ops.h). The tables are small (11 rows x <= 17 names), so
 * every query re-parses it: no cached state, nothing to initialise, safe
 * from any thread.
 */
#include "harness/ops/stage_ops.h"

#include <stdio.h>
#include <string.h>
#include "base/util.h"
#include "harness/ops/ops.h"

_Static_assert(DSV4Q_STAGE_COUNT <= 32, "dsv4q_op_stage_mask holds one bit per stage");
_Static_assert((int)DSV4Q_S41_COUNT <= (int)DSV4Q_STAGE_COUNT, "DSV4Q_STAGE_MASK_ALL covers the V4.1 rows too");

/* Walk the ", "-separated names of ops: calls fn for each with its length.
 * Stops early when fn returns nonzero and returns that value. */
typedef int (*name_fn)(void *user, const char *name, size_t len);
static int each_name(const char *ops, name_fn fn, void *user)
{
    for (const char *p = ops ? ops : ""; *p;) {
        while (*p == ',' || *p == ' ') p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ') e++;
        if (e > p) {
            int rc = fn(user, p, (size_t)(e - p));
            if (rc) return rc;
        }
        p = e;
    }
    return 0;
}

/* The operator named by name[0..len), -1 if none. */
static int op_of(const char *name, size_t len)
{
    char buf[64];
    if (len >= sizeof buf) return -1;
    memcpy(buf, name, len);
    buf[len] = 0;
    return dsv4q_op_find(buf);
}

static int add_mask(void *user, const char *name, size_t len)
{
    int op = op_of(name, len);
    if (op >= 0) *(uint64_t *)user |= DSV4Q_CAP(op);
    return 0;
}

static uint64_t row_mask(const dsv4q_stage_info *si)
{
    uint64_t m = 0;
    if (si) each_name(si->ops, add_mask, &m);
    return m;
}

uint64_t dsv4q_stage_op_mask_arch(int arch, int stage) { return row_mask(dsv4q_stage_get_arch(arch, stage)); }
uint64_t dsv4q_stage_op_mask(int stage) { return dsv4q_stage_op_mask_arch(DSV4Q_ARCH_V4, stage); }

uint32_t dsv4q_op_stage_mask_arch(int arch, int op)
{
    uint32_t m = 0;
    if (op < 0 || op >= DSV4Q_OP_COUNT) return 0;
    for (int st = 0; st < dsv4q_stage_count_arch(arch); st++)
        if (dsv4q_stage_op_mask_arch(arch, st) & DSV4Q_CAP(op)) m |= 1u << st;
    return m;
}
uint32_t dsv4q_op_stage_mask(int op) { return dsv4q_op_stage_mask_arch(DSV4Q_ARCH_V4, op); }

uint32_t dsv4q_stage_mask_main_arch(int arch)
{
    uint32_t m = 0;
    for (int st = 0; st < dsv4q_stage_count_arch(arch); st++)
        if (!dsv4q_stage_get_arch(arch, st)->optional) m |= 1u << st;
    return m;
}
uint32_t dsv4q_stage_mask_main(void) { return dsv4q_stage_mask_main_arch(DSV4Q_ARCH_V4); }

const char *dsv4q_op_stage_names_arch(int arch, int op, uint32_t among, char *buf, size_t len)
{
    const uint32_t m = dsv4q_op_stage_mask_arch(arch, op) & among;
    size_t o = 0;
    if (!len) return buf;
    buf[0] = 0;
    for (int st = 0; st < dsv4q_stage_count_arch(arch) && o < len; st++)
        if (m & (1u << st))
            o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "", dsv4q_stage_get_arch(arch, st)->name);
    if (!m) snprintf(buf, len, "-");
    return buf;
}
const char *dsv4q_op_stage_names(int op, uint32_t among, char *buf, size_t len)
{
    return dsv4q_op_stage_names_arch(DSV4Q_ARCH_V4, op, among, buf, len);
}

typedef struct row_check {
    const dsv4q_stage_info *si;
    uint64_t seen;
    char *err;
    size_t errlen;
} row_check;

static int check_name(void *user, const char *name, size_t len)
{
    row_check *c = user;
    int op = op_of(name, len);
    if (op < 0)
        return dsv4q_errf(c->err, c->errlen, "stage %s: operator '%.*s' in its ops is not in DSV4Q_OP_LIST",
                          c->si->name, (int)len, name);
    if (c->seen & DSV4Q_CAP(op))
        return dsv4q_errf(c->err, c->errlen, "stage %s: operator '%.*s' is named twice in its ops", c->si->name,
                          (int)len, name);
    c->seen |= DSV4Q_CAP(op);
    return 0;
}

int dsv4q_stage_ops_check_rows(const dsv4q_stage_info *const *rows, int n, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        const dsv4q_stage_info *si = rows[i];
        if (!si->ops) return dsv4q_errf(err, errlen, "stage %s: no ops list (\"\" when it calls none)", si->name);
        row_check c = {si, 0, err, errlen};
        if (each_name(si->ops, check_name, &c)) return -1;
        const int gate = si->gate_op ? dsv4q_op_find(si->gate_op) : -1;
        if (c.seen && (gate < 0 || !(c.seen & DSV4Q_CAP(gate))))
            return dsv4q_errf(err, errlen, "stage %s: its gate operator '%s' is not one of the operators it calls (%s)",
                              si->name, si->gate_op ? si->gate_op : "(none)", si->ops);
    }
    return 0;   /* an operator no stage calls is an operator-only case (its stages read "-") */
}

int dsv4q_stage_ops_check(char *err, size_t errlen)
{
    const dsv4q_stage_info *rows[DSV4Q_STAGE_COUNT], *rows41[DSV4Q_S41_COUNT];
    for (int i = 0; i < DSV4Q_STAGE_COUNT; i++) rows[i] = dsv4q_stage_get(i);
    for (int i = 0; i < DSV4Q_S41_COUNT; i++) rows41[i] = dsv4q_stage_get_arch(DSV4Q_ARCH_V41, i);
    return dsv4q_stage_ops_check_rows(rows, DSV4Q_STAGE_COUNT, err, errlen) ||
                   dsv4q_stage_ops_check_rows(rows41, DSV4Q_S41_COUNT, err, errlen)
               ? -1
               : 0;
}
