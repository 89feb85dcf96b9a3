/* The end of the automaton stage in one call (automata._trim_all, _flatten): the
 * runtime rules of a grammar (those the start rule reaches), the productive ones,
 * each trimmed to the states that can still complete, and all of them in one state
 * numbering.  Rules are given by name index; DFA labels are label values, which
 * in->label maps names to. */
#include <stdlib.h>
#include <string.h>

#include "cstats.h"
#include "fsm.h"
#include "internal.h"

typedef struct {
    const cm_ir_input *in;
    const uint8_t *is_token;       /* [n_names] */
    cm_budget *bud;
    uint32_t *name_of;             /* [n_names] label value -> name index */
    uint8_t *seen, *prod, *ok;     /* [n_names], [n_names], [label ids] */
    const cm_ir_frag *rules;       /* [n_names] the caller's DFAs */
    cm_ir_frag *trimmed;           /* [n_names]; a DFA trim kept whole is the caller's (rules[]) */
    cm_vec32 order;
} finisher;

/* The name of label l of DFA r. */
static uint32_t label_name(const finisher *f, const cm_ir_frag *r, uint32_t l) { return f->name_of[r->labels[l]]; }

/* Breadth first from start, each DFA's callees in order of first use (states in order,
 * each state's labels by value): automata._runtime_rules. */
static int runtime_rules(finisher *f, const cm_ir_frag *rules, uint32_t start) {
    uint32_t n_names = f->in->n_names;
    memset(f->seen, 0, n_names);
    f->order.n = 0;
    f->seen[start] = 1;
    int rc = cm_vec_push(&f->order, start);
    for (size_t i = 0; !rc && i < f->order.n; i++) {
        const cm_ir_frag *r = &rules[f->order.data[i]];
        if (!r->dfa) return CM_ERR_ARG; /* a callee without an automaton */
        for (uint32_t e = 0; !rc && e < r->dfa->lab_off[r->dfa->n_states]; e++) {
            if (r->labels[r->dfa->lab[e]] >= n_names) return CM_ERR_ARG;
            uint32_t c = label_name(f, r, r->dfa->lab[e]);
            if (f->seen[c] || f->is_token[c]) continue;
            f->seen[c] = 1;
            rc = cm_vec_push(&f->order, c);
        }
    }
    return rc;
}

/* f->ok[l] for the labels of r: is the label's rule (or token) productive? */
static void label_mask(finisher *f, const cm_ir_frag *r) {
    for (uint32_t e = 0; e < r->dfa->lab_off[r->dfa->n_states]; e++)
        f->ok[r->dfa->lab[e]] = f->prod[label_name(f, r, r->dfa->lab[e])];
}

/* The productive rules of f->order: the least fixpoint of "accepts some string
 * through productive labels" (token terminals always are).  Each pass runs
 * backwards over the breadth-first order, so a chain of rules, each calling the
 * next (an object's members walked in order), settles in one pass, not one per link. */
static int productive(finisher *f, const cm_ir_frag *rules) {
    memcpy(f->prod, f->is_token, f->in->n_names);
    int rc = CM_OK;
    for (bool changed = true; !rc && changed;) {
        changed = false;
        if ((rc = cm_budget_time(f->bud))) break;
        for (size_t i = f->order.n; !rc && i-- > 0;) {
            uint32_t n = f->order.data[i];
            int yes = 0;
            if (f->prod[n]) continue;
            label_mask(f, &rules[n]);
            rc = cm_dfa_can_accept(rules[n].dfa, f->ok, &yes);
            if (yes) f->prod[n] = 1, changed = true;
        }
    }
    return rc;
}

/* Every productive runtime rule without its dead states and unproductive calls. */
static int trim_all(finisher *f, const cm_ir_frag *rules) {
    int rc = CM_OK;
    for (size_t i = 0; !rc && i < f->order.n; i++) {
        uint32_t n = f->order.data[i];
        if (!f->prod[n]) continue;
        label_mask(f, &rules[n]);
        const cm_dfa_out *t = NULL;
        if ((rc = cm_dfa_trim_shared(rules[n].dfa, f->ok, &t))) break;
        if (!t) return CM_ERR_ARG; /* a productive rule's start state is live */
        f->trimmed[n] = (cm_ir_frag){t, rules[n].labels};
        if (t == rules[n].dfa) continue; /* shared, not copied: nothing new to count */
        rc = cm_budget_charge(f->bud, cm_dfa_bytes(t));
        if (rc) f->trimmed[n].dfa = NULL, cm_dfa_out_free((cm_dfa_out *)t);
    }
    return rc ? rc : cm_budget_time(f->bud);
}

void cm_flat_rules_free(cm_flat_rules *x) {
    if (!x) return;
    free(x->rule_name), free(x->rule_state), free(x->rule_trans), free(x->byte_class), free(x->trans);
    free(x->accepting), free(x->lab_off), free(x->lab_name), free(x->lab_to);
    free(x);
}

/* A cm_flat_rules with room for n_rules rules of n_states states, n_trans transitions and
 * n_lab label edges. */
static cm_flat_rules *flat_alloc(uint32_t n_rules, size_t n_states, size_t n_trans, size_t n_lab) {
    cm_flat_rules *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->rule_name = malloc(((size_t)n_rules + 1) * sizeof *x->rule_name);
    x->rule_state = malloc(((size_t)n_rules + 1) * sizeof *x->rule_state);
    x->rule_trans = malloc(((size_t)n_rules + 1) * sizeof *x->rule_trans);
    x->byte_class = malloc((size_t)n_rules * 256 + 1);
    x->trans = malloc((n_trans + 1) * sizeof *x->trans);
    x->accepting = malloc(n_states + 1);
    x->lab_off = malloc((n_states + 1) * sizeof *x->lab_off);
    x->lab_name = malloc((n_lab + 1) * sizeof *x->lab_name);
    x->lab_to = malloc((n_lab + 1) * sizeof *x->lab_to);
    if (!x->rule_name || !x->rule_state || !x->rule_trans || !x->byte_class || !x->trans || !x->accepting
        || !x->lab_off || !x->lab_name || !x->lab_to) {
        cm_flat_rules_free(x);
        return NULL;
    }
    return x;
}

/* out[i] = in[i] + b, -1 staying -1 (branch free: vectorized, 8 lanes in the AVX2 clone: the
 * copy of every rule's rows into the flat table, one of the compile's largest loops). */
CM_TABLE_CLONES static void rows_at(int32_t *restrict out, const int32_t *restrict in, size_t m, int32_t b) {
    for (size_t i = 0; i < m; i++) out[i] = in[i] + (b & ~(in[i] >> 31));
}

/* Rule r (DFA t) into x from state base and transition offset toff. */
static void flat_rule(const finisher *f, cm_flat_rules *x, uint32_t r, const cm_ir_frag *t, uint32_t base,
                      size_t toff) {
    const cm_dfa_out *d = t->dfa;
    uint8_t *cls = x->byte_class + (size_t)r * 256;
    for (uint32_t c = 0; c < d->n_classes; c++)
        memset(cls + d->class_lo[c], (int)c, d->class_lo[c + 1] - d->class_lo[c]);
    rows_at(x->trans + toff, d->trans, (size_t)d->n_states * d->n_classes, (int32_t)base);
    memcpy(x->accepting + base, d->accepting, d->n_states);
    uint32_t e0 = x->lab_off[base];
    for (uint32_t s = 0; s < d->n_states; s++) {
        for (uint32_t e = d->lab_off[s]; e < d->lab_off[s + 1]; e++) {
            x->lab_name[e0 + e] = label_name(f, t, d->lab[e]);
            x->lab_to[e0 + e] = d->lab_to[e] + base;
        }
        x->lab_off[base + s + 1] = e0 + d->lab_off[s + 1];
    }
}

/* The rules of f->order (DFAs f->trimmed) in one numbering. */
static int flatten(finisher *f, cm_flat_rules **out) {
    size_t n_states = 0, n_trans = 0, n_lab = 0;
    for (size_t i = 0; i < f->order.n; i++) {
        const cm_dfa_out *d = f->trimmed[f->order.data[i]].dfa;
        n_states += d->n_states;
        n_trans += (size_t)d->n_states * d->n_classes;
        n_lab += d->lab_off[d->n_states];
    }
    if (n_states >= INT32_MAX || n_trans >= UINT32_MAX || n_lab >= UINT32_MAX) return CM_ERR_NOMEM;
    cm_flat_rules *x = flat_alloc((uint32_t)f->order.n, n_states, n_trans, n_lab);
    if (!x) return CM_ERR_NOMEM;
    x->n_rules = (uint32_t)f->order.n;
    x->n_states = (uint32_t)n_states;
    x->lab_off[0] = 0;
    uint32_t base = 0;
    size_t toff = 0;
    for (uint32_t r = 0; r < x->n_rules; r++) {
        const cm_ir_frag *t = &f->trimmed[f->order.data[r]];
        x->rule_name[r] = f->order.data[r];
        x->rule_state[r] = base;
        x->rule_trans[r] = (uint32_t)toff;
        flat_rule(f, x, r, t, base, toff);
        base += t->dfa->n_states;
        toff += (size_t)t->dfa->n_states * t->dfa->n_classes;
    }
    x->rule_state[x->n_rules] = base;
    x->rule_trans[x->n_rules] = (uint32_t)toff;
    *out = x;
    return CM_OK;
}

/* name_of (label value -> name), and room for the label masks of every rule. */
static int finisher_init(finisher *f, const cm_ir_frag *rules) {
    uint32_t n = f->in->n_names, n_ok = 1;
    int rc = CM_OK;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t e = 0; rules[i].dfa && e < rules[i].dfa->lab_off[rules[i].dfa->n_states]; e++)
            if (rules[i].dfa->lab[e] >= n_ok) n_ok = rules[i].dfa->lab[e] + 1;
    f->name_of = cm_balloc(f->bud, ((size_t)n + 1) * sizeof *f->name_of, false, &rc);
    f->seen = cm_balloc(f->bud, (size_t)n + 1, false, &rc);
    f->prod = cm_balloc(f->bud, (size_t)n + 1, false, &rc);
    f->ok = cm_balloc(f->bud, n_ok, true, &rc);
    f->trimmed = cm_balloc(f->bud, ((size_t)n + 1) * sizeof *f->trimmed, true, &rc);
    if (rc) return rc;
    memset(f->seen, 0, n);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = f->in->label[i];
        if (v >= n || f->seen[v]) return CM_ERR_ARG; /* label values are a permutation */
        f->seen[v] = 1;
        f->name_of[v] = i;
    }
    return CM_OK;
}

static void finisher_free(finisher *f) {
    for (uint32_t i = 0; f->trimmed && i < f->in->n_names; i++)
        if (f->trimmed[i].dfa != f->rules[i].dfa) cm_dfa_release(f->bud, (cm_dfa_out *)f->trimmed[i].dfa);
    cm_bfree(f->bud, f->name_of), cm_bfree(f->bud, f->seen), cm_bfree(f->bud, f->prod), cm_bfree(f->bud, f->ok);
    cm_bfree(f->bud, f->trimmed);
    cm_vec_free(&f->order);
}

int cm_compile_finish(const cm_ir_input *in, const cm_ir_frag *rules, const uint8_t *is_token, uint32_t start,
                      cm_budget *budget, cm_flat_rules **out) {
    if (!in || !in->label || !rules || !is_token || !out || start >= in->n_names) return CM_ERR_ARG;
    *out = NULL;
    finisher f = {.in = in, .is_token = is_token, .bud = budget, .rules = rules, .order = {.bud = budget}};
    uint64_t t0 = cm_stats_now();
    int rc = finisher_init(&f, rules);
    if (!rc) rc = runtime_rules(&f, rules, start);
    if (!rc) rc = productive(&f, rules);
    cm_stats_add(CM_PH_PRODUCTIVE, t0);
    if (!rc && !f.prod[start]) { /* the language is empty */
        *out = calloc(1, sizeof **out);
        rc = *out ? CM_OK : CM_ERR_NOMEM;
    } else if (!rc) {
        t0 = cm_stats_now();
        rc = trim_all(&f, rules);
        if (!rc) rc = runtime_rules(&f, f.trimmed, start);
        cm_stats_add(CM_PH_TRIM, t0);
        t0 = cm_stats_now();
        if (!rc) rc = flatten(&f, out);
        cm_stats_add(CM_PH_FLATTEN, t0);
    }
    finisher_free(&f);
    return rc;
}
