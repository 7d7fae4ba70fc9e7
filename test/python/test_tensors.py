"""Tensors as users have them: any DLPack object, numpy float16/float32 and
ml_dtypes' bfloat16, each read into the same cache state as its float32
twin; and the errors a user meets first, each naming its cause."""

import ml_dtypes
import numpy as np
import pytest

import kvq

from conftest import SHAPE, compiled


class DLPackOnly:
    """An array that offers nothing but DLPack (as a torch or JAX tensor
    does to a library that does not know it)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class OnTheGpu(DLPackOnly):
    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0


def tokens(rng, n, dtype=np.float32):
    return rng.standard_normal((n, SHAPE["kv_heads"], SHAPE["head_dim"])).astype(dtype)


def query(rng, dtype=np.float32):
    return rng.standard_normal((1, SHAPE["heads"], SHAPE["head_dim"])).astype(dtype)


def state(cache, seq, q):
    """The stored bytes (the fp16 spec's pages: no window) and attention."""
    pages = [cache.read_slice_page(t, seq, 0, h, 0) for t in ("keys", "values")
             for h in range(SHAPE["kv_heads"])]
    return pages, cache.attend(0, [seq], q).tobytes()


@pytest.fixture(scope="session")
def bf16_artifact(tmp_path_factory):
    return compiled("fp16", tmp_path_factory, dtype="bf16", **SHAPE)


def test_dlpack_objects_read_like_numpy(fp16_artifact, rng):
    cache = kvq.Cache(fp16_artifact, max_sequences=2, pages=8)
    a, b = cache.add_sequence(), cache.add_sequence()
    k, v, q = tokens(rng, 40, np.float16), tokens(rng, 40, np.float16), query(rng)
    cache.append(0, [(a, k, v)])
    cache.append(0, [(b, DLPackOnly(k), DLPackOnly(v))])
    assert state(cache, a, q) == state(cache, b, DLPackOnly(q))


def test_numpy_bfloat16_reads_like_its_float32_twin(bf16_artifact, rng):
    cache = kvq.Cache(bf16_artifact, max_sequences=2, pages=8)
    assert cache.dtype == "bf16"
    a, b = cache.add_sequence(), cache.add_sequence()
    k = tokens(rng, 40).astype(ml_dtypes.bfloat16)
    v = tokens(rng, 40).astype(ml_dtypes.bfloat16)
    q = query(rng).astype(ml_dtypes.bfloat16)
    cache.append(0, [(a, k, v)])
    cache.append(0, [(b, k.astype(np.float32), v.astype(np.float32))])
    assert state(cache, a, q) == state(cache, b, q.astype(np.float32))
    assert state(cache, a, q) != state(cache, b, query(rng))


def test_bfloat16_into_a_float16_cache_names_the_fix(fp16_artifact, rng):
    cache = kvq.Cache(fp16_artifact, max_sequences=1, pages=8)
    seq = cache.add_sequence()
    k = tokens(rng, 4).astype(ml_dtypes.bfloat16)
    with pytest.raises(kvq.Error, match=r"k is bfloat16: the cache takes float32 "
                       r"or its own dtype \(f16\); convert it to float32"):
        cache.append(0, [(seq, k, k)])
    with pytest.raises(kvq.Error, match="one dtype"):
        cache.append(0, [(seq, k, tokens(rng, 4))])
    with pytest.raises(kvq.Error, match=r"q is bfloat16"):
        cache.attend(0, [seq], query(rng).astype(ml_dtypes.bfloat16))


def test_float16_into_a_bfloat16_cache_names_the_fix(bf16_artifact, rng):
    cache = kvq.Cache(bf16_artifact, max_sequences=1, pages=8)
    seq = cache.add_sequence()
    k = tokens(rng, 4, np.float16)
    with pytest.raises(kvq.Error, match=r"k is float16: .*\(bf16\); convert it to float32"):
        cache.append(0, [(seq, k, k)])


def test_user_errors_name_their_cause(fp16_artifact, rng):
    cache = kvq.Cache(fp16_artifact, max_sequences=1, pages=8)
    seq = cache.add_sequence()
    k, q = tokens(rng, 4, np.float16), query(rng)
    calls = {
        r"layer -1 out of range \(the model has 2\)":
            lambda: cache.append(-1, [(seq, k, k)]),
        r"layer -2 out of range": lambda: cache.attend(-2, [seq], q),
        r"layer must be an int, got str": lambda: cache.counts(seq, "0"),
        r"k must be an array \(numpy, or any object with __dlpack__ such as a "
        r"torch tensor\), got list": lambda: cache.append(0, [(seq, k.tolist(), k)]),
        r"q must be an array .*got list": lambda: cache.attend(0, [seq], q.tolist()),
        r"k is int32": lambda: cache.append(0, [(seq, k.astype(np.int32), k)]),
        r"v is on DLPack device type 2, not the CPU":
            lambda: cache.append(0, [(seq, k, OnTheGpu(k))]),
    }
    for message, call in calls.items():
        with pytest.raises(kvq.Error, match=message):
            call()
    assert cache.counts(seq, 0)["keys"] == {"sink": 0, "quantized": 0, "window": 0}


def test_finite_float32_that_overflows_float16_is_named(fp16_artifact, rng):
    cache = kvq.Cache(fp16_artifact, max_sequences=1, pages=8)
    seq = cache.add_sequence()
    k, v = tokens(rng, 3), tokens(rng, 3)
    k[2, 1, 5] = 70000.0
    with pytest.raises(kvq.Error, match=r"key 70000 at token 2, kv-head 1, channel 5 "
                       r"of sequence \d+ overflows f16 \(largest finite 65504\)"):
        cache.append(0, [(seq, k, v)])
    k[2, 1, 5] = np.inf
    with pytest.raises(kvq.Error, match="non-finite key at token 2, kv-head 1, channel 5"):
        cache.append(0, [(seq, k, v)])
    k[2, 1, 5] = 65504.0  # the largest f16 is no overflow
    cache.append(0, [(seq, k, v)])


def test_missing_spec_path_is_named_not_parsed(tmp_path):
    for path in ("specs/no-such-spec.mlir", str(tmp_path / "missing"),
                 str(tmp_path / "no.mlir")):
        for call in (lambda: kvq.compile(path, str(tmp_path / "out")),
                     lambda: kvq.set_model(path, layers=2),
                     lambda: kvq.report_bits(path)):
            with pytest.raises(kvq.Error, match="no such file") as error:
                call()
            assert not isinstance(error.value, kvq.SpecError)
    # Spec text is still text, even with a '/' in a comment.
    text = open(kvq.spec_path("kivi-2bit")).read()
    assert kvq.report_bits(text.replace("\n", " // a/b\n", 1))[0]["code_bits"] == 2.0


def test_an_empty_past_attends_to_zeros(fp16_artifact, rng):
    # A sequence with no cached token attends to the empty weighted sum,
    # zeros, as FlashAttention does for an empty key range (the documented
    # contract of Cache.attend); beside it, a sequence with a past attends
    # as if alone.
    cache = kvq.Cache(fp16_artifact, max_sequences=2, pages=8)
    empty, full = cache.add_sequence(), cache.add_sequence()
    k, v = tokens(rng, 10, np.float16), tokens(rng, 10, np.float16)
    cache.append(0, [(full, k, v)])
    q = np.concatenate([query(rng), query(rng)])
    out = cache.attend(0, [empty, full], q)
    assert not out[0].any()
    np.testing.assert_array_equal(out[1], cache.attend(0, [full], q[1:])[0])


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_key_norms_are_those_of_the_stored_keys(dtype, tmp_path_factory, rng):
    """InnerQ's key norms, sqrt(max_t |K_t,c|) over the first append, for
    every model dtype, bit for bit from the keys as the cache stores them
    (the key-norm kernel reads its buffers at the model's element type)."""
    artifact = compiled("innerq-base", tmp_path_factory, dtype=dtype, **SHAPE)
    cache = kvq.Cache(artifact, pages=8)
    seq = cache.add_sequence()
    k = tokens(rng, 300) * 8
    k[:, 1, 5] = 0  # a channel whose max is 0 has norm 1
    cache.append(0, [(seq, k, tokens(rng, 300))])
    stored = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}
    peaks = np.abs(k.astype(stored[dtype]).astype(np.float32)).max(axis=0)
    want = np.where(peaks == 0, np.float32(1), np.sqrt(peaks)).reshape(-1)
    got = cache.read_key_norms(seq, 0)
    assert got.tobytes() == want.tobytes()
    assert got[1 * SHAPE["head_dim"] + 5] == 1
