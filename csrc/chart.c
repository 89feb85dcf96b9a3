/* The Earley chart's storage: sets appended to one item array, the dedup table
 * of the set under construction, per-set versions; creation, copy and free. */
#include <stdlib.h>
#include <string.h>

#include "chart.h"

#define INITIAL_HCAP 64u

int cm_chart_rehash(cm_chart *c, size_t start) {
    size_t ncap = c->hcap * 2;
    uint64_t *k = malloc(ncap * sizeof *k);
    uint32_t *g = calloc(ncap, sizeof *g);
    if (!k || !g) {
        free(k);
        free(g);
        return CM_ERR_NOMEM;
    }
    free(c->hkeys);
    free(c->hgen);
    c->hkeys = k;
    c->hgen = g;
    c->hcap = ncap;
    c->gen = 1;
    for (size_t i = start; i < c->n_items; i++) {
        uint64_t key = cm_item_key(c->items[i].state, c->items[i].origin);
        size_t s = cm_hslot(key, ncap - 1);
        while (c->hgen[s] == c->gen) s = (s + 1) & (ncap - 1);
        c->hgen[s] = c->gen;
        c->hkeys[s] = key;
    }
    return CM_OK;
}

int cm_chart_grow_sets(cm_chart *c, size_t need) {
    if (need <= c->cap_sets) return CM_OK;
    size_t cap = c->cap_sets;
    int rc = cm_grow((void **)&c->set_start, &cap, need, sizeof *c->set_start);
    if (rc) return rc;
    uint64_t *v = realloc(c->version, cap * sizeof *v);
    if (!v) return CM_ERR_NOMEM;
    c->version = v;
    uint64_t *wb = realloc(c->wbuilt, cap * sizeof *wb);
    if (!wb) return CM_ERR_NOMEM;
    c->wbuilt = wb;
    uint64_t *ws = realloc(c->wseen, cap * sizeof *ws);
    if (!ws) return CM_ERR_NOMEM;
    c->wseen = ws;
    uint16_t *sb = realloc(c->set_byte, cap * sizeof *sb);
    if (!sb) return CM_ERR_NOMEM;
    c->set_byte = sb;
    memset(wb + c->cap_sets, 0, (cap - c->cap_sets) * sizeof *wb);
    memset(ws + c->cap_sets, 0, (cap - c->cap_sets) * sizeof *ws);
    c->cap_sets = cap;
    return CM_OK;
}

void cm_chart_clear_stamps(cm_chart *c) {
    memset(c->hgen, 0, c->hcap * sizeof *c->hgen);
    c->gen = 1;
}

int cm_chart_reopen_last(cm_chart *c) {
    c->n_sets--;
    size_t start = c->set_start[c->n_sets];
    while ((c->n_items - start) * 2 > c->hcap) {
        int rc = cm_chart_rehash(c, start);
        if (rc) return rc;
    }
    if (++c->gen == 0) cm_chart_clear_stamps(c);
    for (size_t i = start; i < c->n_items; i++) {
        uint64_t key = cm_item_key(c->items[i].state, c->items[i].origin);
        size_t s = cm_hslot(key, c->hcap - 1);
        while (c->hgen[s] == c->gen) s = (s + 1) & (c->hcap - 1);
        c->hgen[s] = c->gen;
        c->hkeys[s] = key;
    }
    return CM_OK;
}

int cm_chart_open(cm_chart *c, bool upward) {
    memset(c, 0, sizeof *c);
    c->upward = upward;
    c->hcap = INITIAL_HCAP;
    c->hkeys = malloc(c->hcap * sizeof *c->hkeys);
    c->hgen = calloc(c->hcap, sizeof *c->hgen);
    if (!c->hkeys || !c->hgen) return CM_ERR_NOMEM;
    int rc = cm_chart_begin_set(c);
    if (!rc) c->set_byte[0] = 256;
    return rc;
}

void cm_chart_free(cm_chart *c) {
    if (c->memo)
        for (int i = 0; i < CM_MEMO_SLOTS; i++)
            if (c->memo[i]) {
                free(c->memo[i]->closure);
                free(c->memo[i]);
            }
    free(c->memo);
    free(c->scans);
    free(c->wslots);
    free(c->wpool);
    free(c->wbuilt);
    free(c->wseen);
    free(c->wtmp);
    free(c->version);
    free(c->items);
    free(c->counts);
    free(c->set_start);
    free(c->set_byte);
    free(c->hkeys);
    free(c->hgen);
    memset(c, 0, sizeof *c);
}

/* The sets and items of src (no memo, no waiter index: those rebuild on demand). */
int cm_chart_copy(cm_chart *dst, const cm_chart *src) {
    memset(dst, 0, sizeof *dst);
    dst->hcap = src->hcap;
    dst->hkeys = malloc(dst->hcap * sizeof *dst->hkeys);
    dst->hgen = calloc(dst->hcap, sizeof *dst->hgen);
    dst->items = malloc((src->n_items ? src->n_items : 1) * sizeof *dst->items);
    dst->set_start = malloc((src->n_sets + 2) * sizeof *dst->set_start);
    dst->version = malloc((src->n_sets + 2) * sizeof *dst->version);
    dst->wbuilt = calloc(src->n_sets + 2, sizeof *dst->wbuilt);
    dst->wseen = calloc(src->n_sets + 2, sizeof *dst->wseen);
    dst->set_byte = malloc((src->n_sets + 2) * sizeof *dst->set_byte);
    if (!dst->hkeys || !dst->hgen || !dst->items || !dst->set_start || !dst->version || !dst->wbuilt ||
        !dst->wseen || !dst->set_byte) {
        cm_chart_free(dst);
        return CM_ERR_NOMEM;
    }
    if (src->counts) {
        dst->counts = malloc((src->n_items ? src->n_items : 1) * sizeof *dst->counts);
        if (!dst->counts) {
            cm_chart_free(dst);
            return CM_ERR_NOMEM;
        }
        memcpy(dst->counts, src->counts, src->n_items * sizeof *dst->counts);
        dst->cap_counts = src->n_items ? src->n_items : 1;
    }
    memcpy(dst->items, src->items, src->n_items * sizeof *dst->items);
    memcpy(dst->set_start, src->set_start, (src->n_sets + 1) * sizeof *dst->set_start);
    memcpy(dst->version, src->version, src->n_sets * sizeof *dst->version);
    memcpy(dst->set_byte, src->set_byte, src->n_sets * sizeof *dst->set_byte);
    dst->clock = src->clock;
    dst->n_items = dst->cap_items = src->n_items;
    dst->n_sets = src->n_sets;
    dst->cap_sets = src->n_sets + 2;
    if (!dst->cap_items) dst->cap_items = 1;
    dst->gen = 1;
    dst->upward = src->upward;
    return CM_OK;
}
