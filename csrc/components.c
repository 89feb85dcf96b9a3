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
    const cm_dfa_out *dfa;         /* NULL: not done (or not a rule), or expanded */
    const uint32_t *labels;
    uint32_t inline_cap;
    uint32_t expand;               /* its component index + 1 while it is left to expand in its caller */
    uint32_t est;                  /* states its expansion adds to an NFA (EST_UNSET: not yet known) */
    uint32_t stamp;                /* the attempt that last picked it */
} name_info;

#define EST_UNSET UINT32_MAX
#define EST_MAX_DEPTH 2000 /* expansions nest in Thompson's recursion (TB_MAX_DEPTH 10,000) */

typedef struct {
    const cm_ir_input *in;
    size_t max_states, inline_max_states;
    cm_budget *bud;
    name_info *names;              /* [n_names] */
    cm_vec32 usable, prev;         /* callees copied in this attempt, and in the one before */
    cm_vec32 expanded;             /* callees expanded in this attempt, callees first */
    uint32_t stamp;                /* attempts that picked expansions so far */
    uint32_t failed;               /* component that failed (UINT32_MAX: the one being built) */
    const cm_component *comps;
    cm_comp_dfa *out;
    size_t *at;                    /* [n_comps] where each component's members start in out */
    uint32_t *by_root, cap;        /* open addressing: built one-member component + 1, by body */
    uint32_t n_watch;              /* callees expanded on trial in this attempt (cm_expand_watch) */
    uint32_t watch[CM_WATCH_MAX];
    size_t watch_cap[CM_WATCH_MAX]; /* the DFA states each may have */
} session;

static bool inlined(const name_info *x) { return x->dfa && x->dfa->n_states <= x->inline_cap; }

/* The callees of c copied into it under `budget`: inlined, at most budget states. */
static int pick_usable(session *s, const cm_component *c, size_t budget) {
    int rc = CM_OK;
    s->usable.n = 0;
    s->expanded.n = 0;
    for (uint32_t i = 0; !rc && i < c->n_callees; i++) {
        const name_info *x = &s->names[c->callees[i]];
        if (!x->dfa) return CM_ERR_ARG; /* callees come first (and are built: see settle) */
        if (inlined(x) && x->dfa->n_states <= budget) rc = cm_vec_push(&s->usable, c->callees[i]);
    }
    return rc;
}

static int build_component(session *s, const cm_component *c, const uint32_t *roots, cm_dfa_out **dfas);
static int take_member(cm_dfa_out *d, cm_comp_dfa *out);

/* Expanded component k built on its own after all (its callees are settled), into its
 * place in out; then known by name like any built component. */
static int materialize(session *s, uint32_t k) {
    const cm_component *c = &s->comps[k];
    name_info *x = &s->names[c->members[0].name];
    cm_comp_dfa *o = &s->out[s->at[k]];
    cm_dfa_out *d = NULL;
    uint32_t root = c->members[0].root, name = cm_stats_name, stamp = s->stamp;
    uint32_t n_watch = s->n_watch, watch[CM_WATCH_MAX]; /* the caller's trials, kept */
    size_t watch_cap[CM_WATCH_MAX];
    memcpy(watch, s->watch, sizeof watch), memcpy(watch_cap, s->watch_cap, sizeof watch_cap);
    cm_vec32 usable = s->usable, expanded = s->expanded, prev = s->prev; /* the caller's pick, kept */
    s->usable = (cm_vec32){.bud = s->bud}, s->expanded = (cm_vec32){.bud = s->bud}, s->prev = (cm_vec32){.bud = s->bud};
    cm_stats_name = c->members[0].name;
    x->expand = 0;
    int rc = build_component(s, c, &root, &d);
    cm_stats_name = name;
    s->n_watch = n_watch; /* (the caller's trials, if its pick made some) */
    memcpy(s->watch, watch, sizeof watch), memcpy(s->watch_cap, watch_cap, sizeof watch_cap);
    cm_vec_free(&s->usable), cm_vec_free(&s->expanded), cm_vec_free(&s->prev);
    s->usable = usable, s->expanded = expanded, s->prev = prev;
    if (s->stamp != stamp) { /* its picks stamped names of its own: the caller's again */
        if (++s->stamp == 0) s->stamp = 1;
        for (size_t j = 0; j < usable.n; j++) s->names[usable.data[j]].stamp = s->stamp;
        for (size_t j = 0; j < expanded.n; j++) s->names[expanded.data[j]].stamp = s->stamp;
    }
    if (!rc) rc = take_member(d, o);
    if (!o->dfa) cm_dfa_release(s->bud, d);
    if (rc) {
        if (s->failed == UINT32_MAX) s->failed = k;
        return rc;
    }
    x->dfa = o->dfa;
    x->labels = o->labels;
    return CM_OK;
}

/* States the NFA of node pc gets from Thompson's construction (thompson.c, tb_build),
 * expanded names counted by their estimates and copied ones by their DFAs; stops past
 * `cap` (returns cap + 1).  *depth: the deepest nesting seen. */
static size_t count_states(const session *s, uint32_t pc, size_t cap, uint32_t level, uint32_t *depth) {
    const cm_ir_input *in = s->in;
    if (level > EST_MAX_DEPTH || (size_t)pc + 2 > in->code_len) return cap + 1;
    if (level > *depth) *depth = level;
    const uint32_t *code = in->code;
    uint32_t op = code[pc], n = code[pc + 1];
    size_t got = 0;
    switch (op) {
    case CM_IR_LIT:
        return n ? n - 1u : 0;
    case CM_IR_BYTES:
        return 0;
    case CM_IR_UTF8: {
        size_t p = (size_t)pc + 2 + 2 * (size_t)n;
        if (p >= in->code_len) return cap + 1;
        uint32_t n_seqs = code[p++];
        for (uint32_t k = 0; k < n_seqs && got <= cap; k++) {
            if (p >= in->code_len || !code[p]) return cap + 1;
            got += code[p] - 1u;
            p += 1 + 2 * (size_t)code[p];
        }
        return got;
    }
    case CM_IR_SEQ:
    case CM_IR_ALT:
        if ((size_t)pc + 2 + n > in->code_len) return cap + 1;
        got = op == CM_IR_ALT ? n : n ? n - 1u : 0;
        for (uint32_t i = 0; i < n && got <= cap; i++) got += count_states(s, code[pc + 2 + i], cap, level + 1, depth);
        return got;
    case CM_IR_REPEAT: {
        if ((size_t)pc + 4 > in->code_len) return cap + 1;
        uint32_t lo = code[pc + 1], hi = code[pc + 2];
        size_t item = count_states(s, code[pc + 3], cap, level + 1, depth) + 1;
        size_t times = hi == CM_IR_INF ? (size_t)lo + 1 : hi;
        if (item > cap || times > cap) return cap + 1;
        got = item * times + (hi == CM_IR_INF);
        return got;
    }
    case CM_IR_REF: {
        if (n >= in->n_names) return cap + 1;
        const name_info *x = &s->names[n];
        if (x->expand) return x->est == EST_UNSET ? cap + 1 : x->est;
        return x->dfa && x->stamp == s->stamp ? x->dfa->n_states : 0; /* copied, or a call */
    }
    case CM_IR_WORDS:
        return (size_t)pc + 4 <= in->code_len ? (size_t)code[pc + 3] + 1 : cap + 1;
    default:
        return cap + 1;
    }
}

/* count_states with each SEQ/ALT child and expanded body counted once (seen: a bit per code
 * word), the way Thompson's tail memo shares them in practice: where count_states adds the same
 * nodes per path (sp_0, o88605: 2,000-3,343 for NFAs of 105-861) this is near the NFA, where
 * nothing is shared (sp_333/339) it is count_states.  Not a bound either way: it only decides
 * whether a trial is worth making (the trial's count is the guard). */
static size_t dag_states(const session *s, uint32_t pc, size_t cap, uint32_t level, uint8_t *seen) {
    const cm_ir_input *in = s->in;
    if (level > EST_MAX_DEPTH || (size_t)pc + 2 > in->code_len) return cap + 1;
    if (seen[pc >> 3] & 1u << (pc & 7)) return 0;
    seen[pc >> 3] |= (uint8_t)(1u << (pc & 7));
    const uint32_t *code = in->code;
    uint32_t op = code[pc], n = code[pc + 1], depth = 0;
    if (op == CM_IR_SEQ || op == CM_IR_ALT) {
        if ((size_t)pc + 2 + n > in->code_len) return cap + 1;
        size_t got = op == CM_IR_ALT ? n : n ? n - 1u : 0;
        for (uint32_t i = 0; i < n && got <= cap; i++) got += dag_states(s, code[pc + 2 + i], cap, level + 1, seen);
        return got;
    }
    if (op == CM_IR_REF && n < in->n_names && s->names[n].expand)
        return dag_states(s, s->comps[s->names[n].expand - 1].members[0].root, cap, level + 1, seen);
    return count_states(s, pc, cap, level, &depth);
}

/* A true bound on the minimal DFA of node pc where it is x{lo,hi} (hi finite) of a copied
 * callee x whose DFA D has no labels and is prefix-free (its start not accepting, its
 * accepting states without edges): hi x (|D| - 1) + 1 states, copy k's accepting states being
 * copy k + 1's start (D's edges from each; the last's cut).  SIZE_MAX where it is not such a
 * node.  count_states's NFA count of the same node is hi x (|D| + 1), ~1.14x on a char class
 * of 15 states: the cap turned down strings whose DFA fits it (issue 12, helper `inline38`). */
static size_t chain_bound(const session *s, uint32_t pc) {
    const cm_ir_input *in = s->in;
    if ((size_t)pc + 4 > in->code_len || in->code[pc] != CM_IR_REPEAT) return SIZE_MAX;
    uint32_t hi = in->code[pc + 2], item = in->code[pc + 3];
    if (hi == CM_IR_INF || hi == 0 || (size_t)item + 2 > in->code_len || in->code[item] != CM_IR_REF) return SIZE_MAX;
    uint32_t y = in->code[item + 1];
    if (y >= in->n_names) return SIZE_MAX;
    const name_info *x = &s->names[y];
    const cm_dfa_out *d = x->expand || x->stamp != s->stamp ? NULL : x->dfa; /* copied (count_states's REF) */
    if (!d || d->n_states < 2 || d->accepting[0] || d->lab_off[d->n_states]) return SIZE_MAX;
    for (uint32_t q = 0; q < d->n_states; q++) {
        if (!d->accepting[q]) continue;
        for (uint32_t k = 0; k < d->n_classes; k++)
            if (d->trans[(size_t)q * d->n_classes + k] >= 0) return SIZE_MAX;
    }
    return (size_t)hi * (d->n_states - 1) + 1;
}

/* Every name below c's callees settled for c's first attempt, and picked under `budget`:
 * an expanded callee whose estimate (its NFA's states, a bound in practice of its minimal
 * DFA's) is within its inline cap and the budget stays expanded (its own callees picked the
 * same way), any other is built now (materialize) and copied if inlined within the budget.
 * s->usable and s->expanded receive them (expanded callees first). */
static int pick_expanding(session *s, const uint32_t *callees, uint32_t n, size_t budget, bool trial) {
    int rc = CM_OK;
    for (uint32_t i = 0; !rc && i < n; i++) {
        uint32_t y = callees[i];
        name_info *x = &s->names[y];
        if (x->stamp == s->stamp) continue;
        x->stamp = s->stamp;
        if (x->expand) {
            const cm_component *c = &s->comps[x->expand - 1];
            uint32_t w0 = s->n_watch; /* x's nested trials are s->watch[w0..] */
            if ((rc = pick_expanding(s, c->callees, c->n_callees, budget, trial))) break;
            uint32_t depth = 0, cap = x->inline_cap < budget ? x->inline_cap : (uint32_t)budget;
            size_t est = count_states(s, c->members[0].root, cap, 0, &depth);
            size_t chain = chain_bound(s, c->members[0].root); /* (a bound of the DFA, start and final included) */
            if (chain != SIZE_MAX && chain < est + 2) est = chain - 2;
            if (est + 2 <= cap) { /* its own NFA: these and a start and a final state */
                x->est = (uint32_t)est;
                rc = cm_vec_push(&s->expanded, y);
                continue;
            }
            uint32_t op = c->members[0].root < s->in->code_len ? s->in->code[c->members[0].root] : 0;
            /* an ALT/SEQ body (its NFA count far over its DFA in practice) of the component being
             * built or of a callee expanded in it (sp_0: 12 of its 18 trials): expanded on trial,
             * the caller's subset construction counting it (fsm.h) */
            bool on_trial = trial && (op == CM_IR_ALT || op == CM_IR_SEQ) && s->n_watch < CM_WATCH_MAX;
            size_t dag = 0;
            if (on_trial) { /* (x's own NFA over its cap: a trial would only be refused) */
                uint8_t *seen = cm_balloc(s->bud, s->in->code_len / 8 + 1, true, &rc);
                on_trial = !rc && (dag = dag_states(s, c->members[0].root, cap, 0, seen)) <= cap;
                cm_bfree(s->bud, seen);
                if (rc) break;
            }
            if (on_trial) {
                s->watch[s->n_watch] = y, s->watch_cap[s->n_watch++] = cap;
                x->est = (uint32_t)dag; /* (its size in its caller's count: the trial guards its own cap) */
                rc = cm_vec_push(&s->expanded, y);
                continue;
            }
            s->n_watch = w0; /* (its nested trials go with it: picked again in its own build) */
            if ((rc = materialize(s, x->expand - 1))) break;
            x->stamp = s->stamp; /* (materialize moved the stamp on) */
        }
        if (!x->dfa) return CM_ERR_ARG; /* callees come first */
        if (inlined(x) && x->dfa->n_states <= budget) rc = cm_vec_push(&s->usable, y);
        else x->stamp = 0; /* a call: counts no states */
    }
    return rc;
}

/* Does c call a name left to expand? */
static bool expands(const session *s, const cm_component *c) {
    for (uint32_t i = 0; i < c->n_callees; i++)
        if (s->names[c->callees[i]].expand) return true;
    return false;
}

static int cmp_ref(const void *a, const void *b) {
    uint32_t x = ((const cm_ir_ref *)a)->name, y = ((const cm_ir_ref *)b)->name;
    return x < y ? -1 : x > y;
}

/* c's DFAs with the callees in s->usable copied in (automata._Session.build). */
static int attempt(session *s, const cm_component *c, const uint32_t *roots, cm_dfa_out **dfas) {
    uint32_t n_refs = 0, n_usable = (uint32_t)s->usable.n;
    int rc = CM_OK;
    uint32_t n_expanded = (uint32_t)s->expanded.n;
    cm_ir_ref *refs = cm_balloc(s->bud, ((size_t)c->n_members + n_usable + n_expanded + 1) * sizeof *refs, false, &rc);
    cm_ir_frag *frags = cm_balloc(s->bud, ((size_t)n_usable + 1) * sizeof *frags, false, &rc);
    if (rc) goto out;
    for (uint32_t i = 0; c->right_linear && i < c->n_members; i++)
        refs[n_refs++] = (cm_ir_ref){c->members[i].name, CM_IR_REF_ENTRY, i};
    for (uint32_t j = 0; j < n_usable; j++) {
        const name_info *x = &s->names[s->usable.data[j]];
        refs[n_refs++] = (cm_ir_ref){s->usable.data[j], CM_IR_REF_EMBED, j};
        frags[j] = (cm_ir_frag){x->dfa, x->labels};
    }
    for (uint32_t j = 0; j < n_expanded; j++) { /* (one built since by a callee's fallback is not c's callee) */
        uint32_t y = s->expanded.data[j];
        if (s->names[y].expand)
            refs[n_refs++] = (cm_ir_ref){y, CM_IR_REF_EXPAND, s->comps[s->names[y].expand - 1].members[0].root};
    }
    qsort(refs, n_refs, sizeof *refs, cmp_ref);
    cm_ir_input in = *s->in;
    in.refs = refs;
    in.n_refs = n_refs;
    in.frags = frags;
    in.n_frags = n_usable;
    rc = CM_DIRECT_NO;
    if (s->n_watch) { /* Thompson's path: its subset construction counts them */
        cm_watch = (cm_expand_watch){.n = s->n_watch};
        for (uint32_t k = 0; k < s->n_watch; k++)
            cm_watch.w[k].name = s->watch[k], cm_watch.w[k].cap = s->watch_cap[k];
    } else if (c->n_members == 1 && !c->right_linear) { /* straight to its DFA where it can be (direct.c) */
        rc = cm_direct_build(&in, roots[0], s->max_states, s->bud, dfas);
        if (rc == CM_ERR_LIMIT_MEM) rc = CM_DIRECT_NO; /* Thompson's path decides */
    }
    if (rc == CM_DIRECT_NO) rc = cm_fsm_build_ir(&in, roots, c->n_members, c->right_linear, s->max_states, s->bud, dfas);
    cm_watch.n = 0;
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
    for (bool again = expands(s, c); again;) { /* its expanded callees in its NFA, unless that fails a limit */
        again = false;
        s->usable.n = s->expanded.n = 0;
        if (++s->stamp == 0) {
            for (uint32_t i = 0; i < s->in->n_names; i++) s->names[i].stamp = 0;
            s->stamp = 1;
        }
        s->n_watch = 0;
        rc = pick_expanding(s, c->callees, c->n_callees, budgets[0], true);
        if (!rc && s->expanded.n) {
            cm_watch.over = 0;
            rc = attempt(s, c, roots, dfas);
            uint32_t over = s->n_watch ? cm_watch.over : 0, w = over ? s->watch[over - 1] : 0;
            s->n_watch = 0;
            if (rc == CM_ERR_LIMIT && over) { /* a trial's DFA may be over its cap: built on its own, and again */
                if ((rc = materialize(s, s->names[w].expand - 1))) return rc;
                again = true;
                continue;
            }
            if (rc != CM_ERR_LIMIT && rc != CM_ERR_LIMIT_MEM) return rc;
            /* build them on their own (the list is callees first) and run the ladder */
            cm_vec32 todo = {.bud = s->bud};
            rc = CM_OK;
            for (size_t j = 0; !rc && j < s->expanded.n; j++) rc = cm_vec_push(&todo, s->expanded.data[j]);
            for (size_t j = 0; !rc && j < todo.n; j++)
                if (s->names[todo.data[j]].expand) rc = materialize(s, s->names[todo.data[j]].expand - 1);
            cm_vec_free(&todo);
        } else if (!rc) {
            s->expanded.n = 0;
        }
        if (rc) return rc;
        rc = CM_ERR_LIMIT;
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
    o->live = d->live;
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
    if (c->expand && !c->cached) { /* left to its caller's build (materialize if not) */
        if (c->n_members != 1 || c->right_linear) return CM_ERR_ARG;
        name_info *x = &s->names[c->members[0].name];
        *x = (name_info){.inline_cap = c->members[0].inline_cap, .expand = k + 1, .est = EST_UNSET};
        return CM_OK;
    }
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
                 .usable = {.bud = budget}, .prev = {.bud = budget}, .expanded = {.bud = budget}, .failed = UINT32_MAX,
                 .comps = comps, .out = out};
    int rc = CM_OK;
    s.names = cm_balloc(budget, ((size_t)in->n_names + 1) * sizeof *s.names, true, &rc);
    s.at = cm_balloc(budget, ((size_t)n_comps + 1) * sizeof *s.at, false, &rc);
    for (s.cap = 16; s.cap < 2 * (size_t)n_comps; s.cap *= 2) {}
    s.by_root = cm_balloc(budget, (size_t)s.cap * sizeof *s.by_root, true, &rc);
    for (size_t k = 0, at = 0; !rc && k < n_comps; at += comps[k++].n_members) s.at[k] = at;
    for (uint32_t k = 0; !rc && k < n_comps; k++)
        if ((rc = do_component(&s, k, out + s.at[k]))) *failed = s.failed != UINT32_MAX ? s.failed : k;
    cm_bfree(budget, s.names), cm_bfree(budget, s.at), cm_bfree(budget, s.by_root);
    cm_vec_free(&s.usable), cm_vec_free(&s.prev), cm_vec_free(&s.expanded);
    for (size_t i = 0; rc && i < n_out; i++) {
        cm_budget_release(budget, out[i].dfa ? cm_dfa_bytes(out[i].dfa) : 0);
        cm_comp_dfa_free(&out[i]);
    }
    return rc;
}
