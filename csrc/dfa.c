/* Operations on finished DFAs (cm_dfa_out): allocation, label compaction, and the
 * trimming of dead and unreachable states (automata._trim_all). */
#include <stdlib.h>
#include <string.h>

#include "fsm.h"
#include "internal.h"

static size_t dfa_size(uint32_t n_states, uint32_t n_classes, size_t n_lab) {
    return sizeof(cm_dfa_out) + (size_t)n_states * n_classes * sizeof(int32_t) + n_states
           + ((size_t)n_states + 1) * sizeof(uint32_t) + 2 * n_lab * sizeof(uint32_t);
}

size_t cm_dfa_bytes(const cm_dfa_out *d) { return dfa_size(d->n_states, d->n_classes, d->lab_off[d->n_states]); }

void cm_dfa_out_free(cm_dfa_out *d) {
    if (!d) return;
    free(d->trans);
    free(d->accepting);
    free(d->lab);
    free(d->lab_to);
    free(d->lab_off);
    free(d);
}

int cm_dfa_alloc(cm_budget *b, uint32_t n_states, uint32_t n_classes, size_t n_lab, cm_dfa_out **out) {
    *out = NULL;
    int rc = cm_budget_charge(b, dfa_size(n_states, n_classes, n_lab));
    if (rc) return rc;
    cm_dfa_out *d = calloc(1, sizeof *d);
    if (d) {
        d->n_states = n_states;
        d->n_classes = n_classes;
        d->trans = malloc(((size_t)n_states * n_classes + 1) * sizeof *d->trans);
        d->accepting = malloc((size_t)n_states + 1);
        d->lab_off = malloc(((size_t)n_states + 1) * sizeof *d->lab_off);
        d->lab = malloc((n_lab + 1) * sizeof *d->lab);
        d->lab_to = malloc((n_lab + 1) * sizeof *d->lab_to);
    }
    if (!d || !d->trans || !d->accepting || !d->lab_off || !d->lab || !d->lab_to) {
        cm_dfa_out_free(d);
        cm_budget_release(b, dfa_size(n_states, n_classes, n_lab));
        return CM_ERR_NOMEM;
    }
    *out = d;
    return CM_OK;
}

void cm_dfa_release(cm_budget *b, cm_dfa_out *d) {
    if (!d) return;
    cm_budget_release(b, cm_dfa_bytes(d));
    cm_dfa_out_free(d);
}

void cm_dfa_merge_classes(cm_budget *b, cm_dfa_out *d) {
    uint32_t nc = d->n_classes, n = d->n_states, k = 1;
    uint8_t keep[256] = {1};
    if (nc < 2) return;
    for (uint32_t s = 0; s < n; s++) {
        const int32_t *row = d->trans + (size_t)s * nc;
        for (uint32_t c = 1; c < nc; c++) keep[c] |= row[c] != row[c - 1];
    }
    for (uint32_t c = 1; c < nc; c++) k += keep[c];
    if (k == nc) return;
    size_t before = cm_dfa_bytes(d);
    for (uint32_t s = 0; s < n; s++) { /* in place: entry s * k + j never passes s * nc + c */
        const int32_t *row = d->trans + (size_t)s * nc;
        int32_t *to = d->trans + (size_t)s * k;
        for (uint32_t c = 0, j = 0; c < nc; c++)
            if (keep[c]) to[j++] = row[c];
    }
    for (uint32_t c = 0, j = 0; c < nc; c++)
        if (keep[c]) d->class_lo[j++] = d->class_lo[c];
    d->class_lo[k] = 256;
    d->n_classes = k;
    cm_budget_release(b, before - cm_dfa_bytes(d));
}

/* Renumber d's labels to 0..n-1 in increasing order of their values; used[] (room for
 * d->lab_off[n_states] entries) receives the distinct old values, ascending. */
int cm_dfa_compact_labels(cm_dfa_out *d, uint32_t *used, uint32_t *n_used) {
    size_t m = d->lab_off[d->n_states];
    *n_used = 0;
    if (!m) return CM_OK;
    memcpy(used, d->lab, m * sizeof *used);
    size_t k = cm_sort_unique_u32(used, m);
    for (size_t i = 0; i < m; i++) d->lab[i] = cm_rank_u32(used, k, d->lab[i]);
    *n_used = (uint32_t)k;
    return CM_OK;
}

/* ---- trimming (automata._trim_all) --------------------------------------- */

/* Push the unmarked successors of s (byte edges, label edges with label_ok) that
 * `allowed` admits (NULL: all) onto stack, marking them in seen. */
static int push_successors(const cm_dfa_out *d, const uint8_t *label_ok, uint32_t s, const uint8_t *allowed,
                           uint8_t *seen, cm_vec32 *stack) {
    const int32_t *row = d->trans + (size_t)s * d->n_classes;
    int rc = CM_OK;
    for (uint32_t c = 0; !rc && c < d->n_classes; c = cm_run_end(row, c, d->n_classes)) { /* a run: one target */
        int32_t t = row[c];
        if (t >= 0 && (!allowed || allowed[t]) && !seen[t]) {
            seen[t] = 1;
            rc = cm_vec_push(stack, (uint32_t)t);
        }
    }
    for (uint32_t e = d->lab_off[s]; !rc && e < d->lab_off[s + 1]; e++) {
        uint32_t t = d->lab_to[e];
        if (label_ok[d->lab[e]] && (!allowed || allowed[t]) && !seen[t]) {
            seen[t] = 1;
            rc = cm_vec_push(stack, t);
        }
    }
    return rc;
}

int cm_dfa_can_accept(const cm_dfa_out *d, const uint8_t *label_ok, int *result) {
    uint8_t *seen = calloc((size_t)d->n_states + 1, 1);
    cm_vec32 stack = {0};
    int rc = seen ? cm_vec_push(&stack, 0) : CM_ERR_NOMEM;
    *result = 0;
    if (!rc) seen[0] = 1;
    while (!rc && stack.n) {
        uint32_t s = stack.data[--stack.n];
        if (d->accepting[s]) {
            *result = 1;
            break;
        }
        rc = push_successors(d, label_ok, s, NULL, seen, &stack);
    }
    free(seen);
    cm_vec_free(&stack);
    return rc;
}

/* The edges of d as (source, target) pairs: byte edges (a row scan each state), then label
 * edges with label_ok.  One pass over the dense table. */
static int edge_list(const cm_dfa_out *d, const uint8_t *label_ok, cm_vec32 *src, cm_vec32 *dst) {
    uint32_t n = d->n_states, nc = d->n_classes;
    int rc = CM_OK;
    for (uint32_t s = 0; !rc && s < n; s++) {
        const int32_t *row = d->trans + (size_t)s * nc;
        for (uint32_t c = 0, c1; !rc && c < nc; c = c1) {
            c1 = cm_run_end(row, c, nc);
            if (row[c] >= 0) { /* a run of classes: one edge */
                rc = cm_vec_push(src, s);
                if (!rc) rc = cm_vec_push(dst, (uint32_t)row[c]);
            }
        }
        for (uint32_t e = d->lab_off[s]; !rc && e < d->lab_off[s + 1]; e++)
            if (label_ok[d->lab[e]]) {
                rc = cm_vec_push(src, s);
                if (!rc) rc = cm_vec_push(dst, d->lab_to[e]);
            }
    }
    return rc;
}

/* Predecessors of each state over byte edges and label edges with label_ok, as CSR
 * (pre[pre_off[t] .. pre_off[t+1]), sources in increasing order; a source may repeat). */
static int predecessors(const cm_dfa_out *d, const uint8_t *label_ok, uint32_t **pre_off_out, uint32_t **pre_out) {
    uint32_t n = d->n_states;
    cm_vec32 src = {0}, dst = {0};
    int rc = edge_list(d, label_ok, &src, &dst);
    uint32_t *pre_off = rc ? NULL : calloc((size_t)n + 2, sizeof *pre_off);
    uint32_t *pre = pre_off ? malloc((src.n + 1) * sizeof *pre) : NULL;
    if (!rc && pre) {
        for (size_t i = 0; i < dst.n; i++) pre_off[dst.data[i] + 2]++;
        for (uint32_t t = 0; t < n; t++) pre_off[t + 2] += pre_off[t + 1];
        for (size_t i = 0; i < src.n; i++) pre[pre_off[dst.data[i] + 1]++] = src.data[i];
    }
    cm_vec_free(&src), cm_vec_free(&dst);
    if (rc || !pre) {
        free(pre_off);
        return rc ? rc : CM_ERR_NOMEM;
    }
    *pre_off_out = pre_off;
    *pre_out = pre;
    return CM_OK;
}

/* live[s]: s can reach an accepting state. */
static int mark_live(const cm_dfa_out *d, const uint8_t *label_ok, uint8_t *live) {
    uint32_t *pre_off = NULL, *pre = NULL;
    cm_vec32 stack = {0};
    int rc = predecessors(d, label_ok, &pre_off, &pre);
    for (uint32_t s = 0; !rc && s < d->n_states; s++)
        if (d->accepting[s]) {
            live[s] = 1;
            rc = cm_vec_push(&stack, s);
        }
    while (!rc && stack.n) {
        uint32_t t = stack.data[--stack.n];
        for (uint32_t k = pre_off[t]; !rc && k < pre_off[t + 1]; k++)
            if (!live[pre[k]]) {
                live[pre[k]] = 1;
                rc = cm_vec_push(&stack, pre[k]);
            }
    }
    free(pre_off), free(pre), cm_vec_free(&stack);
    return rc;
}

/* reach[s]: s is reachable from the start through live states (live[0] holds). */
static int mark_reachable(const cm_dfa_out *d, const uint8_t *label_ok, const uint8_t *live, uint8_t *reach) {
    cm_vec32 stack = {0};
    int rc = cm_vec_push(&stack, 0);
    reach[0] = 1;
    while (!rc && stack.n) rc = push_successors(d, label_ok, stack.data[--stack.n], live, reach, &stack);
    cm_vec_free(&stack);
    return rc;
}

/* The DFA of d's states with reach[s], renumbered in order. */
static int copy_reachable(const cm_dfa_out *d, const uint8_t *label_ok, const uint8_t *reach, uint32_t *new_id,
                          cm_dfa_out **out) {
    uint32_t n = d->n_states, nc = d->n_classes, k = 0, nl = 0;
    size_t n_lab = 0;
    for (uint32_t s = 0; s < n; s++) {
        new_id[s] = reach[s] ? k++ : UINT32_MAX;
        for (uint32_t e = d->lab_off[s]; reach[s] && e < d->lab_off[s + 1]; e++)
            n_lab += label_ok[d->lab[e]] && reach[d->lab_to[e]];
    }
    cm_dfa_out *o;
    int rc = cm_dfa_alloc(NULL, k, nc, n_lab, &o);
    if (rc) return rc;
    memcpy(o->class_lo, d->class_lo, sizeof o->class_lo);
    o->lab_off[0] = 0;
    bool all = k == n; /* every state stays, numbered as it was: the table as it is */
    if (all) memcpy(o->trans, d->trans, (size_t)n * nc * sizeof *o->trans);
    for (uint32_t s = 0; s < n; s++) {
        if (!reach[s]) continue;
        uint32_t i = new_id[s];
        const int32_t *row = d->trans + (size_t)s * nc;
        int32_t *orow = o->trans + (size_t)i * nc;
        for (uint32_t c = 0, c1; !all && c < nc; c = c1) {
            c1 = cm_run_end(row, c, nc);
            int32_t to = (row[c] >= 0 && reach[row[c]]) ? (int32_t)new_id[row[c]] : -1;
            for (uint32_t i = c; i < c1; i++) orow[i] = to;
        }
        o->accepting[i] = d->accepting[s];
        for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++)
            if (label_ok[d->lab[e]] && reach[d->lab_to[e]]) {
                o->lab[nl] = d->lab[e];
                o->lab_to[nl++] = new_id[d->lab_to[e]];
            }
        o->lab_off[i + 1] = nl;
    }
    *out = o;
    return CM_OK;
}

int cm_dfa_trim(const cm_dfa_out *d, const uint8_t *label_ok, cm_dfa_out **out) {
    uint32_t n = d->n_states;
    *out = NULL;
    uint8_t *live = calloc((size_t)n + 1, 1), *reach = calloc((size_t)n + 1, 1);
    uint32_t *new_id = malloc(((size_t)n + 1) * sizeof *new_id);
    int rc = (live && reach && new_id) ? mark_live(d, label_ok, live) : CM_ERR_NOMEM;
    if (!rc && live[0]) rc = mark_reachable(d, label_ok, live, reach);
    if (!rc && live[0]) rc = copy_reachable(d, label_ok, reach, new_id, out);
    free(live), free(reach), free(new_id);
    return rc;
}
