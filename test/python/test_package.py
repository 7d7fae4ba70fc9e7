"""The package as users reach it: importable from any directory in the
build's virtual environment, its pyproject.toml consistent with the package,
its stubs current, and every tool's help complete (exit 0, every option
with its help and default)."""

import importlib
import os
import subprocess
import sys
import tomllib

import pytest

import kvq
from kvq import calibrate as kvq_calibrate
from kvq import eval as kvq_eval
from kvq import hf_compare as kvq_hf_compare
from kvq import tune as kvq_tune

SOURCE_DIR = os.environ.get("KVQ_SOURCE_DIR", kvq._SOURCE_DIR)
BINARY_DIR = os.environ.get("KVQ_BINARY_DIR", os.path.join(SOURCE_DIR, "build"))
TOOLS = {"kvq-eval": kvq_eval, "kvq-tune": kvq_tune, "kvq-calibrate": kvq_calibrate,
         "kvq-hf-compare": kvq_hf_compare}


def pyproject() -> dict:
    with open(os.path.join(SOURCE_DIR, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def clean_env() -> dict:
    """The environment without what ctest adds to find the package."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "KVQ_SOURCE_DIR", "KVQ_BINARY_DIR")}


@pytest.mark.skipif(sys.prefix == sys.base_prefix,
                    reason="the build writes its .pth into virtual environments only")
def test_import_from_another_directory(tmp_path):
    # No PYTHONPATH, no KVQ_SOURCE_DIR, a directory outside the checkout:
    # the venv's kvq-build-tree.pth finds the build tree's package, and the
    # package finds the shipped specs.
    code = ("import kvq; print(kvq.__file__); print(kvq.__version__); "
            "print(kvq.spec_path('kivi-2bit')); "
            "print(kvq.report_bits(kvq.spec_path('kivi-2bit'))[0]['code_bits'])")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                            env=clean_env(), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    path, version, spec, bits = result.stdout.split("\n")[:4]
    assert os.path.realpath(path) == os.path.realpath(
        os.path.join(BINARY_DIR, "python", "kvq", "__init__.py"))
    assert version == kvq.__version__
    assert os.path.isfile(spec)
    assert float(bits) == 2.0


def test_pyproject_matches_the_package():
    project = pyproject()["project"]
    assert project["name"] == "kvq-compiler"  # PyPI's `kvq` is another project
    assert project["dynamic"] == ["version"]
    version = pyproject()["tool"]["scikit-build"]["metadata"]["version"]
    assert version["input"] == "python/kvq/__init__.py"
    assert kvq.__version__.count(".") == 2
    assert set(project["scripts"]) == set(TOOLS)
    for script, target in project["scripts"].items():
        module, function = target.split(":")
        assert importlib.import_module(module) is TOOLS[script]
        assert callable(getattr(TOOLS[script], function))
    build = pyproject()["build-system"]["requires"]
    assert all("==" in requirement for requirement in build)


def test_stubs_are_current(tmp_path):
    # python/kvq/_kvq.pyi is nanobind's stubgen output for the extension,
    # committed; regenerate it with the command below when the bindings
    # change.
    out = tmp_path / "_kvq.pyi"
    package_root = os.path.dirname(os.path.dirname(kvq.__file__))
    subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-i", package_root,
                    "-m", "kvq._kvq", "-o", str(out)], check=True, timeout=120)
    with open(os.path.join(SOURCE_DIR, "python", "kvq", "_kvq.pyi")) as f:
        assert out.read_text() == f.read()
    assert os.path.exists(os.path.join(os.path.dirname(kvq.__file__), "py.typed"))


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_option_has_help_and_default(tool):
    parser = TOOLS[tool].make_parser()
    # argparse wraps help at spaces and hyphens: compare without whitespace.
    text = "".join(parser.format_help().split())
    for action in parser._actions:
        if action.dest == "help":
            continue
        assert action.help, f"{tool} {action.option_strings or action.dest}"
        default = "".join(str(action.default).split())
        assert f"(default:{default})" in text, action.dest
    assert "--blas-threadsN" in text and "OpenBLAS" in text


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_python_tools_help_exits_zero(tool):
    launcher = os.path.join(BINARY_DIR, "bin", tool)
    result = subprocess.run([launcher, "--help"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {tool}")
    assert "OpenBLAS" in result.stdout


@pytest.mark.parametrize("tool,options", [
    ("kvq-run", ["--tokens", "--threads"]),
    ("kvq-bench", ["--contexts", "--batches", "--threads", "--repeat", "--steps",
                   "--evict-mib", "--probe-mib", "--split-tokens", "--device",
                   "--gpu-model", "--profile"]),
])
def test_cpp_tools_help_exits_zero(tool, options):
    for flag in ("--help", "-h"):
        result = subprocess.run([os.path.join(BINARY_DIR, "bin", tool), flag],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0].startswith(f"usage: {tool}")
        assert len(lines) >= 8
        for option in options:
            line = next(l for l in lines if l.strip().startswith(option))
            assert len(line.split(None, 1)) == 2, line  # a description follows


def test_kvq_opt_lists_its_own_options():
    opt = os.path.join(BINARY_DIR, "bin", "kvq-opt")
    result = subprocess.run([opt, "--help-kvq"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    listed = [line.split()[0] for line in result.stdout.splitlines()
              if line.startswith("  --")]
    for name in ("--kvq-compile-pipeline", "--kvq-report-bits", "--kvq-set-model",
                 "--kvq-compile=<DIR>", "--kvq-host-cpu=<CPU>"):
        assert name in listed, result.stdout
    assert all(name.startswith("--kvq-") for name in listed), listed
    assert "--help-kvq" in subprocess.run([opt, "--help"], capture_output=True,
                                          text=True, timeout=60).stdout


def test_infeasible_budget_is_refused_before_measuring():
    from kvq import tune_space as space

    frame = space.parse_frame(kvq.set_model(kvq.spec_path("kivi-2bit"), layers=30,
                                            heads=9, kv_heads=3, head_dim=64))
    options = space.valid_options(frame, space.DEFAULT_MENU)
    with pytest.raises(ValueError, match=r"budget 0.5 is infeasible: 737280 bytes for a "
                       r"sequence of 1024 tokens, but the cheapest mix of the menu "
                       r"takes \d+ bytes \(\d\.\d{3} bits per element\)"):
        kvq_tune.check_budgets(frame, options, ["4.633", "0.5"], 1024)
    with pytest.raises(ValueError, match="budget 'lots'"):
        kvq_tune.check_budgets(frame, options, ["lots"], 1024)
    kvq_tune.check_budgets(frame, options, ["4.633", "6671B"], 1024)
