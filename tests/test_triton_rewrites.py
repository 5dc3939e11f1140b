"""The hand-written Triton rewrites: which problems they match, that their candidates are
standalone files, and -- under Triton's interpreter, on the CPU, in the real harness -- that
the candidates compute what the reference computes."""

import ast
import dis
import textwrap
import time

import pytest

from autoprofiler_env.errors import OptimizationError
from autoprofiler_env.features import StaticFeatures, static_features
from autoprofiler_env.harness import ErrorKind, Evaluator, HarnessConfig
from autoprofiler_env.optimizers import triton
from autoprofiler_env.optimizers.transforms import TRANSFORMATIONS, applicable
from autoprofiler_env.problems import load_file, load_problem, load_suite

NAMES = ("triton_softmax", "triton_layer_norm", "triton_rms_norm", "triton_pointwise")

# Each list is what must match; the suite may hold more that do.
EXPECTED = {
    "triton_softmax": {"softmax_16384x4096", "log_softmax_32768x2048",
                       "linear_temperature_softmax_4096x1024x4096",
                       "bmm_scale_softmax_256x512x64", "moe_top1_dense_4x_4096x1024"},
    "triton_layer_norm": {"layer_norm_16384x4096", "linear_gelu_layernorm_4096x4096",
                          "transformer_encoder_prenorm_16x256x512",
                          "mlp_deep_narrow_16layer_65536x128",
                          "vit_patch_embed_layer_32x3x224x224"},
    "triton_rms_norm": {"rms_norm_16384x4096", "linear_rmsnorm_16384x1024"},
    "triton_pointwise": {"linear_tiny_pointwise_chain_64x256",
                         "linear_gelu_affine_swish_clamp_262144x64x256",
                         "linear_bias_relu_scale_residual_8192x2048",
                         "conv_transpose2d_tanh_scale_bias_32x128x64x64",
                         "matmul_divide_gelu_2048x4096x4096", "linear_swish_sum_4096x4096",
                         "mlp_deep_narrow_16layer_65536x128"},
}
# ... and what must not: other ops, softmax over a middle dim, other norms, single pointwise
# ops (a chain of one).
NOT_EXPECTED = {
    "triton_softmax": {"matmul_4096x4096x4096", "log_softmax_dim1_64x256x8192",
                       "conv3d_clamp_softmax_8x16x16x64x64", "cross_entropy_32768x4096",
                       "layer_norm_16384x4096"},
    "triton_layer_norm": {"matmul_4096x4096x4096", "rms_norm_16384x4096",
                          "group_norm_32x128x128x128", "batch_norm2d_64x64x128x128",
                          "instance_norm2d_32x128x128x128", "softmax_16384x4096"},
    "triton_rms_norm": {"matmul_4096x4096x4096", "layer_norm_16384x4096",
                        "vector_norm_524288x256", "linear_l2normalize_scale_16384x512x128"},
    "triton_pointwise": {"matmul_4096x4096x4096", "gelu_8192x16384", "relu_16384x16384",
                         "sigmoid_16384x8192", "tanh_4096x32768", "silu_32x256x128x128",
                         "leaky_relu_8192x32768", "hardswish_16x512x128x128",
                         "softplus_8192x16384", "softmax_16384x4096",
                         "conv2d_hardswish_mean_64x64x56x56"},
}

INTERPRETED = HarnessConfig(device="cpu", size="smoke", timing_budget_ms=5, min_trials=1,
                            max_trials=2, warmup_ms=0)

# One model that calls every form each rewrite handles (module, function, method; scalar
# arithmetic on either side; y * sigmoid(y); residual and row-vector operands).
FORMS = textwrap.dedent('''
    """Every call form the Triton rewrites match, in one model."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    rows = 64
    hidden = 512
    SMOKE_SIZES = {"rows": 8, "hidden": 32}


    class Model(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.proj = nn.Linear(hidden, hidden)
            self.act = nn.LeakyReLU(0.2)
            self.softmax = nn.Softmax(dim=-1)
            self.ln = nn.LayerNorm(hidden, elementwise_affine=False)
            self.rms = nn.RMSNorm(hidden)
            self.w = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
            self.scale = 0.5

        def forward(self, x):
            y = self.proj(x)
            y = F.gelu(y, approximate="tanh")
            y = self.act(y) * 1.5
            y = torch.clamp_min(y, -2.0).clamp(max=3.0)
            y = F.hardswish(y) - 0.25
            y = 2.0 - y
            y = F.elu(y, alpha=0.5)
            y = y * torch.sigmoid(y)
            y = y + self.w
            z = torch.sigmoid(self.proj(x)).mul(4.0) - 2.0
            z = F.mish(F.softplus(z, beta=2.0))
            z = F.hardsigmoid(F.silu(torch.tanh(z)))
            z = torch.exp(-F.relu6(z).abs()) ** 2
            z = torch.sqrt(torch.reciprocal(1.0 + z))
            z = torch.add(torch.rsqrt(z), x) / 3.0
            a = self.softmax(y)
            b = y.log_softmax(dim=1)
            c = F.softmax(y * self.scale, dim=-1)
            d = self.ln(y)
            e = F.layer_norm(y, y.shape[-1:], self.w)
            f = self.rms(y) + F.rms_norm(y, [y.shape[-1]], eps=1e-5)
            return torch.cat([a, b, c, d, e, f, z], dim=-1)


    def get_inputs():
        return [torch.randn(rows, hidden)]


    def get_init_inputs():
        return [hidden]
''')

UNTRACEABLE = textwrap.dedent('''
    import torch
    import torch.nn as nn

    rows, cols = 64, 256
    SMOKE_SIZES = {"rows": 4, "cols": 16}


    class Model(nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow: fx cannot trace it
                return torch.softmax(x, dim=-1)
            return torch.log_softmax(x, dim=-1)


    def get_inputs():
        return [torch.randn(rows, cols)]


    def get_init_inputs():
        return []
''')

SHAPE_BRANCH = UNTRACEABLE.replace("if x.sum() > 0:", "if x.shape[-1] > 8:")

SIZE_BAKED = textwrap.dedent('''
    import torch
    import torch.nn as nn

    rows, cols = 64, 256
    SMOKE_SIZES = {"rows": 4, "cols": 16}


    class Model(nn.Module):
        def forward(self, x):
            # reads module constants in forward: fx bakes 64 and 256 into the graph
            return torch.softmax(x.reshape(rows, cols), dim=-1)


    def get_inputs():
        return [torch.randn(rows * cols)]


    def get_init_inputs():
        return []
''')


def _features(problem) -> StaticFeatures:
    return static_features(problem)


@pytest.fixture(scope="module")
def suite_matches() -> dict[str, list[str]]:
    started = time.perf_counter()
    matches: dict[str, list[str]] = {name: [] for name in NAMES}
    for problem in load_suite():
        features = _features(problem)
        for name in NAMES:
            if TRANSFORMATIONS[name].applies(problem, features):
                matches[name].append(problem.name)
    print(f"\nanalysed the suite in {time.perf_counter() - started:.1f} s")
    for name, names in matches.items():
        print(f"{name} ({len(names)}): {', '.join(names)}")
    return matches


@pytest.fixture(scope="module")
def forms_problem(tmp_path_factory):
    path = tmp_path_factory.mktemp("forms") / "all_forms_64x512.py"
    path.write_text(FORMS)
    return load_file(path)


@pytest.fixture(scope="module")
def interpreter():
    """A harness worker whose Triton runs kernels on CPU tensors (TRITON_INTERPRET=1 is in
    the environment before the worker, which imports triton, starts)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        with Evaluator(INTERPRETED, timeout_s=600) as evaluator:
            yield evaluator


def _candidate(name: str, problem, **params) -> str:
    return TRANSFORMATIONS[name].rewrite(problem, _features(problem), **params)


# -- the catalogue ------------------------------------------------------------------------------

def test_registered_for_the_gpu_only():
    problem = load_problem("softmax_16384x4096")
    features = _features(problem)
    for name in NAMES:
        assert TRANSFORMATIONS[name].needs_cuda, name
    on_cpu = {t.name for t in applicable(problem, features, device="cpu")}
    on_gpu = {t.name for t in applicable(problem, features, device="cuda")}
    assert "triton_softmax" in on_gpu and "triton_softmax" not in on_cpu
    assert not on_gpu & {"triton_layer_norm", "triton_rms_norm", "triton_pointwise"}


def test_which_suite_problems_match(suite_matches):
    for name in NAMES:
        found = set(suite_matches[name])
        assert EXPECTED[name] <= found, (name, EXPECTED[name] - found)
        assert not NOT_EXPECTED[name] & found, (name, NOT_EXPECTED[name] & found)
    for names in suite_matches.values():
        assert "matmul_4096x4096x4096" not in names


def test_sites_say_what_was_replaced():
    sites = triton.analyze(load_problem("linear_gelu_affine_swish_clamp_262144x64x256"),
                           "triton_pointwise").sites
    assert len(sites) == 1  # the whole tail in one kernel
    assert sites[0].startswith("gelu -> mul gain -> add shift -> y * sigmoid(y) -> clamp -> "
                               "mul 4.0 -> sub 1.0 on 262144x256")
    sites = triton.analyze(load_problem("linear_temperature_softmax_4096x1024x4096"),
                           "triton_softmax").sites
    assert sites == ("softmax over the last dimension of 4096x4096, input scaled by 10 in the "
                     "kernel (softmax)",)
    # 16 identical gelu -> residual-add chains share one generated kernel
    source = _candidate("triton_pointwise", load_problem("mlp_deep_narrow_16layer_65536x128"))
    assert source.count("@triton.jit") == 1
    assert source.count("_ap_pointwise_0(") == 17  # the launcher's definition and 16 calls


# -- the candidates are standalone files --------------------------------------------------------

def _global_loads(code) -> set[str]:
    names = {i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL"}
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            names |= _global_loads(const)
    return names


def _import(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # a real file: triton's @jit reads the source
    return module


def test_candidates_are_self_contained(suite_matches, forms_problem, tmp_path):
    import builtins

    pairs = [(name, load_problem(p)) for name, problems in suite_matches.items()
             for p in problems] + [(name, forms_problem) for name in NAMES]
    assert len(pairs) >= 25
    for i, (name, problem) in enumerate(pairs):
        source = _candidate(name, problem)
        assert "autoprofiler_env" not in source, (name, problem.name)
        assert source.startswith(problem.source.rstrip())
        tree = ast.parse(source)
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        assert [b.id for b in classes["ModelNew"].bases] == ["Model"], (name, problem.name)
        assert "@triton.jit" in source
        # executing it defines every global that the generated forward loads
        path = tmp_path / f"candidate_{i}.py"
        path.write_text(source)
        namespace = vars(_import(path))
        forward = namespace["ModelNew"].forward
        missing = {n for n in _global_loads(forward.__code__)
                   if n not in namespace and not hasattr(builtins, n)}
        assert not missing, (name, problem.name, missing)


def test_forms_problem_matches_every_rewrite(forms_problem):
    counts = {name: len(triton.analyze(forms_problem, name).sites) for name in NAMES}
    assert counts == {"triton_softmax": 3, "triton_layer_norm": 2, "triton_rms_norm": 2,
                      "triton_pointwise": 2}, counts
    sites = triton.analyze(forms_problem, "triton_softmax").sites
    assert sum("log_softmax" in s for s in sites) == 1
    assert sum("scaled by 0.5" in s for s in sites) == 1


# -- what does not match --------------------------------------------------------------------------

def test_untraceable_problem_does_not_match(tmp_path):
    path = tmp_path / "softmax_branchy.py"
    path.write_text(UNTRACEABLE)
    problem = load_file(path)
    # its forward does not even run on the meta device, so give it every tag by hand
    features = StaticFeatures(0, 0, 0, 0, 1, tags=("softmax", "norm", "pointwise",
                                                   "reduction"))
    for name in NAMES:
        assert not TRANSFORMATIONS[name].applies(problem, features)
    assert "fx cannot trace" in triton.analyze(problem, "triton_softmax").reason
    with pytest.raises(OptimizationError):
        TRANSFORMATIONS["triton_softmax"].rewrite(problem, features)


def test_shape_dependent_branch_does_not_match(tmp_path):
    path = tmp_path / "softmax_shape_branch.py"
    path.write_text(SHAPE_BRANCH)
    problem = load_file(path)
    features = _features(problem)  # runs on meta: a branch on a shape is fine there
    assert "softmax" in features.tags
    assert not TRANSFORMATIONS["triton_softmax"].applies(problem, features)
    assert "fx cannot trace" in triton.analyze(problem, "triton_softmax").reason


def test_size_dependent_graph_does_not_match(tmp_path):
    path = tmp_path / "softmax_reshape.py"
    path.write_text(SIZE_BAKED)
    problem = load_file(path)
    assert not TRANSFORMATIONS["triton_softmax"].applies(problem, _features(problem))
    assert "differs between the problem's sizes" in triton.analyze(
        problem, "triton_softmax").reason


def test_rewrite_refuses_a_problem_it_does_not_match():
    problem = load_problem("matmul_4096x4096x4096")
    with pytest.raises(OptimizationError, match="does not apply"):
        _candidate("triton_softmax", problem)


def test_launch_parameters():
    problem = load_problem("softmax_16384x4096")
    source = _candidate("triton_softmax", problem, block=256, num_warps=8)
    assert "_AP_BLOCK = 256\n" in source and "_AP_NUM_WARPS = 8\n" in source
    assert "_AP_BLOCK = None\n" in _candidate("triton_softmax", problem)
    for bad in ({"block": 100}, {"block": 8}, {"num_warps": 3}, {"num_warps": 64},
                {"block": True}):
        with pytest.raises(OptimizationError):
            _candidate("triton_softmax", problem, **bad)


# -- correctness under Triton's interpreter, in the real harness ---------------------------------

CASES = [
    ("triton_softmax", "softmax_16384x4096", {}),
    ("triton_softmax", "softmax_16384x4096", {"block": 32}),  # a row longer than a block
    ("triton_softmax", "log_softmax_32768x2048", {}),
    ("triton_softmax", "log_softmax_32768x2048", {"block": 16}),
    ("triton_softmax", "linear_temperature_softmax_4096x1024x4096", {}),
    ("triton_layer_norm", "layer_norm_16384x4096", {}),
    ("triton_layer_norm", "layer_norm_16384x4096", {"block": 16}),
    ("triton_layer_norm", "linear_gelu_layernorm_4096x4096", {}),
    ("triton_layer_norm", "transformer_encoder_prenorm_16x256x512", {}),
    ("triton_rms_norm", "rms_norm_16384x4096", {}),
    ("triton_rms_norm", "rms_norm_16384x4096", {"block": 16}),
    ("triton_pointwise", "linear_tiny_pointwise_chain_64x256", {}),
    ("triton_pointwise", "linear_gelu_affine_swish_clamp_262144x64x256", {}),
    ("triton_pointwise", "linear_gelu_affine_swish_clamp_262144x64x256",
     {"block": 16, "num_warps": 2}),
    ("triton_pointwise", "mlp_deep_narrow_16layer_65536x128", {}),
    ("triton_pointwise", "conv_transpose2d_tanh_scale_bias_32x128x64x64", {}),
]


@pytest.mark.parametrize("name, problem_name, params", CASES,
                         ids=[f"{n}-{p}-{'-'.join(f'{k}{v}' for k, v in q.items()) or 'default'}"
                              for n, p, q in CASES])
def test_candidate_is_correct_under_the_interpreter(interpreter, name, problem_name, params):
    problem = load_problem(problem_name)
    started = time.perf_counter()
    result = interpreter.evaluate(problem, _candidate(name, problem, **params))
    print(f"{name} {problem_name} {params}: correct={result.correct} max_abs_error="
          f"{result.max_abs_error} in {time.perf_counter() - started:.2f} s")
    assert result.correct, (result.error_kind, result.error_message)
    assert result.n_correctness_passed == INTERPRETED.n_correctness


@pytest.mark.parametrize("name", NAMES)
def test_forms_candidate_is_correct_under_the_interpreter(interpreter, forms_problem, name):
    result = interpreter.evaluate(forms_problem, _candidate(name, forms_problem))
    assert result.correct, (result.error_kind, result.error_message)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("params", [{}, {"block": 16}], ids=["default", "block16"])
def test_masked_tails_are_correct_under_the_interpreter(interpreter, tmp_path, name, params):
    """Rows of 20: no block size divides them, so every kernel's last block is masked (the
    suite's smoke sizes are powers of two and never exercise the masks)."""
    path = tmp_path / "all_forms_ragged_64x20.py"
    path.write_text(FORMS.replace('"hidden": 32', '"hidden": 20').replace(
        "hidden = 512", "hidden = 20"))
    problem = load_file(path)
    result = interpreter.evaluate(problem, _candidate(name, problem, **params))
    assert result.correct, (result.error_kind, result.error_message)


@pytest.mark.parametrize("name, problem_name, old, new", [
    ("triton_softmax", "softmax_16384x4096", "y = e / s\n", "y = e / (s * 1.5)\n"),
    ("triton_layer_norm", "layer_norm_16384x4096", "y = d * rstd\n", "y = d * rstd * 1.5\n"),
    ("triton_pointwise", "linear_gelu_affine_swish_clamp_262144x64x256",
     "v = v * tl.sigmoid(v)\n", "v = v * tl.sigmoid(v) * 1.5\n"),
])
def test_a_wrong_kernel_is_caught(interpreter, name, problem_name, old, new):
    """The kernels really run: a wrong one fails the harness's comparison."""
    problem = load_problem(problem_name)
    source = _candidate(name, problem)
    assert source.count(old) == 1
    result = interpreter.evaluate(problem, source.replace(old, new))
    assert not result.correct
    assert result.error_kind is ErrorKind.MISMATCH, result.error_message
