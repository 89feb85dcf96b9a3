/* The product of character automata for the JSON Schema front end (cfgmask/frontends/
 * json_schema/chardfa.py, regions): the states reachable from the start tuple, breadth
 * first, each state's successors in atom order, as the Python loop numbered them.  One
 * open-addressing table of state tuples; at most max_states states, so every buffer is
 * sized once. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cfgmask.h"

static uint64_t tuple_hash(const uint32_t *t, uint32_t k) {
    uint64_t h = 1469598103934665603ULL;
    for (uint32_t i = 0; i < k; i++)
        h = (h ^ t[i]) * 1099511628211ULL;
    return h ^ (h >> 29);
}

int cm_dfa_product(const uint32_t *rows, size_t n_rows, const uint32_t *sizes, uint32_t k, uint32_t n_atoms,
                   uint32_t max_states, uint32_t *n_out, uint32_t **trans_out, uint32_t **states_out) {
    *n_out = 0;
    *trans_out = *states_out = NULL;
    if (k == 0 || n_atoms == 0 || max_states == 0 || max_states > INT32_MAX || !rows || !sizes)
        return CM_ERR_ARG;
    /* every component's rows in range, every target one of its states */
    size_t total = 0;
    for (uint32_t i = 0; i < k; i++) {
        if (sizes[i] == 0 || (size_t)sizes[i] > (SIZE_MAX / n_atoms) || total > n_rows)
            return CM_ERR_ARG;
        size_t len = (size_t)sizes[i] * n_atoms;
        if (len > n_rows - total)
            return CM_ERR_ARG;
        for (size_t j = 0; j < len; j++)
            if (rows[total + j] >= sizes[i])
                return CM_ERR_ARG;
        total += len;
    }
    if (total != n_rows)
        return CM_ERR_ARG;
    size_t *off = malloc(k * sizeof(size_t));
    if (!off)
        return CM_ERR_NOMEM;
    total = 0;
    for (uint32_t i = 0; i < k; i++) {
        off[i] = total;
        total += (size_t)sizes[i] * n_atoms;
    }
    size_t hsize = 16;
    while (hsize < 2 * (size_t)max_states + 2)
        hsize <<= 1;
    size_t mask = hsize - 1;
    int32_t *tab = malloc(hsize * sizeof(int32_t));
    uint32_t *st = malloc((size_t)max_states * k * sizeof(uint32_t));
    uint32_t *tmp = malloc(k * sizeof(uint32_t));
    uint32_t *tr = NULL;
    size_t tr_cap = 0;
    int rc = CM_OK;
    if (!tab || !st || !tmp) {
        rc = CM_ERR_NOMEM;
        goto done;
    }
    memset(tab, 0xff, hsize * sizeof(int32_t));
    memset(st, 0, k * sizeof(uint32_t));
    tab[tuple_hash(st, k) & mask] = 0;
    uint32_t n = 1;
    for (uint32_t cur = 0; cur < n; cur++) {
        if ((size_t)(cur + 1) * n_atoms > tr_cap) {
            size_t cap = tr_cap ? 2 * tr_cap : 64 * (size_t)n_atoms;
            if (cap > (size_t)max_states * n_atoms)
                cap = (size_t)max_states * n_atoms;
            uint32_t *grown = realloc(tr, cap * sizeof(uint32_t));
            if (!grown) {
                rc = CM_ERR_NOMEM;
                goto done;
            }
            tr = grown;
            tr_cap = cap;
        }
        const uint32_t *from = st + (size_t)cur * k;
        for (uint32_t b = 0; b < n_atoms; b++) {
            for (uint32_t i = 0; i < k; i++)
                tmp[i] = rows[off[i] + (size_t)from[i] * n_atoms + b];
            size_t h = tuple_hash(tmp, k) & mask;
            int32_t j;
            while ((j = tab[h]) >= 0 && memcmp(st + (size_t)j * k, tmp, k * sizeof(uint32_t)) != 0)
                h = (h + 1) & mask;
            if (j < 0) {
                if (n >= max_states) {
                    rc = CM_ERR_LIMIT;
                    goto done;
                }
                memcpy(st + (size_t)n * k, tmp, k * sizeof(uint32_t));
                j = (int32_t)n;
                tab[h] = j;
                n++;
            }
            tr[(size_t)cur * n_atoms + b] = (uint32_t)j;
        }
    }
    *n_out = n;
    *trans_out = tr;
    *states_out = st;
    tr = st = NULL;
done:
    free(off);
    free(tab);
    free(tmp);
    free(tr);
    free(st);
    return rc;
}

int cm_dfa_trim_labels(const int32_t *trans, uint32_t n, uint32_t m, const uint8_t *accept, uint32_t *lab_off,
                       uint32_t *lab, uint32_t *lab_to, uint32_t *eps_off, uint32_t *eps_to) {
    if (n == 0 || m == 0 || !trans || !accept || (size_t)n > SIZE_MAX / m || n == UINT32_MAX)
        return CM_ERR_ARG;
    size_t nm = (size_t)n * m;
    for (size_t j = 0; j < nm; j++)
        if (trans[j] < -1 || trans[j] >= (int32_t)n)
            return CM_ERR_ARG;
    /* predecessors by target (CSR), then the states that reach an accepting one */
    uint32_t *rev_off = calloc((size_t)n + 1, sizeof(uint32_t));
    uint32_t *rev = malloc((nm ? nm : 1) * sizeof(uint32_t));
    uint32_t *stack = malloc((size_t)n * sizeof(uint32_t));
    uint8_t *live = calloc(n, 1);
    int rc = CM_OK;
    if (!rev_off || !rev || !stack || !live) {
        rc = CM_ERR_NOMEM;
        goto done;
    }
    for (size_t j = 0; j < nm; j++)
        if (trans[j] >= 0)
            rev_off[trans[j] + 1]++;
    for (uint32_t s = 0; s < n; s++)
        rev_off[s + 1] += rev_off[s];
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t a = 0; a < m; a++) {
            int32_t t = trans[(size_t)s * m + a];
            if (t >= 0)
                rev[rev_off[t]++] = s;
        }
    for (uint32_t s = n; s > 0; s--) /* back to the starts */
        rev_off[s] = rev_off[s - 1];
    rev_off[0] = 0;
    size_t top = 0;
    for (uint32_t s = 0; s < n; s++)
        if (accept[s]) {
            live[s] = 1;
            stack[top++] = s;
        }
    while (top) {
        uint32_t t = stack[--top];
        for (uint32_t e = rev_off[t]; e < rev_off[t + 1]; e++)
            if (!live[rev[e]]) {
                live[rev[e]] = 1;
                stack[top++] = rev[e];
            }
    }
    if (!live[0]) {
        rc = 0;
        goto done;
    }
    uint32_t k = 0, x = 0;
    lab_off[0] = eps_off[0] = 0;
    for (uint32_t s = 0; s < n; s++) {
        if (live[s]) {
            for (uint32_t a = 0; a < m; a++) {
                int32_t t = trans[(size_t)s * m + a];
                if (t >= 0 && live[t]) {
                    lab[k] = a;
                    lab_to[k++] = (uint32_t)t;
                }
            }
            if (accept[s])
                eps_to[x++] = n;
        }
        lab_off[s + 1] = k;
        eps_off[s + 1] = x;
    }
    lab_off[n + 1] = k; /* the final state n: no edges */
    eps_off[n + 1] = x;
    rc = 1;
done:
    free(rev_off);
    free(rev);
    free(stack);
    free(live);
    return rc;
}
