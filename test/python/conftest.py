"""Shared fixtures: small artifacts compiled once per session."""

import numpy as np
import pytest

import kvq

# A small model shape: 2 layers, GQA 3, head_dim 64 (SmolLM2's heads).
SHAPE = dict(layers=2, heads=9, kv_heads=3, head_dim=64)


def compiled(name: str, tmp_path_factory, **shape) -> kvq.Artifact:
    spec = kvq.set_model(kvq.spec_path(name), **(shape or SHAPE))
    return kvq.compile(spec, str(tmp_path_factory.mktemp(name)))


@pytest.fixture(scope="session")
def fp16_artifact(tmp_path_factory):
    return compiled("fp16", tmp_path_factory)


@pytest.fixture(scope="session")
def kivi_artifact(tmp_path_factory):
    return compiled("kivi-2bit", tmp_path_factory)


@pytest.fixture
def rng():
    return np.random.default_rng(20261123)
