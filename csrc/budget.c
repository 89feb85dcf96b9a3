/* Memory and time accounting of a compile-time build (cm_budget), and the growable
 * arrays the builders use.  Hostile grammars make automata explode; every array a
 * build grows is counted here, so the build stops with CM_ERR_LIMIT_MEM instead of
 * taking the machine's memory. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "fsm.h"

double cm_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int cm_budget_charge(cm_budget *b, size_t bytes) {
    if (!b) return CM_OK;
    if (b->max_bytes && (b->used > b->max_bytes || bytes > b->max_bytes - b->used)) return CM_ERR_LIMIT_MEM;
    b->used += bytes;
    if (b->used > b->peak) b->peak = b->used;
    return CM_OK;
}

void cm_budget_release(cm_budget *b, size_t bytes) {
    if (b) b->used = bytes < b->used ? b->used - bytes : 0;
}

int cm_budget_time(const cm_budget *b) {
    return (b && b->deadline > 0 && cm_now_seconds() > b->deadline) ? CM_ERR_TIMEOUT : CM_OK;
}

/* Each scratch block remembers its size, so cm_bfree can release it. */
typedef union {
    size_t size;
    max_align_t align;
} bhead;

void *cm_balloc(cm_budget *b, size_t bytes, bool zero, int *rc) {
    if (*rc) return NULL;
    if (bytes > SIZE_MAX - sizeof(bhead)) {
        *rc = CM_ERR_NOMEM;
        return NULL;
    }
    if ((*rc = cm_budget_charge(b, bytes))) return NULL;
    bhead *h = zero ? calloc(1, sizeof *h + bytes) : malloc(sizeof *h + bytes);
    if (!h) {
        cm_budget_release(b, bytes);
        *rc = CM_ERR_NOMEM;
        return NULL;
    }
    h->size = bytes;
    return h + 1;
}

void cm_bfree(cm_budget *b, void *p) {
    if (!p) return;
    bhead *h = (bhead *)p - 1;
    cm_budget_release(b, h->size);
    free(h);
}

int cm_vec_grow(cm_vec32 *v, size_t n) {
    if (v->cap >= n) return CM_OK;
    size_t cap = v->cap ? v->cap : 256;
    while (cap < n) cap *= 2;
    if (cap > SIZE_MAX / sizeof *v->data) return CM_ERR_NOMEM;
    int rc = cm_budget_charge(v->bud, (cap - v->cap) * sizeof *v->data);
    if (rc) return rc;
    uint32_t *p = realloc(v->data, cap * sizeof *p);
    if (!p) {
        cm_budget_release(v->bud, (cap - v->cap) * sizeof *v->data);
        return CM_ERR_NOMEM;
    }
    v->data = p;
    v->cap = cap;
    return CM_OK;
}

void cm_vec_free(cm_vec32 *v) {
    cm_budget_release(v->bud, v->cap * sizeof *v->data);
    free(v->data);
    v->data = NULL;
    v->n = v->cap = 0;
}

uint32_t *cm_vec_take(cm_vec32 *v) {
    uint32_t *p = v->data;
    if (!p || v->n < v->cap) {
        uint32_t *q = realloc(p, (v->n ? v->n : 1) * sizeof *q);
        if (q) p = q;
        else if (!p) return NULL;
    }
    cm_budget_release(v->bud, v->cap * sizeof *v->data);
    v->data = NULL;
    v->n = v->cap = 0;
    return p;
}
