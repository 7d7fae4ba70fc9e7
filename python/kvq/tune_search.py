"""kvq-tune's search, independent of how a mix is measured.

A *mix* gives every slot (tensor, layer) one scheme attribute:
`{"keys": (attr per layer), "values": (attr per layer)}` as a tuple pair.
The search has two stages:

1. **Knapsack over measured sensitivities.** `sensitivity[slot][attr]` is
   the KL divergence measured with only that slot quantized (every other slot
   at full precision). Assuming the losses add up, the best mix under a byte
   budget is a multiple-choice knapsack; `solve_knapsack` solves it exactly
   by dynamic programming over bytes (each slot's price is its exact byte
   delta from the cheapest mix, from kvq's accounting).
2. **Refinement by re-evaluation.** Losses do not add up exactly (errors of
   early layers change what later layers see), so the whole mix is measured
   and `refine` tries local moves (one slot changed, or one up and one down)
   ranked by the additive model, a seeded random sample of the best-ranked
   measured each round, keeping a move only if the measured KL of the whole
   mix drops. Every accepted mix is within the budget by the exact
   accounting of the assembled spec, not by the additive model.

Everything is deterministic for a seed: ties break by slot order, the only
randomness is `numpy.random.default_rng(seed)` in `refine`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .tune_space import TENSORS

Mix = tuple  # (keys attrs tuple, values attrs tuple)
Slot = tuple  # (tensor, layer)

# The knapsack's byte axis is coarsened beyond this many states (prices are
# then rounded up, so a solution still fits).
MAX_STATES = 2_000_000


def slots_of(layers: int) -> list[Slot]:
    return [(tensor, layer) for tensor in TENSORS for layer in range(layers)]


def make_mix(per_slot: dict, layers: int) -> Mix:
    return tuple(tuple(per_slot[(t, l)] for l in range(layers)) for t in TENSORS)


def slot_of(mix: Mix, slot: Slot) -> str:
    tensor, layer = slot
    return mix[TENSORS.index(tensor)][layer]


def with_slot(mix: Mix, slot: Slot, attr: str) -> Mix:
    index, layer = TENSORS.index(slot[0]), slot[1]
    tensors = list(mix)
    tensors[index] = tensors[index][:layer] + (attr,) + tensors[index][layer + 1:]
    return tuple(tensors)


@dataclass
class Problem:
    """A budgeted search: the options of each slot, the exact price of a
    mix in bytes, and the byte limit."""

    layers: int
    options: dict  # tensor -> [attr], in menu order
    price: Callable[[Mix], int]  # exact bytes of the assembled mix
    limit: int

    def slots(self) -> list[Slot]:
        return slots_of(self.layers)

    def cheapest(self) -> Mix:
        """Every slot at its tensor's cheapest option (by the price of the
        uniform mix, ties by menu order)."""
        per_tensor = {}
        for tensor in TENSORS:
            per_tensor[tensor] = min(
                self.options[tensor],
                key=lambda attr: self.price(self._uniform_with(tensor, attr)))
        return make_mix({(t, l): per_tensor[t] for t, l in self.slots()}, self.layers)

    def _uniform_with(self, tensor: str, attr: str) -> Mix:
        other = {t: self.options[t][0] for t in TENSORS}
        other[tensor] = attr
        return make_mix({(t, l): other[t] for t, l in self.slots()}, self.layers)

    def slot_prices(self, start: Mix) -> dict:
        """Per slot and option, the exact byte change from `start` when only
        that slot changes: the knapsack's weights."""
        base = self.price(start)
        return {
            slot: {attr: self.price(with_slot(start, slot, attr)) - base
                   for attr in self.options[slot[0]]}
            for slot in self.slots()
        }


def solve_knapsack(problem: Problem, sensitivity: dict) -> Mix:
    """The mix minimising the summed single-slot KL under the byte limit
    (multiple-choice knapsack, exact dynamic programming over bytes), then
    checked against the exact price of the whole mix; if the prices do not
    add up and the mix overshoots, the capacity shrinks by the overshoot and
    the knapsack is solved again."""
    start = problem.cheapest()
    if problem.price(start) > problem.limit:
        raise ValueError(
            f"budget of {problem.limit} bytes is below the cheapest mix "
            f"({problem.price(start)} bytes)")
    prices = problem.slot_prices(start)
    slack = problem.limit - problem.price(start)
    while slack >= 0:
        mix = _knapsack(problem, sensitivity, prices, start, slack)
        overshoot = problem.price(mix) - problem.limit
        if overshoot <= 0:
            return mix
        slack -= overshoot
    return start


def _knapsack(problem, sensitivity, prices, start, slack) -> Mix:
    slots = problem.slots()
    weights = [[max(0, prices[s][a]) for a in problem.options[s[0]]] for s in slots]
    unit = math.gcd(*[w for row in weights for w in row if w > 0]) or 1
    unit = max(unit, math.ceil(slack / MAX_STATES))
    capacity = slack // unit
    best = np.zeros(capacity + 1)
    choices = []
    for slot, row in zip(slots, weights):
        losses = [sensitivity[slot][a] for a in problem.options[slot[0]]]
        candidates = np.full((len(row), capacity + 1), np.inf)
        for i, (weight, loss) in enumerate(zip(row, losses)):
            units = math.ceil(weight / unit)
            if units <= capacity:
                candidates[i, units:] = best[: capacity + 1 - units] + loss
        choice = np.argmin(candidates, axis=0)  # first (menu order) on ties
        best = candidates[choice, np.arange(capacity + 1)]
        choices.append(choice.astype(np.int16))
    per_slot, remaining = {}, capacity
    for slot, row, choice in reversed(list(zip(slots, weights, choices))):
        index = int(choice[remaining])
        per_slot[slot] = problem.options[slot[0]][index]
        remaining -= math.ceil(row[index] / unit)
    return make_mix(per_slot, problem.layers)


def predicted_loss(mix: Mix, sensitivity: dict) -> float:
    """The additive model: the sum of the slots' single-slot losses."""
    return sum(sensitivity[(t, l)][attr]
               for t, attrs in zip(TENSORS, mix) for l, attr in enumerate(attrs))


def neighbours(problem: Problem, mix: Mix, sensitivity: dict) -> list[tuple[float, Mix]]:
    """Mixes one or two slot changes away that fit the budget, with the
    additive model's predicted change of loss. Pairs are one slot made
    dearer and another cheaper (the moves a full budget allows)."""
    slots = problem.slots()
    prices = problem.slot_prices(mix)
    used = problem.price(mix)
    singles = []
    for slot in slots:
        current = slot_of(mix, slot)
        for attr in problem.options[slot[0]]:
            if attr != current:
                delta = sensitivity[slot][attr] - sensitivity[slot][current]
                singles.append((delta, prices[slot][attr], slot, attr))
    out = [(d, with_slot(mix, s, a)) for d, w, s, a in singles
           if used + w <= problem.limit]
    ups = [m for m in singles if m[1] > 0 and m[0] < 0]
    downs = [m for m in singles if m[1] < 0]
    for d_up, w_up, s_up, a_up in ups:
        for d_down, w_down, s_down, a_down in downs:
            if s_up != s_down and used + w_up + w_down <= problem.limit:
                out.append((d_up + d_down,
                            with_slot(with_slot(mix, s_up, a_up), s_down, a_down)))
    out.sort(key=lambda item: item[0])
    return out


def refine(
    problem: Problem,
    sensitivity: dict,
    starts: list[Mix],
    evaluate: Callable[[list[Mix]], list[float]],
    rounds: int = 3,
    proposals: int = 6,
    seed: int = 0,
    on_round: Callable[[int, float], None] | None = None,
) -> tuple[Mix, float, list[dict]]:
    """Local search on measured whole-mix losses from the best of `starts`.
    Each round measures `proposals` neighbours drawn (seeded) from the
    2 x proposals best predicted, and moves to the best if it beats the
    current mix. Returns the mix, its measured loss and the history."""
    rng = np.random.default_rng(seed)
    fitting = [m for m in dict.fromkeys(starts) if problem.price(m) <= problem.limit]
    losses = evaluate(fitting)
    history = [{"round": 0, "loss": loss, "kind": "start"} for loss in losses]
    best_index = int(np.argmin(losses))
    current, current_loss = fitting[best_index], losses[best_index]
    for round_ in range(1, rounds + 1):
        pool = _fitting(problem, neighbours(problem, current, sensitivity),
                        2 * proposals)
        if not pool:
            break
        picks = rng.choice(len(pool), size=min(proposals, len(pool)), replace=False)
        candidates = [pool[i] for i in sorted(picks)]
        losses = evaluate(candidates)
        history += [{"round": round_, "loss": loss, "kind": "move"} for loss in losses]
        best_index = int(np.argmin(losses))
        if losses[best_index] < current_loss:
            current, current_loss = candidates[best_index], losses[best_index]
        if on_round:
            on_round(round_, current_loss)
    return current, current_loss, history


def _fitting(problem: Problem, ranked: list, count: int) -> list[Mix]:
    """The first `count` ranked mixes within the limit by their exact price
    (the additive prices that ranked them may not add up)."""
    out = []
    for _, mix in ranked:
        if len(out) == count:
            break
        if problem.price(mix) <= problem.limit:
            out.append(mix)
    return out
