/* Closing verdicts: the rest of a token after an item's rule completed inside it.
 *
 * Inside a string whose body may end at every position, the tokens that close it
 * (`abc",`, `x"}`) are uncertain at every position (mask.c check_split).  Once an
 * item of the current set has read a prefix of a candidate into an accepting
 * state, the set its rule's completion makes (the callers advanced, closed) is
 * all the chart reads for that derivation of the remaining bytes, with the sets
 * its items' origins name, recursively (completion reads nothing else; prediction
 * and scanning read the last set; grammars with lookahead debts are left out, as
 * their completions read the bytes between).  Those sets are older than the
 * current one, so the verdict holds at every later position of the string, and
 * for every token with the same rest: it is kept per (completion set, rest) while
 * the newest set the completion set's origins name keeps its version (a rollback
 * below it rebuilds it with a new one).  A fork starts with an empty memo.
 *
 * Completion sets are compared item for item (origins absolute: they name the
 * same sets; the set's own index as CM_MEMO_HERE), verdicts by their rest's
 * bytes; a full memo starts over. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "verdict.h"

#define ITEM_CAP (CM_VERDICT_POOL / sizeof(cm_item))

void cm_verdicts_clear(cm_verdicts *v) {
    v->n_stack = 0;
    v->last = 0;
    v->n_items = 0;
    v->n_rest = 0;
    v->n_used = 0;
    v->n_runs = 0;
    if (++v->gen == 0) {  /* wrapped: stamps of long ago would look current */
        if (v->slots) memset(v->slots, 0, CM_VERDICT_SLOTS * sizeof *v->slots);
        if (v->runs) memset(v->runs, 0, CM_VERDICT_RUNS * sizeof *v->runs);
        v->gen = 1;
    }
}

void cm_verdicts_free(cm_verdicts *v) {
    free(v->items);
    free(v->rest);
    free(v->slots);
    free(v->runs);
    memset(v, 0, sizeof *v);
}

static uint64_t mix(uint64_t h, uint64_t x) { return (h ^ x) * 0xbf58476d1ce4e5b9ULL; }

static bool same_items(const cm_verdicts *v, const cm_vstack *s, const cm_item *it, uint32_t n, uint32_t here) {
    if (s->n != n) return false;
    const cm_item *a = v->items + s->off;
    for (uint32_t i = 0; i < n; i++)
        if (a[i].state != it[i].state || a[i].origin != (it[i].origin == here ? CM_MEMO_HERE : it[i].origin))
            return false;
    return true;
}

static int alloc_memo(cm_verdicts *v) {
    if (v->slots) return CM_OK;
    v->items = malloc(ITEM_CAP * sizeof *v->items);
    v->rest = malloc(CM_VERDICT_POOL);
    v->slots = calloc(CM_VERDICT_SLOTS, sizeof *v->slots);
    v->runs = calloc(CM_VERDICT_RUNS, sizeof *v->runs);
    if (!v->items || !v->rest || !v->slots || !v->runs) {
        cm_verdicts_free(v);
        return CM_ERR_NOMEM;
    }
    v->gen = 1;
    return CM_OK;
}

int cm_verdict_stack(cm_verdicts *v, const cm_chart *c, size_t set, size_t base) {
    const cm_item *it = c->items + c->set_start[set];
    uint32_t n = c->set_start[set + 1] - c->set_start[set], here = (uint32_t)set, vset = 0;
    uint64_t h = n;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t o = it[i].origin == here ? CM_MEMO_HERE : it[i].origin;
        if (o != CM_MEMO_HERE) {
            if (o > base) return -1;  /* names a set the token made */
            if (o > vset) vset = o;
        }
        h = mix(h, cm_item_key(it[i].state, o));
    }
    if (n > ITEM_CAP / 4 || alloc_memo(v)) return -1;
    for (uint32_t k = 0; k < v->n_stack; k++) {
        uint32_t j = (v->last + k) % v->n_stack;
        const cm_vstack *s = &v->stack[j];
        if (s->hash != h || !same_items(v, s, it, n, here)) continue;
        if (s->version == c->version[vset]) {
            v->last = j;
            return (int)j;
        }
        cm_verdicts_clear(v);  /* rebuilt below: none of its verdicts may stand */
        break;
    }
    if (v->n_stack == CM_VERDICT_STACKS || v->n_items + n > ITEM_CAP || v->n_used * 2 >= CM_VERDICT_SLOTS ||
        v->n_rest * 2 >= CM_VERDICT_POOL)
        cm_verdicts_clear(v);  /* full: start over */
    cm_vstack *s = &v->stack[v->n_stack];
    *s = (cm_vstack){h, c->version[vset], vset, v->n_items, n};
    for (uint32_t i = 0; i < n; i++)
        v->items[v->n_items++] = (cm_item){it[i].state, it[i].origin == here ? CM_MEMO_HERE : it[i].origin};
    v->last = v->n_stack;
    return (int)v->n_stack++;
}

static uint64_t rest_hash(int stack, const uint8_t *rest, uint32_t len) {
    uint64_t h = mix(0x9E3779B97F4A7C15ULL, ((uint64_t)(uint32_t)stack << 32) | len);
    for (uint32_t i = 0; i < len; i++) h = mix(h, rest[i]);
    return h ^ (h >> 29);
}

int cm_verdict_get(const cm_verdicts *v, int stack, const uint8_t *rest, uint32_t len) {
    if (!v->slots || stack < 0 || (uint32_t)stack >= v->n_stack) return -1;
    uint64_t h = rest_hash(stack, rest, len);
    for (size_t i = h % CM_VERDICT_SLOTS;; i = (i + 1) % CM_VERDICT_SLOTS) {
        const cm_vslot *sl = &v->slots[i];
        if (sl->gen != v->gen) return -1;
        if (sl->hash == h && sl->stack == (uint32_t)stack && sl->rest_len == len &&
            !memcmp(v->rest + sl->rest_off, rest, len))
            return sl->allowed;
    }
}

void cm_verdict_put(cm_verdicts *v, int stack, const uint8_t *rest, uint32_t len, bool allowed) {
    if (!v->slots || stack < 0 || (uint32_t)stack >= v->n_stack) return;
    if (v->n_used * 2 >= CM_VERDICT_SLOTS || v->n_rest + len > CM_VERDICT_POOL) return;  /* full until cleared */
    uint64_t h = rest_hash(stack, rest, len);
    size_t i = h % CM_VERDICT_SLOTS;
    while (v->slots[i].gen == v->gen) i = (i + 1) % CM_VERDICT_SLOTS;
    memcpy(v->rest + v->n_rest, rest, len);
    v->slots[i] = (cm_vslot){h, v->gen, (uint32_t)stack, v->n_rest, len, allowed};
    v->n_rest += len;
    v->n_used++;
}

/* Runs of one byte: one slot per (stack, byte). */
static size_t run_slot(const cm_verdicts *v, int stack, uint8_t byte) {
    size_t i = (size_t)(mix((uint64_t)(uint32_t)stack << 8 | byte, 0x9E3779B97F4A7C15ULL) >> 40) % CM_VERDICT_RUNS;
    while (v->runs[i].gen == v->gen && (v->runs[i].stack != (uint32_t)stack || v->runs[i].byte != byte))
        i = (i + 1) % CM_VERDICT_RUNS;
    return i;
}

int cm_verdict_run_get(const cm_verdicts *v, int stack, uint8_t byte, uint32_t len, uint32_t *lo) {
    *lo = 0;
    if (!v->runs || stack < 0 || (uint32_t)stack >= v->n_stack) return -1;
    const cm_vrun *r = &v->runs[run_slot(v, stack, byte)];
    if (r->gen != v->gen) return -1;
    *lo = r->lo;
    if (len <= r->lo) return 1;
    return r->hi && len >= r->hi ? 0 : -1;
}

void cm_verdict_run_put(cm_verdicts *v, int stack, uint8_t byte, uint32_t lo, uint32_t hi) {
    if (!v->runs || stack < 0 || (uint32_t)stack >= v->n_stack) return;
    cm_vrun *r = &v->runs[run_slot(v, stack, byte)];
    if (r->gen != v->gen) {
        if (v->n_runs * 2 >= CM_VERDICT_RUNS) return;  /* full until cleared */
        *r = (cm_vrun){v->gen, (uint32_t)stack, 0, 0, byte};
        v->n_runs++;
    }
    if (lo > r->lo) r->lo = lo;
    if (hi && (!r->hi || hi < r->hi)) r->hi = hi;
}

/* Upward kernel keys in more rules (walk.c kern_key; issue 12, session 48, helper `lark48`).
 *
 * A rest's upward verdict is a chart run from S0, the closure of the rule's return states.  A
 * scan of the rest's first byte b takes the items of S0 that read b, each to its next state owing
 * what its debt leaves after b (scan_kernel: the item's own state, debt and origin decide it), so
 * the items that read b's class, as (next state, debt before b, origin), decide the kernel with b.
 * Later sets read S0 again only where an item of origin 0 completes: complete_k advances the
 * items of S0 that call its rule (advance_waiter: the waiter's state and debt, and the bytes from
 * b on), and an advanced waiter of origin 0 completes into S0 in turn.  So with R the rules of
 * the origin-0 items that read b, closed under the rules of S0's origin-0 items that call a rule
 * of R, and W the items of S0 that call a rule of R, the chart after b, and the verdict, are a
 * function of the readers and W (and of the rest, b included, which the memo's key holds): two
 * rules whose first sets agree on those share the verdict.  sql.lark's expression chain: its
 * levels' first sets differ by each level's operators and its blank runs, while the callees that
 * read `,` and `;` (a list's repetition rules predicted after a completed expression) and their
 * waiters are the same in every level. */
static atomic_int g_kern_wide = 1;
static atomic_size_t g_kern_near, g_kern_debts;

void cm_kern_wide_enable(int on) { atomic_store(&g_kern_wide, on); }

bool cm_kern_wide_on(void) { return atomic_load_explicit(&g_kern_wide, memory_order_relaxed) != 0; }

void cm_kern_wide_counts(size_t *near, size_t *debts) {
    *near = atomic_load(&g_kern_near);
    *debts = atomic_load(&g_kern_debts);
}

void cm_kern_wide_count(bool near, bool debts) {
    if (near) atomic_fetch_add_explicit(&g_kern_near, 1, memory_order_relaxed);
    if (debts) atomic_fetch_add_explicit(&g_kern_debts, 1, memory_order_relaxed);
}

/* Sorted, repeats dropped; the new length. */
static size_t sort_unique(uint32_t *a, size_t n) {
    for (size_t i = 1; i < n; i++) {
        uint32_t x = a[i];
        size_t j = i;
        for (; j > 0 && a[j - 1] > x; j--) a[j] = a[j - 1];
        a[j] = x;
    }
    size_t u = n ? 1 : 0;
    for (size_t i = 1; i < n; i++)
        if (a[i] != a[u - 1]) a[u++] = a[i];
    return u;
}

static bool has_rule(const uint32_t *rs, size_t n, uint32_t r) {
    for (size_t i = 0; i < n; i++)
        if (rs[i] == r) return true;
    return false;
}

size_t cm_kern_near_key(const cm_grammar *g, const cm_item *s0, size_t n, uint32_t cls, uint32_t *out) {
    const cm_tables *t = &g->t;
    uint32_t *rs = malloc((n ? n : 1) * sizeof *rs);
    uint64_t *w = malloc((n ? n : 1) * sizeof *w);
    uint8_t *in_w = calloc(n ? n : 1, 1);
    size_t na = 0, nb = 0, nr = 0, nw = 0;
    if (!rs || !w || !in_w) goto fail;
    uint32_t *a = out + 4;
    for (size_t i = 0; i < n; i++) {  /* the CM_OUTER readers, then (b, after them) the origin-0 ones */
        uint32_t st = cm_st(s0[i].state);
        int32_t nx = g->has_bytes[st] ? t->trans[(size_t)st * t->n_classes + cls] : -1;
        if (s0[i].origin != CM_OUTER && s0[i].origin != 0) goto fail;  /* (not a first set) */
        if (nx >= 0 && s0[i].origin == CM_OUTER) a[na++] = cm_pack((uint32_t)nx, cm_la(s0[i].state));
    }
    na = sort_unique(a, na);
    uint32_t *b = a + na;
    for (size_t i = 0; i < n; i++) {
        uint32_t st = cm_st(s0[i].state);
        int32_t nx = g->has_bytes[st] ? t->trans[(size_t)st * t->n_classes + cls] : -1;
        if (nx < 0 || s0[i].origin == CM_OUTER) continue;
        b[nb++] = cm_pack((uint32_t)nx, cm_la(s0[i].state));
        if (!has_rule(rs, nr, t->state_rule[st])) rs[nr++] = t->state_rule[st];
    }
    nb = sort_unique(b, nb);
    for (bool grew = true; grew;) {  /* W, and R closed under W's origin-0 items' rules */
        grew = false;
        for (size_t i = 0; i < n; i++) {
            uint32_t st = cm_st(s0[i].state);
            if (in_w[i] || t->ref_off[st] == t->ref_off[st + 1]) continue;
            bool calls = false;
            for (uint32_t e = t->ref_off[st]; !calls && e < t->ref_off[st + 1]; e++)
                calls = has_rule(rs, nr, t->ref_rule[e]);
            if (!calls) continue;
            in_w[i] = 1;
            w[nw++] = (uint64_t)s0[i].state << 1 | (s0[i].origin == CM_OUTER);
            if (s0[i].origin == 0 && !has_rule(rs, nr, t->state_rule[st])) {
                rs[nr++] = t->state_rule[st];
                grew = true;
            }
        }
    }
    for (size_t i = 1; i < nw; i++) {  /* (S0's order is the closure's, not the same in every rule) */
        uint64_t x = w[i];
        size_t j = i;
        for (; j > 0 && w[j - 1] > x; j--) w[j] = w[j - 1];
        w[j] = x;
    }
    uint32_t *c = b + nb;
    for (size_t i = 0; i < nw; i++) {
        c[2 * i] = (uint32_t)(w[i] >> 1);
        c[2 * i + 1] = (uint32_t)(w[i] & 1);
    }
    out[0] = UINT32_MAX;  /* (no plain key starts so: no item owes CM_LA_DEAD) */
    out[1] = (uint32_t)na;
    out[2] = (uint32_t)nb;
    out[3] = (uint32_t)nw;
    free(rs);
    free(w);
    free(in_w);
    return 4 + na + nb + 2 * nw;
fail:
    free(rs);
    free(w);
    free(in_w);
    return 0;
}
