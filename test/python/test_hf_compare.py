"""kvq-hf-compare: transformers' QuantizedCache (quanto, HQQ) and kvq's
caches on SmolLM2-135M under transformers, against DynamicCache (a model
test: label slow)."""

import json

import pytest
import torch
from transformers import LlamaConfig
from transformers.cache_utils import QuantizedCache

from kvq import hf_compare

# One segment of 192 tokens, 32 prefilled: the quantized caches flush
# their 128-token residual once (at 160 tokens) and end with 32 residual
# tokens; KIVI-2's window holds tokens too.
CONTEXT, PROMPT = 192, 32
SCHEMES = ["dynamic", "quanto-2bit", "quanto-4bit", "hqq-2bit", "hqq-4bit", "kivi-2bit"]
# SmolLM2-135M: layers, kv heads, head_dim.
LAYERS, KV_HEADS, HEAD_DIM = 30, 3, 64


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("hf-compare")
    assert hf_compare.main(SCHEMES + ["--segments", "1", "--context", str(CONTEXT),
                                      "--prompt", str(PROMPT), "--out", str(out),
                                      "--no-progress"]) == 0
    assert (out / "kl_vs_bits.png").stat().st_size > 0
    with open(out / "results.json") as f:
        return json.load(f)["results"]


def quantized_bytes(tokens: int, residual: int, bits: int, group: int = 64) -> int:
    """Bytes of keys and values of every layer, by hand: codes packed
    into bytes, a scale and a zero-point per group at 16 bits, residual
    tokens at 16 bits."""
    elements = tokens * KV_HEADS * HEAD_DIM
    per_tensor = (elements * bits // 8 + elements // group * 2 * 2
                  + residual * KV_HEADS * HEAD_DIM * 2)
    return 2 * LAYERS * per_tensor


def test_dynamic_cache_is_the_reference(results):
    """A second DynamicCache in lockstep with the reference: the same
    logits (KL exactly 0), and 16 bits per element."""
    dynamic = results["dynamic"]
    assert dynamic["kl_mean"] == 0 and dynamic["kl_p99"] == 0
    assert dynamic["top1_agreement"] == 1
    assert dynamic["bits"] == 16 and results["reference"]["bits"] == 16
    # It hands attention its own storage: peak = what it stores.
    assert dynamic["peak_mib"] * 2**20 == dynamic["bytes"]


@pytest.mark.parametrize("backend", ["quanto", "hqq"])
def test_four_bits_beat_two(results, backend):
    two, four = results[f"{backend}-2bit"], results[f"{backend}-4bit"]
    assert four["kl_mean"] < two["kl_mean"] / 3, (four, two)
    assert four["perplexity"] < two["perplexity"]
    assert four["bits"] > two["bits"]


@pytest.mark.parametrize("scheme", ["quanto-2bit", "quanto-4bit", "hqq-2bit", "hqq-4bit"])
def test_quantized_cache_bits_by_hand(results, scheme):
    """At 192 tokens the first 160 are quantized, 32 in the residual. The
    peak adds the dequantized history a layer hands attention (all 192
    tokens of keys and values at 16 bits) to at least what is stored."""
    r = results[scheme]
    bits = int(scheme.split("-")[1].removesuffix("bit"))
    expected = quantized_bytes(160, CONTEXT - 160, bits)
    assert r["bytes"] == expected
    assert r["bits"] == 8 * expected / (2 * LAYERS * CONTEXT * KV_HEADS * HEAD_DIM)
    history = 2 * CONTEXT * KV_HEADS * HEAD_DIM * 2
    assert r["peak_mib"] * 2**20 >= r["bytes"] + history


def test_stored_bytes_of_a_known_shape():
    """stored_bytes of a QuantizedCache fed 200 tokens at once (quantized)
    and 5 more one at a time (residual), against the count by hand."""
    config = LlamaConfig(num_hidden_layers=LAYERS, num_attention_heads=9,
                         num_key_value_heads=KV_HEADS, hidden_size=9 * HEAD_DIM)
    for backend in ("quanto", "hqq"):
        for bits in (2, 4):
            cache = QuantizedCache(backend, config, nbits=bits,
                                   **hf_compare.QUANTIZED_SETTINGS[backend])
            x = torch.randn(1, KV_HEADS, 205, HEAD_DIM)
            for layer in range(LAYERS):
                cache.update(x[:, :, :200], x[:, :, :200], layer)
                for t in range(200, 205):
                    cache.update(x[:, :, t:t + 1], x[:, :, t:t + 1], layer)
            assert hf_compare.stored_bytes(cache) == quantized_bytes(200, 5, bits), \
                (backend, bits)


def test_kvq_bits_are_kvq_accounting(results):
    """kvq's memory_stats, kvq.report_bits with the window counts, and
    the elements every other scheme is divided by agree."""
    r = results["kvq kivi-2bit"]
    assert r["bits"] == r["kvq_memory_stats_bits"]
    assert r["kvq_report_bits_bits"] == pytest.approx(r["bits"], rel=1e-12)
    assert r["kvq_cached_elements"] == r["cached_elements"]
    assert r["cached_elements"] == 2 * LAYERS * CONTEXT * KV_HEADS * HEAD_DIM
    # KIVI-2 keeps a full-precision window: more than its 3 storage bits.
    assert 3 < r["bits"] < 16
    assert 0 < r["kl_mean"] < results["quanto-2bit"]["kl_mean"]


@pytest.mark.parametrize("argv,message", [
    (["quanto-3bit"], "unknown scheme 'quanto-3bit'"),
    (["no-such.mlir"], "unknown scheme 'no-such.mlir'"),
    (["kivi-2bit", "kivi-2bit"], "a scheme is named twice"),
    (["--prompt", "0"], "--prompt must be at least 1 and below --context"),
    (["--context", "64", "--prompt", "64"], "--prompt must be at least 1"),
    (["--segments", "0"], "--segments, --threads and --residual-length must be"),
    (["--threads", "0"], "--segments, --threads and --residual-length must be"),
    (["--residual-length", "0"], "--segments, --threads and --residual-length must be"),
])
def test_bad_options_are_refused(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        hf_compare.parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err

