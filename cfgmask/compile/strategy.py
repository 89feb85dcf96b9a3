"""How the C core builds masks: strategies and thresholds, private.

Every setting here gives the same masks, bit for bit; only their cost changes
(docs/design.md, section 4).  They are not public knobs: a user sets limits
(:class:`~cfgmask.MatcherLimits`), and the tests that compare one strategy with another
reach these through ``cfgmask.compile(..., _strategy=Strategy(...))``.  The fields mirror
``cm_limits`` of csrc/cfgmask.h; 0 in a threshold means the core's default.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Strategy:
    # sets with this many uncached scanning states walk the trie with the real chart
    direct_walk_states: int = 0
    # closed Earley sets this big get a waiter index (1: every set)
    index_min_items: int = 0
    # current sets this big look the whole mask up in the grammar's mask memo (2**63: never)
    mask_memo_min_items: int = 0
    # ... and so do masks that leave this many uncertain candidates to check (2**63: never)
    mask_memo_min_candidates: int = 0
    # cache entries of states in equal loops (copies of one terminal) share their walk inside
    # the loop (False: every entry walks the whole trie)
    share_loop_walks: bool = True
    # cache entries drop the uncertain tokens that no context can take, read past the rule's
    # end through every caller (False: keep every token whose next byte may follow)
    filter_uncertain: bool = True
    # cache entries built from other entries: a state that calls rules from its callees'
    # (checking only the tokens they leave uncertain), a state that goes where a string loop
    # goes on most bytes from the loop's (False: every entry walks the trie)
    compose_entries: bool = True
    # trie walks through charts whose live items all wait on the unknown caller (names,
    # strings, keywords) follow a lazily built DFA over those charts (False: an Earley step a byte)
    flat_walks: bool = True
    # ... and their configurations may hold the items of rules called inside the token with
    # the sets they return to (a chart suffix), so a string's helper rules stay in the DFA
    # (False: a set that predicts a rule that reads leaves the DFA for an Earley step a byte)
    flat_calls: bool = True
    # a whole-trie flat walk from a configuration whose every configuration reached on plain
    # JSON string bytes (0x20-0x7E but `"` and `\`) is live accepts the plain tokens at once
    # (one OR of a bitmask the vocabulary made) and walks only the others (False: all of them)
    plain_skip: bool = True
    # a flat walk of a first byte's subtree whose configuration after that byte stays live on
    # every name ([A-Za-z_][A-Za-z0-9_]*: Lark's names and keywords, inline after a rule's
    # blanks, ` foo` and `foo`) accepts the name tokens at once and walks only the others
    # (False: all of them)
    name_skip: bool = True
    # a block of a counted repetition (x{0,1000} is cut into blocks) with at least this many
    # uncertain tokens keeps those that cross its end into the next block; a mask takes them at
    # once where the chart lets the block start again (0: each is checked against the chart)
    wrap_repeats: int = 256
    # the positions of a counted repetition unrolled into a chain (a maxLength string, each block
    # of a bigger one) take their entries from one shared walk of the chain's loop, by how far each
    # is from the end (False: each position walks the trie; needs share_loop_walks)
    count_chains: bool = True
    # a composed entry's byte edge into a state that calls (a whitespace position before an
    # operand), when the byte leads at least this many trie entries, takes the tokens that go
    # through a callee from one walk of the byte's subtree per (callee start, byte), shared by
    # every such position (0: each edge walks it; 1: every edge, as the tests use it)
    tail_parts: int = 256
    # a composed entry's byte edge s -b-> y whose byte leads at least this many trie entries takes
    # the walk of b's subtree from y, kept per (y, b) and shared by every state with such an edge
    # into y, where y is a blank run before a lookahead marker (a Lark rule's, entered from the
    # rule's start, itself and after the marker; 0: each state walks its edges; 1: every such
    # edge, as the tests use it)
    share_edges: int = 256
    # a mask with at least this many uncertain candidates whose current set is a few items that
    # read bytes and call nothing (inside a string) decides them by those items' automata, and
    # the rest of a token after one completes (a string's closing quote: `",` `"}`) by a verdict
    # the matcher keeps per (the set that completion makes, those bytes) for its later masks
    # while the sets below stay (0: each candidate is run through the chart; 1: every mask)
    closing_verdicts: int = 64
    # a trie walk of at least this many entries that enters a name (a state that calls nothing
    # and loops to itself on a set of bytes) takes the tokens that stay inside the name, and the
    # subtrees that leave it, from one walk per (those bytes, trie range) kept by the vocabulary
    # for every grammar; each state walks only the subtrees that leave (0: every state walks
    # its names; 1: every such walk, as the tests use it; needs share_loop_walks)
    run_walks: int = 64
    # the upward filter (a cache entry's uncertain tokens, their rests after the rule exits)
    # drops the rests whose first byte after a run of name bytes ([A-Za-z0-9_]) no state of the
    # rule's callers, reached through name bytes, reads (a name token's rests at each of its
    # positions, ending in a non-ASCII letter), by tables made per rule once one filter has met
    # this many rests that stop on a non-ASCII byte after a name, then kept for the rule's later
    # filters (0: every rest goes through the upward chart; 1: at once, as the tests use it)
    name_stops: int = 128
    # the upward filter keeps, per (rule, byte), how many of the byte the rule's upward chart
    # reads and where it dies, learnt from the rests it reads, and answers from that the rests
    # that are a run of the byte (`=====`, 40 spaces: long tokens crossing a block's end, a new
    # rest at each position) or die inside their leading run: before asking, and among the
    # sorted asks when that saves at least this many chart steps (scanning one or two keeps the
    # sets the next ask shares; 0: every rest is scanned; 1: whenever known, as the tests use it)
    filter_runs: int = 3
    # with filter_runs, a rest whose leading run of a byte ends in a byte that nothing reachable
    # from the rule's return states through the run's byte reads (Llama-3's `#####...#\n` after
    # a JSON string's block: a raw newline) dies without a chart step, by a table made per (rule,
    # byte) once its filters have read this many rests die on the byte after their run (0:
    # never; 1: at the first, as the tests use it)
    run_stops: int = 8
    # with filter_runs, once the filter has read this many runs of a byte whole past the length
    # known to survive (a string's later positions: each rest a few bytes longer), it reads the
    # next one on to twice its length (0: never; 1: at once, as the tests use it)
    run_ahead: int = 16
    # with run_ahead, a run that alone took this many chart steps to read whole past the length
    # known to survive is read on at once (a long string's positions rescan 70-128-byte runs of
    # Llama-3's spaces, `-`, `#` a byte longer each time from their first byte; 0: only by the
    # count above)
    run_ahead_steps: int = 32
    # once the upward filter has met this many rests of a rule's tokens, the bytes the rule's
    # upward chart reads second after each first byte it reads are made (one chart step a first
    # byte) and a rest whose second byte is not among them dies without being asked (after a
    # JSON value's `ws`, ~4,000 blank-led tokens leave it with a rest, ` the` -> `the`, three in
    # four dying on that byte; grammars with lookahead debts are left out; 0: every rest is
    # asked; 1: at once, as the tests use it)
    filter_pairs: int = 256
    # once the grammar's candidate checks have run this many chart steps (less one), an
    # uncertain token's verdict from the chart is kept by the grammar per (token, the
    # enclosing stack its check read: the sets reachable from the current one through
    # origins down to the lowest a completion read, origins relabelled by rank) and taken at
    # a later mask over the same stack (an operand's closing tokens at every operand inside
    # the same parentheses; grammars without lookahead debts; 0: each candidate is run
    # through the chart; 1: from the first mask, as the tests use it)
    stack_verdicts: int = 4096
    # a flat walk's transition from a configuration of one set of items waiting on the unknown
    # caller, on a byte that takes each of them to a state that neither calls nor completes (a
    # name's, a string's, an object key's bytes), is made from the automaton's transitions, not
    # with a chart (False: every transition with the chart)
    flat_plain_steps: bool = True
    # a composed entry's check of the tokens its parts leave uncertain keeps, for each chart set
    # that a second token resumes from, the bytes its items read: a token whose next byte none
    # reads dies without a scan (after a value's `ws`, ` {` ` [` ` "` die on their 2nd byte, each
    # scan looping over an item per rule of an object's chain of optional properties; False:
    # every byte scanned)
    listed_reads: bool = True
    # the upward filter's verdicts of a rule's first filter are held as asked (no hash, lookup or
    # growth of the memo) and hashed into the memo only when a second filter of the rule comes
    # (a compact JSON document filters one `ws` state, an indented one many; False: every
    # verdict hashed at once)
    lazy_follow: bool = True


DEFAULT = Strategy()
