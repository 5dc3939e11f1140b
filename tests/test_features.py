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


# -- code that needs real values: built or run on the CPU ----------------------------------

NEEDS_DATA = '''
import torch
import torch.nn as nn

batch_size = {batch}
{smoke}

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        # Swin's stochastic-depth rates: .item() in the constructor
        self.rate = {init}
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
{forward}


def get_inputs():
    return [torch.randn(batch_size, 16)]


def get_init_inputs():
    return []
'''


def _needs_data(tmp_path, init="0.5", forward="return self.proj(x) * self.rate", batch=64,
                smoke=""):
    path = tmp_path / "needs_data.py"
    path.write_text(NEEDS_DATA.format(init=init, batch=batch, smoke=smoke,
                                      forward="        " + forward.replace("\n", "\n        ")))
    return load_file(path)


def test_a_constructor_that_needs_real_values_is_built_on_the_cpu_and_traced_on_meta(tmp_path):
    plain = static_features(_needs_data(tmp_path))
    assert plain.trace == "meta"
    f = static_features(_needs_data(tmp_path, init="torch.linspace(0, 1, 3)[1].item()"))
    assert f.trace == "cpu-init"
    assert f == StaticFeatures.from_dict({**plain.to_dict(), "trace": "cpu-init"})


def test_a_forward_that_needs_real_values_runs_on_the_cpu_at_its_smoke_size(tmp_path):
    forward = "y = self.proj(x)\nreturn y[y > 0].sum()"  # a data-dependent shape
    p = _needs_data(tmp_path, forward=forward, smoke='SMOKE_SIZES = {"batch_size": 4}')
    f = static_features(p)
    assert f.trace == "cpu-smoke" and f.input_bytes == 4 * 16 * 4  # the smoke size's counts
    assert f.op_histogram["matmul"] == 1 and f.op_histogram["copy"] == 1  # the mask's index
    assert static_features(p, "smoke").trace == "cpu"  # the size asked: real tensors at it
    # without smoke sizes, real tensors at the file's own
    f = static_features(_needs_data(tmp_path, forward="return self.proj(x) * x.sum().item()"))
    assert f.trace == "cpu" and f.input_bytes == 64 * 16 * 4


def test_the_cpu_fallback_puts_the_module_sizes_back(tmp_path):
    from autoprofiler_env.features import module_features
    from autoprofiler_env.problems import import_problem

    p = _needs_data(tmp_path, forward="return self.proj(x) * x.sum().item()",
                    smoke='SMOKE_SIZES = {"batch_size": 4}')
    module, reasons = import_problem(p.path), []
    assert module_features(p.path, module, reasons.append).trace == "cpu-smoke"
    assert module.batch_size == 64
    assert len(reasons) == 1 and "Tensor.item() cannot be called on meta tensors" in reasons[0]


def test_a_bug_is_not_retried_on_the_cpu(tmp_path):
    from autoprofiler_env.errors import ProblemError

    with pytest.raises(ProblemError, match="the reference forward failed on the meta device: "
                                           "ValueError: broken metadata") as e:
        static_features(_needs_data(tmp_path, forward="raise ValueError('broken metadata')"))
    assert "CPU" not in str(e.value)
    with pytest.raises(ProblemError, match=r"needs real values \(RuntimeError: Tensor.item\(\) "
                                           r"cannot be called on meta tensors\), and failed on "
                                           r"the CPU too: ValueError: also broken"):
        static_features(_needs_data(tmp_path, forward="if x.sum().item() > -1e9:\n"
                                                      "    raise ValueError('also broken')"))


# -- a file that puts its tensors on CUDA itself ---------------------------------------------

ON_CUDA = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rate = {rate}
        self.proj = nn.Linear(16, 16){to_model}

    def forward(self, x):
        {forward}
        return self.proj(x{to_x}) * self.rate


def get_inputs():
    return [torch.randn(64, 16{device})]


def get_init_inputs():
    return []
"""


def _on_cuda(tmp_path, name, rate="0.5", to_model="", to_x="", device="", forward="pass"):
    path = tmp_path / f"{name}.py"
    path.write_text(ON_CUDA.format(rate=rate, to_model=to_model, to_x=to_x, device=device,
                                   forward=forward))
    return load_file(path)


def test_cuda_in_the_file_is_read_as_the_traces_device_with_the_same_features(tmp_path):
    """.cuda(), .to("cuda"), device="cuda" (a user's own kernel, not KernelBench's style):
    traced on meta (or the CPU where it needs real values) as if they were not there, so the
    features need no GPU and are the same with one."""
    plain = static_features(_on_cuda(tmp_path, "plain"))
    cuda = static_features(_on_cuda(tmp_path, "cuda", to_model=".cuda()", to_x='.to("cuda")',
                                    device=', device="cuda"'))
    assert plain.trace == cuda.trace == "meta" and cuda == plain
    device = static_features(_on_cuda(tmp_path, "device", to_model=".to(torch.device('cuda:0'))",
                                      device=", device=torch.device('cuda')"))
    assert device == plain
    init = static_features(_on_cuda(tmp_path, "init", rate="torch.ones(2).cuda()[0].item()",
                                    to_model=".cuda()"))
    assert init.trace == "cpu-init"
    assert init == StaticFeatures.from_dict({**plain.to_dict(), "trace": "cpu-init"})


def test_a_cuda_device_the_file_builds_is_read_by_the_call_given_it(tmp_path):
    """torch.device('cuda', 0) and torch.device(type='cuda', index=0) are built as written (the
    trace's device in their place would be refused: torch.device(device, 0))."""
    plain = static_features(_on_cuda(tmp_path, "plain"))
    built = static_features(_on_cuda(tmp_path, "built", to_model=".to(torch.device('cuda', 0))",
                                     to_x=".to(torch.device(type='cuda', index=0))",
                                     device=", device=torch.device('cuda', index=0)"))
    assert built == plain


def test_pinned_memory_and_an_int_device_are_read_as_the_traces_device(tmp_path):
    """x.pin_memory().cuda(non_blocking=True), a factory's pin_memory=True, device=0, .to(0)
    and a Module's .to(0): the same features, on meta and in the CPU trace (pinned memory is
    refused on meta, and on the CPU without a GPU); ints that are sizes stay sizes."""
    plain = static_features(_on_cuda(tmp_path, "plain"))
    meta = static_features(_on_cuda(tmp_path, "meta", to_model=".to(0)", device=", device=0",
                                    to_x=".pin_memory().cuda(non_blocking=True).to(0)"))
    assert meta == plain
    cpu_plain = static_features(_on_cuda(tmp_path, "cpu_plain", forward="x.sum().item()"))
    cpu = static_features(_on_cuda(tmp_path, "cpu", forward="x.sum().item()",
                                   to_model=".to(device=0)", to_x=".pin_memory().to(0)",
                                   device=", pin_memory=True"))
    assert cpu_plain.trace == cpu.trace == "cpu" and cpu == cpu_plain


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_a_file_that_needs_cuda_beyond_moving_tensors_is_told_what_to_do(tmp_path):
    import torch

    from autoprofiler_env.errors import ProblemError

    # the CPU build's words, or the CUDA build's on a machine without a driver
    with pytest.raises(ProblemError, match="Torch not compiled with CUDA|Found no NVIDIA "
                                           "driver") as e:
        static_features(_on_cuda(tmp_path, "sync", forward="torch.cuda.synchronize()"))
    assert "build the Model and the inputs on the default device and leave CUDA calls out of " \
        "the forward" in e.value.hint
    assert "/sync.py: the reference forward failed" in str(e.value)
    if not torch.backends.cuda.is_built():  # a CUDA build names cuda:0 without a driver
        with pytest.raises(ProblemError, match="Cannot access accelerator") as e:
            static_features(_on_cuda(tmp_path, "accelerator", forward="torch.device(0)"))
        assert "build the Model and the inputs on the default device" in e.value.hint
    with pytest.raises(ProblemError) as e:  # a bug that is not CUDA's: no such hint
        static_features(_on_cuda(tmp_path, "bug", forward="raise ValueError('broken')"))
    assert e.value.hint == ""


def test_a_device_cache_made_while_torch_linspace_was_swapped_is_made_again(tmp_path,
                                                                            monkeypatch):
    """Reviewed (an order-dependent failure): transformers 5 swaps torch.linspace while it
    loads a model, and torch's cache of the constructors a device context redirects, made
    then, kept the swap; torch.linspace then made CPU tensors under the meta device for the
    rest of the process, and a constructor that needs real values traced as `meta`."""
    import torch
    from torch.utils._device import _device_constructors

    real = torch.linspace
    _device_constructors.cache_clear()
    monkeypatch.setattr(torch, "linspace", lambda *a, **k: real(*a, **k))  # a wrapper
    _device_constructors()  # the cache made while swapped
    monkeypatch.setattr(torch, "linspace", real)
    with torch.device("meta"):
        assert torch.linspace(0, 1, 3).device.type == "cpu"  # the bug, as torch has it
    f = static_features(_needs_data(tmp_path, init="torch.linspace(0, 1, 3)[1].item()"))
    assert f.trace == "cpu-init"
    with torch.device("meta"):
        assert torch.linspace(0, 1, 3).device.type == "meta"
