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
from kvq import tune as kvq_tune

SOURCE_DIR = os.environ.get("KVQ_SOURCE_DIR", kvq._SOURCE_DIR)
BINARY_DIR = os.environ.get("KVQ_BINARY_DIR", os.path.join(SOURCE_DIR, "build"))
TOOLS = {"kvq-eval": kvq_eval, "kvq-tune": kvq_tune, "kvq-calibrate": kvq_calibrate}


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
