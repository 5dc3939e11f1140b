"""Composed candidates: one transformation per kind of decision, layered innermost first."""

import ast

import pytest

from autoprofiler_env.errors import OptimizationError
from autoprofiler_env.features import static_features
from autoprofiler_env.harness import Evaluator, HarnessConfig
from autoprofiler_env.optimizers import TRANSFORMATIONS
from autoprofiler_env.optimizers.compose import applies, compose, composed_name, kind
from autoprofiler_env.problems import load_problem


def _with_features(name):
    problem = load_problem(name)
    return problem, static_features(problem)


def test_a_compositions_name_is_canonical_and_checked():
    assert composed_name(["cuda_graph", "autocast_bf16", "compile"]) == \
        "compile+autocast_bf16+cuda_graph"
    assert composed_name(["channels_last", "tf32", "cudnn_benchmark"]) == \
        "tf32+channels_last+cudnn_benchmark"
    assert composed_name(["triton_softmax", "cuda_graph"]) == "triton_softmax+cuda_graph"
    assert kind("triton_pointwise") == "codegen" and kind("cuda_graph") == "launch"
    with pytest.raises(OptimizationError, match="both decide the precision"):
        composed_name(["tf32", "autocast_fp16"])
    with pytest.raises(OptimizationError, match="both decide the codegen"):
        composed_name(["compile", "triton_softmax"])
    with pytest.raises(OptimizationError, match="not composed with autocast"):
        composed_name(["triton_layer_norm", "autocast_bf16"])
    with pytest.raises(OptimizationError, match="not a transformation"):
        composed_name(["fast_math"])


def test_a_single_name_is_the_transformation_itself():
    p, f = _with_features("conv2d_3x3_16x64x128x128")
    for name in ("channels_last", "cudnn_benchmark", "tf32"):
        assert compose(p, f, name) == TRANSFORMATIONS[name].rewrite(p, f)


def test_layers_subclass_each_other_innermost_first():
    p, f = _with_features("conv2d_batchnorm_relu_32x64x112x112")
    name = "compile+autocast_bf16+channels_last+cudnn_benchmark+cuda_graph"
    assert applies(p, f, name) and not applies(p, f, name, device="cpu")
    source = compose(p, f, name)
    classes = {n.name: [ast.unparse(b) for b in n.bases] for n in ast.parse(source).body
               if isinstance(n, ast.ClassDef)}
    chain, cls = [], "ModelNew"
    while cls != "Model":
        chain.append(cls)
        (cls,) = classes[cls]
    assert chain == ["ModelNew", "_Layer3_cudnn_benchmark", "_Layer2_channels_last",
                     "_Layer1_autocast_bf16", "_Layer0_compile"]
    assert f"# ---- autoprofiler candidate: {name} ----" in source
    with pytest.raises(OptimizationError, match="channels_last does not apply"):
        compose(*_with_features("linear_gelu_layernorm_4096x4096"), "compile+channels_last")


@pytest.mark.slow
@pytest.mark.parametrize("problem, name", [
    ("conv2d_batchnorm_relu_32x64x112x112", "autocast_bf16+channels_last"),
    ("linear_bias_relu_scale_residual_8192x2048", "compile+autocast_bf16"),
])
def test_composed_candidates_are_correct_on_a_cpu(problem, name):
    # bf16 keeps 8 significant bits: on the timed calls' fresh, unpredictable inputs a conv's
    # output is now and then 1.5e-2 off (CI, one value of 512), so the check is at 5e-2, the
    # tolerance a bf16 result can keep on every input; the layering is what is tested here.
    p, f = _with_features(problem)
    config = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=5, min_trials=2,
                           max_trials=5, atol=5e-2, rtol=5e-2)
    with Evaluator(config, timeout_s=600) as ev:
        result = ev.evaluate(p, compose(p, f, name))
    assert result.correct, result.error_message
    assert 0 < result.tolerance_needed["float32"] < 5e-2
