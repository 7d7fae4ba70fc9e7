"""kvq-tune's search on a synthetic model: a mocked evaluator whose KL
divergence depends on each slot's bits, priced by kvq's real accounting.

The search must keep to the budget by the exact byte count of the assembled
spec, give the same mix for the same seed, and give more bits to a layer
made sensitive. One end-to-end run of the real measurement (a tiny random
Llama through real kvq caches) checks the plumbing and the resumable cache.
"""

import json
import re

import numpy as np
import pytest

import kvq
from kvq import model as kvq_model
from kvq import tune
from kvq import tune_search as search
from kvq import tune_space as space

LAYERS = 6
SHAPE = dict(layers=LAYERS, heads=2, kv_heads=1, head_dim=64)
TOKENS = 1024
SENSITIVE = 3


def frame_of(base="kivi-2bit", **shape):
    return space.parse_frame(kvq.set_model(kvq.spec_path(base), **(shape or SHAPE)))


def bits_of(attr):
    if attr == space.FULL_PRECISION:
        return 16
    return int(re.search(r"bits = (\d+)", attr).group(1))


class MockModel:
    """KL of a slot = weight x 4^-bits (a b-bit quantizer's error power);
    the sensitive layer's weight is 100x the others'. A whole mix's KL adds
    a mild interaction, so refinement has something to find."""

    def __init__(self, sensitive=SENSITIVE):
        self.weights = {(t, l): (100.0 if l == sensitive else 1.0) * (3 if t == "keys" else 1)
                        for t in space.TENSORS for l in range(LAYERS)}
        self.evaluated = 0

    def slot_loss(self, slot, attr):
        return 0.0 if attr == space.FULL_PRECISION else self.weights[slot] * 4.0 ** -bits_of(attr)

    def measure_slots(self, requests):
        return [self.slot_loss(s, a) for s, a in requests]

    def evaluate(self, mixes):
        self.evaluated += len(mixes)
        out = []
        for mix in mixes:
            losses = [self.slot_loss((t, l), a)
                      for t, attrs in zip(space.TENSORS, mix) for l, a in enumerate(attrs)]
            out.append(sum(losses) * (1 + 0.01 * sum(x > 0.01 for x in losses)))
        return out


def run(frame, budget, seed=0, mock=None):
    mock = mock or MockModel()
    options = space.valid_options(frame, space.DEFAULT_MENU)
    return tune.tune(frame, options, TOKENS, budget, mock.measure_slots, mock.evaluate,
                     rounds=3, proposals=4, seed=seed)


def assembled(frame, result):
    keys, values = result["mix"]
    return space.assemble(frame, list(keys), list(values))


@pytest.mark.parametrize("budget", ["3.9", "4.2", "4.63", "6.5", "450B"])
def test_budget_respected_by_exact_accounting(budget):
    frame = frame_of()
    result = run(frame, budget)
    spec = assembled(frame, result)
    exact = kvq.report_bits(spec, tokens=TOKENS)[0]["bytes"]
    limit = space.budget_bytes(frame, budget, TOKENS)
    assert exact == result["bytes"] <= limit
    elements = TOKENS * 2 * LAYERS * 64
    if budget.endswith("B"):
        assert limit == 450 * TOKENS
    else:
        assert exact * 8 / elements <= float(budget)
    # The budget binds: no single slot can be raised one option without
    # exceeding it, or that raise would not lower the loss.
    problem = search.Problem(LAYERS, {t: [o.attr for o in space.valid_options(
        frame, space.DEFAULT_MENU)[t]] for t in space.TENSORS},
        lambda m: space.sequence_bytes(space.assemble(frame, list(m[0]), list(m[1])),
                                       TOKENS), limit)
    assert exact >= limit - max(
        w for row in problem.slot_prices(problem.cheapest()).values()
        for w in row.values())


def test_budget_below_the_cheapest_mix_is_an_error():
    with pytest.raises(ValueError, match="below the cheapest"):
        run(frame_of(), "1.0")


def test_deterministic_for_a_seed():
    frame = frame_of()
    first = run(frame, "4.63", seed=7)
    second = run(frame, "4.63", seed=7)
    assert first["mix"] == second["mix"]
    assert first["history"] == second["history"]
    assert assembled(frame, first) == assembled(frame, second)


def test_sensitive_layer_gets_more_bits():
    frame = frame_of()
    result = run(frame, "4.0")
    for tensor, attrs in zip(space.TENSORS, result["mix"]):
        bits = [bits_of(a) for a in attrs]
        others = [b for l, b in enumerate(bits) if l != SENSITIVE]
        assert bits[SENSITIVE] > max(others), (tensor, bits)


def test_refinement_never_worse_than_its_starts():
    frame = frame_of()
    mock = MockModel()
    result = run(frame, "4.63", mock=mock)
    starts = [h["loss"] for h in result["history"] if h["kind"] == "start"]
    assert result["calibration_kl"] <= min(starts)
    assert mock.evaluated == len(result["history"])


def test_spec_is_readable_with_merged_ranges():
    frame = frame_of()
    spec = space.assemble(frame, [space.FULL_PRECISION] * 2 + [frame.base["keys"][0]] * 4,
                          list(frame.base["values"]))
    assert spec.count("kvq.layers") == 3
    assert "kvq.layers 0 to 2 : #kvq.full_precision" in spec
    assert "kvq.layers 2 to 6 : #kvq.quant" in spec
    kvq.report_bits(spec)  # verifies


def test_budget_units():
    frame = frame_of()
    elements = frame.elements_per_token
    assert space.budget_bytes(frame, "4", 100) == 4 * 100 * elements // 8
    assert space.budget_bytes(frame, "4bits", 100) == 4 * 100 * elements // 8
    assert space.budget_bytes(frame, "300B", 100) == 30000
    with pytest.raises(ValueError):
        space.budget_bytes(frame, "four", 100)


def test_options_follow_the_frame():
    """span = tokens needs whole-group flushes: InnerQ's key window
    (flush 1) admits only channel-grouped keys, KIVI's (flush 128) both."""
    innerq = space.valid_options(frame_of("innerq-hybrid"), space.DEFAULT_MENU)
    kivi = space.valid_options(frame_of(), space.DEFAULT_MENU)
    assert not any("span = tokens" in o.attr for o in innerq["keys"])
    assert any("span = tokens" in o.attr for o in kivi["keys"])
    assert any("key_norm" in o.attr for o in kivi["keys"])


def tiny_model(seed=3):
    """A 3-layer random Llama (hidden 128, 2 heads, 1 kv head, head_dim 64,
    vocab 96) with the real Model's forward."""
    rng = np.random.default_rng(seed)
    model = kvq_model.Model.__new__(kvq_model.Model)
    c = kvq_model.Config(layers=3, hidden=128, heads=2, kv_heads=1, head_dim=64,
                         rope_theta=10000.0, norm_eps=1e-5, vocab=96)
    model.config = c
    w = lambda *shape: (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
    model.embedding = w(c.vocab, c.hidden)
    model.output_norm = np.ones(c.hidden, np.float32)
    model.output = model.embedding
    model.blocks = [{
        "attn_norm": np.ones(c.hidden, np.float32),
        "attn_q": 3 * w(c.hidden, c.hidden), "attn_k": 3 * w(64, c.hidden),
        "attn_v": w(64, c.hidden), "attn_output": w(c.hidden, c.hidden),
        "ffn_norm": np.ones(c.hidden, np.float32), "ffn_gate": w(256, c.hidden),
        "ffn_up": w(256, c.hidden), "ffn_down": w(c.hidden, 256),
    } for _ in range(c.layers)]
    model._inv_freq = c.rope_theta ** (-np.arange(0, 64, 2, dtype=np.float64) / 64)
    return model


def test_real_measurement_end_to_end(tmp_path, monkeypatch):
    model = tiny_model()
    text = np.random.default_rng(1).integers(0, 96, size=2 * 300)
    monkeypatch.setattr(tune.kvq_eval, "segments",
                        lambda m, path, s, c: text[: s * c].reshape(s, c))
    frame = space.parse_frame(kvq.set_model(kvq.spec_path("kivi-2bit"), layers=3,
                                            heads=2, kv_heads=1, head_dim=64))
    menu = {"keys": space._options(space.KEY_OPTIONS[1].attr, space.FULL_PRECISION),
            "values": space._options(space.VALUE_OPTIONS[1].attr, space.FULL_PRECISION)}
    options = space.valid_options(frame, menu)
    work = str(tmp_path / "artifacts")

    def measurer():
        cache = tune.MeasurementCache(str(tmp_path / "cache" / "measurements.json"))
        calibration = tune.Calibration(model, "unused", 2, 300, 4,
                                       tune.compiled(tune.fp16_spec(frame), work))
        return tune.Measurer(calibration, frame, cache, work, members=4, progress=False)

    m = measurer()
    result = tune.tune(frame, options, 300, "11", m.measure_slots, m.evaluate,
                       rounds=1, proposals=2)
    assert result["bytes"] <= space.budget_bytes(frame, "11", 300)
    sens = result["sensitivity"]
    assert all(v >= 0 for s in sens.values() for v in s.values())
    assert any(v > 0 for s in sens.values() for v in s.values())
    # A single-slot measurement routed over uniform artifacts equals the
    # compiled spec with only that slot quantized.
    slot_attr = space.KEY_OPTIONS[1].attr
    keys = [space.FULL_PRECISION, slot_attr, space.FULL_PRECISION]
    mix = (tuple(keys), (space.FULL_PRECISION,) * 3)
    assert m.evaluate([mix])[0] == pytest.approx(sens[("keys", 1)][slot_attr], rel=1e-6)
    # Rerunning resumes from the cache: nothing is measured again.
    entries = json.loads((tmp_path / "cache" / "measurements.json").read_text())
    again = measurer()
    calls = []
    again.calibration.measure = lambda members: calls.append(members)
    assert tune.tune(frame, options, 300, "11", again.measure_slots, again.evaluate,
                     rounds=1, proposals=2)["mix"] == result["mix"]
    assert calls == [] and len(entries) == len(again.cache.entries)


def test_documented_tuned_specs_keep_their_budgets():
    """The specs of docs/Evaluation.md verify, and their bytes at 1024
    tokens are the bit report in their header and within their budget."""
    import glob
    import os

    root = os.environ.get("KVQ_SOURCE_DIR", kvq._SOURCE_DIR)
    paths = glob.glob(os.path.join(root, "docs", "images", "kvq-tune", "**", "*.mlir"),
                      recursive=True)
    assert len(paths) == 6
    for path in paths:
        text = open(path, encoding="utf-8").read()
        stated = int(re.search(r"bytes\(tokens = 1024\) = (\d+)", text).group(1))
        budget = re.search(r"--budget (\S+)", text).group(1)
        frame = space.parse_frame(text)
        assert space.sequence_bytes(text, 1024) == stated
        assert stated <= space.budget_bytes(frame, budget, 1024)


def test_cli_refuses_an_infeasible_budget_before_measuring(tmp_path):
    """kvq-tune --budget 0.5 (below any mix of the menu) exits 2 after
    loading the model, with no measurement made or cached."""
    import os
    import subprocess
    import time

    tool = os.path.join(os.environ["KVQ_BINARY_DIR"], "bin", "kvq-tune")
    start = time.monotonic()
    result = subprocess.run([tool, "--budget", "4.633", "--budget", "0.5",
                             "--cache", str(tmp_path / "cache"), "--out",
                             str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - start
    assert result.returncode == 2, result.stderr
    assert "kvq-tune: budget 0.5 is infeasible" in result.stderr
    assert not (tmp_path / "cache" / "measurements.json").exists()
    assert not (tmp_path / "cache" / "artifacts").exists()
    assert seconds < 120, seconds
