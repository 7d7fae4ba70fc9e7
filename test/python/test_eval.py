"""kvq-eval end to end on a short run: the metrics are what they claim."""

import json
import os
import subprocess
import sys

import numpy as np

import kvq
from kvq import eval as kvq_eval
from kvq import model as kvq_model

CHANNEL_GROUPED = """
kvq.cache @c model <layers = 1, heads = 2, kv_heads = 1, head_dim = 64, dtype = f16{order}> page 32 {{
  kvq.keys window <recent = 0, flush = 1> {{
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 16>
  }}
  kvq.values window <recent = 0, flush = 1> {{
    kvq.layers 0 to 1 : #kvq.full_precision
  }}
}}
"""


def test_short_evaluation(tmp_path):
    out = tmp_path / "out"
    code = kvq_eval.main(
        ["fp16", "kivi-2bit", "--segments", "2", "--context", "160", "--prompt", "32",
         "--out", str(out), "--no-progress"]
    )
    assert code == 0
    data = json.loads((out / "results.json").read_text())
    assert data["meta"]["text_source"].endswith("base-files")
    assert data["meta"]["evaluated_tokens"] == 2 * 128
    results = data["results"]
    baseline, kivi = results["baseline-fp16"], results["kivi-2bit"]
    assert 1 < baseline["perplexity"] < 100
    # The fp16 spec run as a scheme is the baseline, token for token: the
    # metrics measure differences and nothing else.
    fp16 = results["fp16"]
    assert fp16["kl_mean"] == 0 and fp16["top1_agreement"] == 1
    assert fp16["perplexity"] == baseline["perplexity"]
    assert fp16["layer_errors"] == [0.0] * 30
    # KIVI-2 on a 160-token context: mostly the fp16 window, some 2-bit pages.
    assert kivi["code_bits"] == 2.0 and kivi["storage_bits"] == 3.0
    assert 3.0 < kivi["measured_bits"] < 16.0
    assert 0 < kivi["kl_mean"] <= kivi["kl_p99"]
    assert 0.5 < kivi["top1_agreement"] <= 1.0
    errors = kivi["layer_errors"]
    assert len(errors) == 30 and all(0 < e < 1 for e in errors)
    for name in ("results.csv", "kl_vs_bits.png", "layer_errors.png"):
        assert (out / name).stat().st_size > 0


def test_tool_wrapper_runs():
    binary_dir = os.environ.get("KVQ_BINARY_DIR")
    if not binary_dir:
        return
    result = subprocess.run(
        [os.path.join(binary_dir, "bin", "kvq-eval"), "--help"],
        capture_output=True, text=True, check=True,
    )
    assert "--segments" in result.stdout


def test_blas_threads_pinned_whatever_the_environment():
    """Results depend on OpenBLAS's thread count: importing kvq.eval pins it
    to one, also when the environment asks for more before numpy loads."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="4", OMP_NUM_THREADS="4")
    code = ("import numpy, kvq.eval\n"
            "from kvq import blas_threads\n"
            "print(blas_threads.current())\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                            text=True, env=env, check=True)
    assert result.stdout.strip() == "[1]", result.stdout
    assert kvq_eval.blas_threads.current() == [1]


def test_a_half_order_cache_gets_its_channels_in_half_order(tmp_path):
    """kvq.model's keys and queries are interleaved; a spec stating
    channel_order = half quantizes 16-channel groups of the half order, so
    kvq-eval permutes what it hands that cache: bit-exact with permuting by
    hand, and unlike the same spec taking interleaved channels."""
    rng = np.random.default_rng(0)
    k = rng.standard_normal((40, 1, 64)).astype(np.float16)
    v = rng.standard_normal((40, 1, 64)).astype(np.float16)
    q = rng.standard_normal((1, 2, 64)).astype(np.float32)
    half = kvq_model.Model.to_half_order

    def cache(order):
        spec = CHANNEL_GROUPED.format(order=order and f", channel_order = {order}")
        return kvq.Cache(kvq.compile(spec, str(tmp_path / (order or "any"))), max_sequences=1)

    def through_eval(order):
        past = kvq_eval.ComparingPast(cache(order), cache(order), layers=1)
        seq = past.cache.add_sequence()
        assert past.twin.add_sequence() == seq
        past.append(0, [(seq, k, v)])
        return np.asarray(past.attend(0, [seq], q))

    by_hand = cache("")
    seq = by_hand.add_sequence()
    by_hand.append(0, [(seq, half(k), v)])
    expected = np.asarray(by_hand.attend(0, [seq], half(q)))
    assert cache("half").channel_order == "half"
    assert cache("").channel_order == "any"
    np.testing.assert_array_equal(through_eval("half"), expected)
    assert np.abs(through_eval("") - expected).max() > 1e-3
