/* The automata of a whole grammar in one call (automata._rule_dfas): every component
 * of the rule graph, callees first, each built from the encoded IR with the inlining
 * ladder of automata._build_component.  Python decides what is cached and how far each
 * rule may be inlined; this walks the components without crossing back. */
#include <stdlib.h>
#include <string.h>

#include "cstats.h"
#include "fsm.h"
#include "internal.h"

/* A name's DFA once its component is done. */
typedef struct {
    const cm_dfa_out *dfa;         /* NULL: not done (or not a rule) */
    const uint32_t *labels;
    uint32_t inline_cap;
} name_info;

typedef struct {
    const cm_ir_input *in;
    size_t max_states, inline_max_states;
    cm_budget *bud;
    name_info *names;              /* [n_names] */
    cm_vec32 usable, prev;         /* callees copied in this attempt, and in the one before */
    const cm_component *comps;
    cm_comp_dfa *out;
    size_t *at;                    /* [n_comps] where each component's members start in out */
    uint32_t *by_root, cap;        /* open addressing: built one-member component + 1, by body */
} session;

static bool inlined(const name_info *x) { return x->dfa && x->dfa->n_states <= x->inline_cap; }

/* The callees of c copied into it under `budget`: inlined, at most budget states. */
static int pick_usable(session *s, const cm_component *c, size_t budget) {
    int rc = CM_OK;
    s->usable.n = 0;
    for (uint32_t i = 0; !rc && i < c->n_callees; i++) {
        const name_info *x = &s->names[c->callees[i]];
        if (!x->dfa) return CM_ERR_ARG; /* callees come first */
        if (inlined(x) && x->dfa->n_states <= budget) rc = cm_vec_push(&s->usable, c->callees[i]);
    }
    return rc;
}

static int cmp_ref(const void *a, const void *b) {
    uint32_t x = ((const cm_ir_ref *)a)->name, y = ((const cm_ir_ref *)b)->name;
    return x < y ? -1 : x > y;
}

/* c's DFAs with the callees in s->usable copied in (automata._Session.build). */
static int attempt(session *s, const cm_component *c, const uint32_t *roots, cm_dfa_out **dfas) {
    uint32_t n_refs = 0, n_usable = (uint32_t)s->usable.n;
    int rc = CM_OK;
    cm_ir_ref *refs = cm_balloc(s->bud, ((size_t)c->n_members + n_usable + 1) * sizeof *refs, false, &rc);
    cm_ir_frag *frags = cm_balloc(s->bud, ((size_t)n_usable + 1) * sizeof *frags, false, &rc);
    if (rc) goto out;
    for (uint32_t i = 0; c->right_linear && i < c->n_members; i++)
        refs[n_refs++] = (cm_ir_ref){c->members[i].name, CM_IR_REF_ENTRY, i};
    for (uint32_t j = 0; j < n_usable; j++) {
        const name_info *x = &s->names[s->usable.data[j]];
        refs[n_refs++] = (cm_ir_ref){s->usable.data[j], CM_IR_REF_EMBED, j};
        frags[j] = (cm_ir_frag){x->dfa, x->labels};
    }
    qsort(refs, n_refs, sizeof *refs, cmp_ref);
    cm_ir_input in = *s->in;
    in.refs = refs;
    in.n_refs = n_refs;
    in.frags = frags;
    in.n_frags = n_usable;
    rc = cm_fsm_build_ir(&in, roots, c->n_members, c->right_linear, s->max_states, s->bud, dfas);
out:
    cm_bfree(s->bud, refs);
    cm_bfree(s->bud, frags);
    return rc;
}

/* A component of one rule whose body is a literal set: its minimal DFA, built directly
 * (a literal set's automaton is no bigger than its text: max_states is for subset
 * construction; memory and time still count). */
static bool literal_set(const session *s, const cm_component *c, const uint32_t *roots) {
    return c->n_members == 1 && !c->right_linear && roots[0] < s->in->code_len
           && s->in->code[roots[0]] == CM_IR_WORDS;
}

/* c's DFAs, with less inlining while they exceed max_states.  An attempt that would copy
 * the same callees as the one before is not made again: it would fail the same way. */
static int build_component(session *s, const cm_component *c, const uint32_t *roots, cm_dfa_out **dfas) {
    size_t budgets[] = {s->inline_max_states, 64, 0};
    int rc = CM_ERR_LIMIT;
    if (literal_set(s, c, roots)) {
        uint64_t t0 = cm_stats_now();
        rc = cm_words_build(s->in, roots[0], s->bud, &dfas[0]);
        cm_stats_add(CM_PH_WORDS, t0);
        return rc;
    }
    for (size_t i = 0; i < sizeof budgets / sizeof *budgets; i++) {
        int prc = pick_usable(s, c, budgets[i]);
        if (prc) return prc;
        size_t n = s->usable.n;
        bool same = i && n == s->prev.n && (!n || !memcmp(s->usable.data, s->prev.data, n * sizeof *s->prev.data));
        if (same) continue;
        rc = attempt(s, c, roots, dfas);
        if (rc != CM_ERR_LIMIT) break;
        s->prev.n = 0;
        for (size_t j = 0; !prc && j < s->usable.n; j++) prc = cm_vec_push(&s->prev, s->usable.data[j]);
        if (prc) return prc;
    }
    return rc;
}

/* A component built earlier in this call that c is a twin of (one member, not right-linear,
 * the same body and callees: the IR is hash-consed, so equal bodies share their offset):
 * its index + 1, or 0 after recording c as the first of its kind. */
static uint32_t twin_of(session *s, uint32_t k) {
    const cm_component *c = &s->comps[k];
    if (!s->by_root || c->n_members != 1 || c->right_linear || c->cached) return 0;
    size_t i = (c->members[0].root * 2654435761u) & (s->cap - 1);
    for (; s->by_root[i]; i = (i + 1) & (s->cap - 1)) {
        const cm_component *t = &s->comps[s->by_root[i] - 1];
        if (t->members[0].root == c->members[0].root && t->n_callees == c->n_callees
            && (!c->n_callees || !memcmp(t->callees, c->callees, c->n_callees * sizeof *c->callees)))
            return s->out[s->at[s->by_root[i] - 1]].dfa ? s->by_root[i] : 0;
    }
    s->by_root[i] = k + 1;
    return 0;
}

/* out: a copy of built member x (its DFA counted against bud). */
static int copy_member(cm_budget *bud, const cm_comp_dfa *x, cm_comp_dfa *out) {
    const cm_dfa_out *d = x->dfa;
    size_t n_lab = d->lab_off[d->n_states];
    cm_dfa_out *o;
    int rc = cm_dfa_alloc(bud, d->n_states, d->n_classes, n_lab, &o);
    if (rc) return rc;
    memcpy(o->class_lo, d->class_lo, sizeof o->class_lo);
    memcpy(o->trans, d->trans, (size_t)d->n_states * d->n_classes * sizeof *o->trans);
    memcpy(o->accepting, d->accepting, d->n_states);
    memcpy(o->lab_off, d->lab_off, ((size_t)d->n_states + 1) * sizeof *o->lab_off);
    if (n_lab) memcpy(o->lab, d->lab, n_lab * sizeof *o->lab), memcpy(o->lab_to, d->lab_to, n_lab * sizeof *o->lab_to);
    out->labels = malloc((x->n_labels ? x->n_labels : 1) * sizeof *out->labels);
    if (!out->labels) {
        cm_dfa_release(bud, o);
        return CM_ERR_NOMEM;
    }
    if (x->n_labels) memcpy(out->labels, x->labels, x->n_labels * sizeof *out->labels);
    out->n_labels = x->n_labels;
    out->dfa = o;
    return CM_OK;
}

/* Hand DFA d to out with its labels compacted. */
static int take_member(cm_dfa_out *d, cm_comp_dfa *out) {
    size_t m = d->lab_off[d->n_states];
    out->labels = malloc((m ? m : 1) * sizeof *out->labels);
    if (!out->labels) return CM_ERR_NOMEM;
    cm_dfa_compact_labels(d, out->labels, &out->n_labels);
    out->dfa = d;
    return CM_OK;
}

/* Component k: built into out[0 .. n_members) (or copied from its twin), or its cached DFAs;
 * then known by name. */
static int do_component(session *s, uint32_t k, cm_comp_dfa *out) {
    const cm_component *c = &s->comps[k];
    int rc = CM_OK;
    for (uint32_t i = 0; i < c->n_members; i++)
        if (c->members[i].name >= s->in->n_names || (c->cached && !c->cached[i].dfa)) return CM_ERR_ARG;
    for (uint32_t i = 0; i < c->n_callees; i++)
        if (c->callees[i] >= s->in->n_names) return CM_ERR_ARG;
    uint32_t twin = c->cached ? 0 : twin_of(s, k);
    if (twin && (rc = copy_member(s->bud, &s->out[s->at[twin - 1]], &out[0]))) return rc;
    if (!c->cached && !twin) {
        cm_stats_name = c->members[0].name;
        uint32_t *roots = cm_balloc(s->bud, ((size_t)c->n_members + 1) * sizeof *roots, false, &rc);
        cm_dfa_out **dfas = cm_balloc(s->bud, ((size_t)c->n_members + 1) * sizeof *dfas, true, &rc);
        for (uint32_t i = 0; !rc && i < c->n_members; i++) roots[i] = c->members[i].root;
        if (!rc) rc = build_component(s, c, roots, dfas);
        for (uint32_t i = 0; dfas && i < c->n_members; i++) {
            if (!rc) rc = take_member(dfas[i], &out[i]);
            if (!out[i].dfa) cm_dfa_release(s->bud, dfas[i]); /* not handed over */
        }
        cm_bfree(s->bud, roots);
        cm_bfree(s->bud, dfas);
        if (rc) return rc;
    }
    for (uint32_t i = 0; i < c->n_members; i++) {
        name_info *x = &s->names[c->members[i].name];
        x->dfa = c->cached ? c->cached[i].dfa : out[i].dfa;
        x->labels = c->cached ? c->cached[i].labels : out[i].labels;
        x->inline_cap = c->members[i].inline_cap;
    }
    return CM_OK;
}

void cm_comp_dfa_free(cm_comp_dfa *d) {
    if (!d) return;
    cm_dfa_out_free(d->dfa);
    free(d->labels);
    d->dfa = NULL;
    d->labels = NULL;
    d->n_labels = 0;
}

int cm_compile_components(const cm_ir_input *in, const cm_component *comps, uint32_t n_comps, size_t max_states,
                          size_t inline_max_states, cm_budget *budget, cm_comp_dfa *out, uint32_t *failed) {
    if (!in || (n_comps && (!comps || !out)) || !failed) return CM_ERR_ARG;
    size_t n_out = 0;
    for (uint32_t k = 0; k < n_comps; k++) n_out += comps[k].n_members;
    if (n_out) memset(out, 0, n_out * sizeof *out);
    *failed = UINT32_MAX;
    session s = {.in = in, .max_states = max_states, .inline_max_states = inline_max_states, .bud = budget,
                 .usable = {.bud = budget}, .prev = {.bud = budget}, .comps = comps, .out = out};
    int rc = CM_OK;
    s.names = cm_balloc(budget, ((size_t)in->n_names + 1) * sizeof *s.names, true, &rc);
    s.at = cm_balloc(budget, ((size_t)n_comps + 1) * sizeof *s.at, false, &rc);
    for (s.cap = 16; s.cap < 2 * (size_t)n_comps; s.cap *= 2) {}
    s.by_root = cm_balloc(budget, (size_t)s.cap * sizeof *s.by_root, true, &rc);
    for (size_t k = 0, at = 0; !rc && k < n_comps; at += comps[k++].n_members) s.at[k] = at;
    for (uint32_t k = 0; !rc && k < n_comps; k++)
        if ((rc = do_component(&s, k, out + s.at[k]))) *failed = k;
    cm_bfree(budget, s.names), cm_bfree(budget, s.at), cm_bfree(budget, s.by_root);
    cm_vec_free(&s.usable), cm_vec_free(&s.prev);
    for (size_t i = 0; rc && i < n_out; i++) {
        cm_budget_release(budget, out[i].dfa ? cm_dfa_bytes(out[i].dfa) : 0);
        cm_comp_dfa_free(&out[i]);
    }
    return rc;
}
