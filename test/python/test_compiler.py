"""kvq.compile, kvq.set_model and kvq.report_bits against kvq-opt's
behaviour: same artifacts, same diagnostics, same accounting."""

import gc
import json
import os
import tempfile

import numpy as np
import pytest

import kvq


def test_compile_writes_an_artifact(kivi_artifact):
    with open(kivi_artifact.manifest_path) as f:
        manifest = json.load(f)
    assert manifest["model"]["head_dim"] == 64
    assert manifest["model"]["kv_heads"] == 3
    for name in ("kernels.so", "kernels.o", "kernels.sm_80.ptx"):
        assert os.path.exists(os.path.join(kivi_artifact.dir, name))


def test_bad_spec_raises_spec_error_with_location():
    with pytest.raises(kvq.SpecError) as error:
        kvq.compile(
            "kvq.cache @x model <layers = 1, heads = 2, kv_heads = 3, "
            "head_dim = 4, dtype = f16> page 1 {}"
        )
    message = str(error.value)
    assert "<spec>:1:" in message
    assert "heads (2) must be a multiple of kv_heads (3)" in message
    assert isinstance(error.value, kvq.Error)


def _full_precision_cache(name):
    return (
        f"kvq.cache @{name} model <layers = 1, heads = 1, kv_heads = 1, "
        "head_dim = 64, dtype = f16> page 32 {\n"
        "  kvq.keys window <recent = 0, flush = 32> {\n"
        "    kvq.layers 0 to 1 : #kvq.full_precision\n  }\n"
        "  kvq.values window <recent = 0, flush = 32> {\n"
        "    kvq.layers 0 to 1 : #kvq.full_precision\n  }\n}\n"
    )


# A name with a space, `/`, unicode or an escape aborted the interpreter
# (LLVM's "Symbol name with unsupported characters"); `..` wrote the
# artifact of a two-cache spec into the output directory's parent.
@pytest.mark.parametrize(
    "name", ['"a b"', '"a/b"', '".."', '"caf\u00e9"', '"a\\0Ab"', '"a.b"']
)
def test_cache_names_must_be_identifiers(tmp_path, name):
    out = tmp_path / "out"
    spec = _full_precision_cache(name) + _full_precision_cache("other")
    with pytest.raises(kvq.SpecError, match="name must be an identifier") as error:
        kvq.compile(spec, str(out))
    assert "<spec>:1:1:" in str(error.value)
    assert isinstance(error.value, kvq.Error)
    assert sorted(os.listdir(tmp_path)) == []


def test_compile_without_out_dir_owns_its_temporary_directory():
    artifact = kvq.compile(_full_precision_cache("owned"))
    directory = artifact.dir
    assert os.path.isfile(artifact.manifest_path)
    cache = kvq.Cache(artifact, max_sequences=1, pages=2)
    del artifact
    gc.collect()
    assert os.path.isfile(os.path.join(directory, "manifest.json"))  # the cache's
    del cache
    gc.collect()
    assert not os.path.exists(directory)


def test_failed_compile_leaves_no_temporary_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(kvq.SpecError):
        kvq.compile("kvq.cache @x model <layers = 1, heads = 2, kv_heads = 3, "
                    "head_dim = 4, dtype = f16> page 1 {}")
    assert os.listdir(tmp_path) == []


def test_unsupported_feature_is_a_spec_error():
    # OTT pools need keys and values on one window.
    spec = (
        "kvq.cache @x model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, "
        "dtype = f16> page 128 pool <capacity = 3, extra = 32> {\n"
        "  kvq.keys window <recent = 32, flush = 128> {\n"
        "    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, "
        "group = 128>\n  }\n"
        "  kvq.values window <recent = 64, flush = 128> {\n"
        "    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, "
        "span = channels, group = 64>\n  }\n}\n"
    )
    with pytest.raises(kvq.SpecError, match="outlier pools only when keys and values"):
        kvq.compile(spec)


def test_set_model_maps_layers_by_depth():
    spec = kvq.set_model(
        kvq.spec_path("asymkv-16-0"), layers=30, heads=9, kv_heads=3, head_dim=64
    )
    assert "layers = 30, heads = 9, kv_heads = 3, head_dim = 64" in spec
    assert "kvq.layers 0 to 15 : #kvq.quant<bits = 2" in spec
    assert "kvq.layers 15 to 30 : #kvq.quant<bits = 1" in spec


def test_set_model_names_the_fix():
    with pytest.raises(kvq.SpecError, match="clamp-groups=true"):
        kvq.set_model(kvq.spec_path("skvq-k2v2-g128"), head_dim=64)
    spec = kvq.set_model(
        kvq.spec_path("skvq-k2v2-g128"), head_dim=64, clamp_groups=True
    )
    assert "group = 64" in spec


def test_report_bits_matches_the_papers():
    (kivi,) = kvq.report_bits(kvq.spec_path("kivi-2bit"))
    assert kivi["code_bits"] == 2.0
    assert kivi["storage_bits"] == 3.0  # two f16 parameters per 32 values
    (xquant,) = kvq.report_bits(kvq.spec_path("xquant-llama2-7b"))
    assert xquant["code_bits"] == pytest.approx(1.40625)
    assert kivi["bytes"] == sum(
        kivi[k] for k in ("codes", "params", "full_precision", "pools", "metadata")
    )


def _has_avx512_vnni():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512_vnni" in f.read()
    except OSError:
        return False


def test_dot_factor_bits_round_the_programs_key_factors(tmp_path):
    # KIVI-2's keys (span=tokens) in attend programs: on a host with AVX-512
    # VNNI their dots take the query rounded to 16 or 8 bits; 8-bit factors
    # stay within their own tolerance of the emitted kernel
    # (docs/Numerics.md, "Attention on integer dots"), 16-bit ones within
    # the attention tolerance. Without VNNI both are f32 and equal.
    spec = kvq.set_model(kvq.spec_path("kivi-2bit"), layers=1, heads=4,
                         kv_heads=1, head_dim=64)
    rng = np.random.default_rng(7)
    k = rng.standard_normal((600, 1, 64)).astype(np.float16)
    v = rng.standard_normal((600, 1, 64)).astype(np.float16)
    q = rng.standard_normal((1, 4, 64)).astype(np.float16)

    def attend(**options):
        artifact = kvq.compile(spec, str(tmp_path / str(len(os.listdir(tmp_path)))),
                               **options)
        cache = kvq.Cache(artifact, max_sequences=1, pages=16)
        seq = cache.add_sequence()
        cache.append(0, [(seq, k, v)])
        return cache.attend(0, [seq], q)[0]

    emitted = attend()
    by_bits = {bits: attend(dot_factor_bits=bits, quantized_attend_programs=True)
               for bits in (16, 8)}
    scale = np.abs(emitted).max()
    assert np.abs(by_bits[16] - emitted).max() <= 2e-3 * scale + 1e-4
    assert np.abs(by_bits[8] - emitted).max() <= 2e-2 * scale + 1e-4
    if _has_avx512_vnni():
        assert not np.array_equal(by_bits[8], by_bits[16])
    else:
        np.testing.assert_array_equal(by_bits[8], by_bits[16])


def test_dot_factor_bits_other_than_16_or_8_are_refused():
    with pytest.raises(kvq.SpecError, match="dot-factor-bits must be 16 or 8"):
        kvq.compile(_full_precision_cache("bits"), dot_factor_bits=4)
