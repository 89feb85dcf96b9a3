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
