"""Static features, checked against hand-counted FLOPs and bytes."""

import numpy as np
import pytest

from autoprofiler_env.features import FEATURE_NAMES, StaticFeatures, static_features
from autoprofiler_env.problems import load_file, load_problem, load_suite


def test_matmul_flops_and_bytes_are_exact():
    f = static_features(load_problem("matmul_4096x4096x4096"))
    n = 4096
    assert f.flops == 2 * n ** 3
    assert f.bytes_min == 3 * n * n * 4
    assert f.tags[0] == "matmul"
    assert f.op_histogram == {"matmul": 1}
    assert f.arithmetic_intensity == pytest.approx(2 * n ** 3 / (12 * n * n))


def test_relu_is_pointwise_and_memory_bound(data_dir):
    f = static_features(load_file(data_dir / "problems" / "relu_small.py"))
    assert f.flops == 0
    assert f.pointwise_flops == 64 * 128
    assert f.bytes_min == 2 * 64 * 128 * 4 == f.bytes_unfused
    assert f.tags == ("pointwise",)
    assert f.n_inputs == 1 and f.max_input_rank == 2


def test_smoke_size_changes_the_counts(data_dir):
    p = load_file(data_dir / "problems" / "relu_small.py")
    assert static_features(p, "smoke").pointwise_flops == 8 * 16


def test_vector_has_a_name_per_entry_and_round_trips():
    for p in load_suite(level=3)[:4]:
        f = static_features(p)
        v = f.vector()
        assert v.shape == (len(FEATURE_NAMES),) and v.dtype == np.float32
        assert np.isfinite(v).all()
        assert StaticFeatures.from_dict(f.to_dict()) == f


def test_a_fused_chain_has_more_unfused_traffic_than_minimal():
    chains = [static_features(p) for p in load_suite(level=2)]
    assert all(f.n_ops >= 2 for f in chains)
    assert sum(f.fusion_ratio > 1.5 for f in chains) >= len(chains) // 2


def test_pointwise_ops_are_named_not_left_to_a_torch_versions_tags():
    """torch 2.11 did not tag leaky_relu pointwise: its problem lost the compile candidate."""
    import torch

    from autoprofiler_env.features import op_category

    for name in ("leaky_relu", "gelu", "relu", "add", "mul", "sigmoid", "tanh"):
        assert op_category(getattr(torch.ops.aten, name)) == "pointwise", name  # no tags
