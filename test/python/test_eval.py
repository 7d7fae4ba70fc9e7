"""kvq-eval end to end on a short run: the metrics are what they claim."""

import json
import os
import subprocess
import sys

from kvq import eval as kvq_eval


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
