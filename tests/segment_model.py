"""A Python model of the engine's chart with counts (docs/design.md §7, "Segments on the compile
side", session 33): Earley over the automata of a :class:`~cfgmask.compile.segments.SegmentForm`,
an item in a segment state carrying the count ``k`` of units read since it entered the loop.
Test-only: step (b) builds the C chart's count array against it.

Items are (rule, state, origin), as in the C chart; ``k`` is kept *beside* an item, not in its
identity (the design's parallel array), and the model asserts on every add that an item met
again has the same ``k``: the design's claim that ``k`` is a function of (state, origin, set).

The count rules (cfgmask/compile/segments.py names the tags):

* scan: an edge flagged INTO needs ``k < hi``, an EXIT edge ``k >= lo``; a BACK edge gives
  ``k + 1``; another edge inside a segment keeps ``k``; any other edge onto a head (an EXIT that
  lands on a head, or an edge from outside) enters it with ``k = 0``;
* a head is accepting (completes its rule) only at ``k >= lo``;
* prediction of a rule whose start is a head enters it with ``k = 0``; completion advances the
  caller over the call edge (calls never leave a segment state: the count is never consumed or
  created by prediction or completion, only copied or, onto a head, started at 0).
"""

from __future__ import annotations

from cfgmask.compile.segments import BACK, EXIT, INTO, SegmentForm

Item = tuple[str, int, int]  # rule, state, origin


class CountClash(AssertionError):
    """An item met again with another count: k is not a function of (state, origin, set)."""


class SegmentModel:
    def __init__(self, form: SegmentForm) -> None:
        if form.tokens or form.markers:
            raise NotImplementedError("the model reads bytes: no token terminals or lookahead markers")
        self.form = form
        self.rules = form.rules
        self.chart: list[dict[Item, int | None]] = []
        self.done: list[set[str]] = []
        self.chart.append(self._close({(form.start, 0, 0): self._enter(form.start, 0)}, 0))

    # -- counts

    def _seg(self, rule: str, s: int) -> int:
        return self.rules[rule].seg[s]

    def _enter(self, rule: str, t: int) -> int | None:
        """The count of an item arriving at ``t`` from outside its segment (or None outside)."""
        return 0 if self._seg(rule, t) >= 0 else None

    def _accepting(self, rule: str, s: int, k: int | None) -> bool:
        r = self.rules[rule]
        if not r.accepting[s]:
            return False
        sid = r.seg[s]
        if sid < 0:
            return True
        assert k is not None
        return k >= self.form.segments[sid].lo

    def _add(self, got: dict[Item, int | None], item: Item, k: int | None, work: list[Item]) -> None:
        old = got.get(item, "absent")
        if old == "absent":
            got[item] = k
            work.append(item)
        elif old != k:
            raise CountClash(f"item {item} at set {len(self.chart)} has counts {old} and {k}")

    # -- Earley

    def _close(self, seeds: dict[Item, int | None], here: int) -> dict[Item, int | None]:
        got: dict[Item, int | None] = {}
        work: list[Item] = []
        for item, k in seeds.items():
            self._add(got, item, k, work)
        done: set[str] = set()  # rules completed with origin here (nullable ones)
        while work:
            item = work.pop()
            rule, s, o = item
            k = got[item]
            r = self.rules[rule]
            for c, t in r.calls[s]:
                assert r.seg[s] < 0, "a segment state calls"
                self._add(got, (c, 0, here), self._enter(c, 0), work)
                if c in done:
                    self._add(got, (rule, t, o), self._enter(rule, t), work)
            if self._accepting(rule, s, k):
                if o == here:
                    done.add(rule)
                parents = got if o == here else self.chart[o]
                for (pr, ps, po), _ in list(parents.items()):
                    for c, t in self.rules[pr].calls[ps]:
                        if c == rule:
                            self._add(got, (pr, t, po), self._enter(pr, t), work)
        return got

    def _scan(self, items: dict[Item, int | None], b: int) -> dict[Item, int | None]:
        seeds: dict[Item, int | None] = {}
        work: list[Item] = []
        for (rule, s, o), k in items.items():
            r = self.rules[rule]
            sid = r.seg[s]
            for lo, hi, t, flags in r.edges[s]:
                if not lo <= b <= hi:
                    continue
                if sid >= 0:
                    assert k is not None
                    seg = self.form.segments[sid]
                    if flags & INTO and k >= seg.hi:
                        continue
                    if flags & EXIT and k < seg.lo:
                        continue
                if flags & BACK:
                    assert k is not None and r.seg[t] == sid
                    nk: int | None = k + 1
                elif sid >= 0 and not flags & EXIT:
                    assert r.seg[t] == sid
                    nk = k
                else:
                    nk = self._enter(rule, t)
                self._add(seeds, (rule, t, o), nk, work)
        return seeds

    def step(self, b: int) -> bool:
        """Read byte ``b``; False (and nothing read) if no item survives."""
        seeds = self._scan(self.chart[-1], b)
        if not seeds:
            return False
        self.chart.append(self._close(seeds, len(self.chart)))
        return True

    def feed(self, data: bytes) -> bool:
        return all(self.step(b) for b in data)

    def viable(self) -> set[int]:
        """The bytes that may come next."""
        return {b for b in range(256) if self._scan(self.chart[-1], b)}

    def accepting(self) -> bool:
        start = self.form.start
        return any(
            r == start and o == 0 and self._accepting(r, s, k) for (r, s, o), k in self.chart[-1].items()
        )

    def counts(self) -> dict[Item, int]:
        """The counts of the last set's segment items."""
        return {i: k for i, k in self.chart[-1].items() if k is not None}


def accepts(form: SegmentForm, data: bytes) -> bool:
    m = SegmentModel(form)
    return m.feed(data) and m.accepting()
