"""SmolLM2-135M through kvq: the tokenizer, the fp16 cache against plain
numpy attention, and greedy generation."""

import numpy as np
import pytest

import kvq
from kvq import model as kvq_model

SMOLLM2 = dict(layers=30, heads=9, kv_heads=3, head_dim=64)


@pytest.fixture(scope="module")
def model():
    return kvq_model.Model()


@pytest.fixture(scope="module")
def fp16_smollm2(tmp_path_factory):
    spec = kvq.set_model(kvq.spec_path("fp16"), **SMOLLM2)
    return kvq.compile(spec, str(tmp_path_factory.mktemp("fp16-smollm2")))


def test_config_is_smollm2(model):
    c = model.config
    assert (c.layers, c.heads, c.kv_heads, c.head_dim) == (30, 9, 3, 64)
    assert c.rope_theta == 100000.0
    assert model.output is model.embedding  # tied embeddings


def test_tokenizer_round_trips_and_keeps_control_tokens(model):
    tokenizer = model.tokenizer
    text = "KV caches hold 12345 tokens; quantize them to 2 bits.\n"
    assert tokenizer.decode(tokenizer.encode(text)) == text
    ids = tokenizer.encode("<|im_start|>user\nHi<|im_end|>")
    assert ids[0] == 1 and ids[-1] == 2  # <|im_start|>, <|im_end|> whole
    assert len(tokenizer.encode("2024")) == 4  # digits split one by one


def run(model, past, seqs, tokens, prompt):
    decoder = kvq_model.Decoder(model, past, seqs)
    logits = [decoder.prefill(tokens[:, :prompt])]
    for t in range(prompt, tokens.shape[1]):
        logits.append(decoder.step(tokens[:, t]))
    return np.stack(logits, axis=1)


def test_fp16_cache_matches_numpy_attention(model, fp16_smollm2):
    text = (
        "The key-value cache of a transformer grows with the context. "
        "Quantizing it to a few bits per value lets a server keep many more "
        "sequences in memory, at a small cost in accuracy."
    )
    tokens = np.array([model.tokenizer.encode(text)] * 2)
    tokens[1] = tokens[1, ::-1]  # a second, different sequence in the batch
    cache = kvq.Cache(fp16_smollm2, max_sequences=2, pages=16)
    seqs = [cache.add_sequence(), cache.add_sequence()]
    through_kvq = run(model, cache, seqs, tokens, prompt=8)
    exact = run(model, kvq_model.ExactPast(model.config, 2), [0, 1], tokens, prompt=8)
    error = np.linalg.norm(through_kvq - exact) / np.linalg.norm(exact)
    assert error <= 1e-3


def test_greedy_generation_is_coherent(model, fp16_smollm2):
    cache = kvq.Cache(fp16_smollm2, max_sequences=1, pages=16)
    prompt = model.tokenizer.encode(
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    out = kvq_model.Decoder(model, cache, [cache.add_sequence()]).generate(prompt, 20)
    assert "Paris" in model.tokenizer.decode(out)
