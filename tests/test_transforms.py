"""The transformation catalogue: every rewrite is a valid ModelNew program, and the ones that
run on a CPU are judged correct by the harness."""

import ast

import pytest

from autoprofiler_env.errors import OptimizationError
from autoprofiler_env.features import static_features
from autoprofiler_env.harness import Evaluator, HarnessConfig
from autoprofiler_env.optimizers.transforms import TRANSFORMATIONS, applicable
from autoprofiler_env.problems import load_problem, load_suite

SUITE = [(p, static_features(p)) for p in load_suite()]


def test_every_transformation_applies_somewhere_and_not_everywhere():
    for name, t in TRANSFORMATIONS.items():
        hits = [p.name for p, f in SUITE if t.applies(p, f)]
        assert 0 < len(hits) < len(SUITE) or name == "cuda_graph", (name, len(hits))


@pytest.mark.parametrize("name", sorted(TRANSFORMATIONS))
def test_rewrites_are_valid_self_contained_programs(name):
    t = TRANSFORMATIONS[name]
    for problem, features in SUITE:
        if not t.applies(problem, features):
            with pytest.raises(OptimizationError, match="does not apply"):
                t.rewrite(problem, features)
            continue
        source = t.rewrite(problem, features)
        tree = ast.parse(source)
        classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
        assert "ModelNew" in classes and "Model" in classes
        assert "autoprofiler_env" not in source
        assert f"# ---- autoprofiler candidate: {name} ----" in source


def test_gemm_problems_get_precision_rewrites_and_pointwise_ones_do_not():
    names = {t.name for t in applicable(*_with_features("matmul_4096x4096x4096"))}
    assert {"tf32", "autocast_bf16", "max_autotune"} <= names and "channels_last" not in names
    names = {t.name for t in applicable(*_with_features("relu_16384x16384"))}
    assert "tf32" not in names and "compile" in names
    names = {t.name for t in applicable(*_with_features("conv2d_3x3_16x64x128x128"))}
    assert {"channels_last", "cudnn_benchmark", "tf32"} <= names
    cpu = {t.name for t in applicable(*_with_features("conv2d_3x3_16x64x128x128"), device="cpu")}
    assert "cudnn_benchmark" not in cpu and "channels_last" in cpu


def _with_features(name):
    problem = load_problem(name)
    return problem, static_features(problem)


@pytest.mark.slow
@pytest.mark.parametrize("problem, transformation", [
    ("conv2d_batchnorm_relu_32x64x112x112", "channels_last"),
    # bf16 needs about 3e-3 here; on linear_gelu_layernorm it needs 0.0095-0.0101 at smoke
    # size, at the edge of 1e-2 (and fails on the H200 at full size): judge 2 compares more
    # input sets than the three judge 1 did, so that one passes on some runs only
    ("linear_bias_relu_scale_residual_8192x2048", "autocast_bf16"),
    ("softmax_16384x4096", "compile"),
])
def test_cpu_capable_rewrites_are_correct(problem, transformation):
    p, f = _with_features(problem)
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=5, min_trials=2,
                           max_trials=5)
    with Evaluator(config, timeout_s=600) as ev:
        result = ev.evaluate(p, TRANSFORMATIONS[transformation].rewrite(p, f))
    assert result.correct, result.error_message
    assert result.tolerance_needed["float32"] < 5e-3
