"""The op classification of the static features (autoprofiler_env.features): one small
KernelBench-format model per op kind, written here, traced on the meta device."""

import textwrap

import pytest
import torch

from autoprofiler_env.features import op_category, static_features
from autoprofiler_env.problems import load_file, load_problem

TEMPLATE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, {args}):
{forward}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''


def features(tmp_path, forward, inputs, init="pass", args="x", name="model"):
    """The static features of a KernelBench-format file with this ``__init__`` body, this
    ``forward(args)`` body and these ``get_inputs()`` list items."""
    path = tmp_path / f"{name}.py"
    path.write_text(TEMPLATE.format(init=textwrap.indent(init, " " * 8), args=args,
                                    forward=textwrap.indent(forward, " " * 8), inputs=inputs))
    return static_features(load_file(path))


def decomposition_flops(build, inputs):
    """What torch's FlopCounterMode alone counts for ``build()(*inputs())`` on meta: the
    GEMMs of whatever the call decomposes into there."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"), torch.no_grad():
        model, args = build(), inputs()
        counter = FlopCounterMode(display=False)
        with counter:
            model(*args)
    return counter.get_total_flops()


# -- matrix-vector products ------------------------------------------------------------------

@pytest.mark.parametrize("forward, args, inputs, flops", [
    ("return a @ x", "a, x", "torch.randn(64, 32), torch.randn(32)", 2 * 64 * 32),
    ("return torch.mv(a, x)", "a, x", "torch.randn(64, 32), torch.randn(32)", 2 * 64 * 32),
    ("return torch.addmv(y, a, x)", "y, a, x",
     "torch.randn(64), torch.randn(64, 32), torch.randn(32)", 2 * 64 * 32),
    ("return torch.dot(x, x)", "x", "torch.randn(32)", 2 * 32),
    ("return a @ b", "a, b", "torch.randn(64, 32), torch.randn(32, 8)", 2 * 64 * 32 * 8),
])
def test_a_matrix_vector_product_counts_its_flops(tmp_path, forward, args, inputs, flops):
    """torch's FlopCounterMode counts none for mv, addmv and dot (torch 2.13): the suite's
    matvec_16384x16384 had flops 0 (the data audit of 2026-12-07); counted here, once (a
    matrix product, which FlopCounterMode counts, is not counted again)."""
    f = features(tmp_path, forward, inputs, args=args)
    assert f.flops == flops and f.tags == ("matmul",)


def test_a_matrix_vector_product_that_torch_counts_is_not_counted_twice(tmp_path,
                                                                        monkeypatch):
    """Where FlopCounterMode counts ``mv`` (a later torch, here a formula registered for
    it), the extractor adds none of its own."""
    from torch.utils import flop_counter

    monkeypatch.setitem(flop_counter.flop_registry, torch.ops.aten.mv,
                        flop_counter.shape_wrapper(lambda a_shape, *args, **kwargs:
                                                   2 * a_shape[0] * a_shape[1]))
    f = features(tmp_path, "return torch.mv(a, x)", "torch.randn(64, 32), torch.randn(32)",
                 args="a, x")
    assert f.flops == 2 * 64 * 32


def test_the_shipped_matvec_is_counted_now_and_was_built_with_none():
    from autoprofiler_env.dataset import Dataset

    assert static_features(load_problem("matvec_16384x16384")).flops == 2 * 16384 * 16384
    shipped = Dataset.load(None).record("problem://autoprofiler/v1/level1/matvec_16384x16384")
    assert shipped.features.flops == 0  # built before the fix (docs/dataset.md says so)


# -- transposed convolutions --------------------------------------------------------------

def test_a_transposed_convolution_is_conv_transpose_and_a_convolution_conv(tmp_path):
    f = features(tmp_path, "return self.up(x)", "torch.randn(2, 8, 16, 16)",
                 init="self.up = nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)")
    assert f.op_histogram == {"conv_transpose": 1} and f.tags == ("conv_transpose",)
    assert f.flops > 0
    f = features(tmp_path, "return self.conv(x)", "torch.randn(2, 8, 16, 16)",
                 init="self.conv = nn.Conv2d(8, 4, 3)")
    assert f.op_histogram == {"conv": 1} and f.tags == ("conv",)


def test_functional_transposed_convolutions_and_a_mix_ranked_by_flops(tmp_path):
    f = features(tmp_path, "return F.conv_transpose1d(x, w)",
                 "torch.randn(2, 8, 32), torch.randn(8, 4, 3)", args="x, w")
    assert f.tags == ("conv_transpose",)
    # a small convolution, then a transposed one with far more FLOPs: ranked by FLOPs
    f = features(tmp_path, "return self.up(self.down(x))", "torch.randn(2, 8, 32, 32)",
                 init="self.down = nn.Conv2d(8, 8, 1)\n"
                      "self.up = nn.ConvTranspose2d(8, 64, 5, stride=2)")
    assert f.op_histogram == {"conv": 1, "conv_transpose": 1}
    assert f.tags == ("conv_transpose", "conv")


def test_the_transposed_flag_is_read_from_the_call():
    conv = torch.ops.aten.convolution.default
    args = (None, None, None, [1], [0], [1])
    assert op_category(conv, args + (True, [0], 1)) == "conv_transpose"
    assert op_category(conv, args + (False, [0], 1)) == "conv"
    assert op_category(conv) == "conv"  # no arguments: the name alone
    assert op_category(torch.ops.aten.slow_conv_transpose2d) == "conv_transpose"


# -- RNNs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("module, gates", [
    ("nn.LSTM(16, 32, num_layers=2, bidirectional=True, batch_first=True)", 4),
    ("nn.GRU(16, 32, num_layers=2, bidirectional=True, batch_first=True)", 3),
    ("nn.RNN(16, 32, num_layers=2, bidirectional=True, batch_first=True)", 1),
])
def test_an_rnn_is_rnn_operators_per_step_not_its_decomposition(tmp_path, module, gates):
    batch, steps = 4, 50
    f = features(tmp_path, "return self.rnn(x)[0]", f"torch.randn({batch}, {steps}, 16)",
                 init=f"self.rnn = {module}")
    # one per layer, direction and step; none of the decomposition's pointwise operators
    assert f.op_histogram == {"rnn": 2 * 2 * steps} and f.n_ops == 2 * 2 * steps
    assert f.tags == ("rnn",) and f.pointwise_flops == 0
    # the FLOPs of its weight matrices, one vector per token: what FlopCounterMode counts of
    # the decomposition (layer 1 reads both directions of layer 0: 64 wide)
    hidden = gates * 32
    assert f.flops == 2 * batch * steps * 2 * hidden * ((16 + 32) + (64 + 32))
    cls = module.split("(")[0].split(".")[1]
    assert f.flops == decomposition_flops(
        lambda: getattr(torch.nn, cls)(16, 32, num_layers=2, bidirectional=True,
                                       batch_first=True),
        lambda: [torch.randn(batch, steps, 16)])
    # its outputs' shapes are made without running it: the same as the real call's
    assert f.output_bytes == batch * steps * 64 * 4


def test_an_lstm_with_a_projection_and_its_functional_form(tmp_path):
    f = features(tmp_path, "return self.rnn(x)[1][0]", "torch.randn(10, 3, 8)",
                 init="self.rnn = nn.LSTM(8, 16, num_layers=3, proj_size=4)")
    assert f.op_histogram == {"rnn": 3 * 10} and f.output_bytes == 3 * 3 * 4 * 4  # h_n
    assert f.flops == decomposition_flops(lambda: torch.nn.LSTM(8, 16, num_layers=3,
                                                                proj_size=4),
                                          lambda: [torch.randn(10, 3, 8)])
    # torch.rnn_tanh itself, as a forward may call it (params, has_biases, layers, dropout,
    # train, bidirectional, batch_first)
    f = features(tmp_path, "return torch.rnn_tanh(x, h, [w_ih, w_hh], False, 1, 0.0, False, "
                           "False, True)[0]",
                 "torch.randn(2, 7, 8), torch.zeros(1, 2, 16), torch.randn(16, 8), "
                 "torch.randn(16, 16)", args="x, h, w_ih, w_hh")
    assert f.op_histogram == {"rnn": 7} and f.flops == 2 * 2 * 7 * 16 * (8 + 16)


def test_an_rnn_cell_keeps_its_gemms_and_counts_its_gates_as_one_rnn_operator(tmp_path):
    f = features(tmp_path, "return self.cell(x, (h, c))[0]",
                 "torch.randn(64, 32), torch.randn(64, 48), torch.randn(64, 48)",
                 init="self.cell = nn.LSTMCell(32, 48)", args="x, h, c")
    # a GPU runs two GEMMs and one fused gate kernel (torch.compile sees the GEMMs)
    assert f.op_histogram == {"matmul": 2, "rnn": 1} and f.tags == ("matmul", "rnn")
    assert f.flops == 2 * 64 * 4 * 48 * (32 + 48)
    f = features(tmp_path, "return self.cell(x, h)", "torch.randn(64, 32), torch.randn(64, 48)",
                 init="self.cell = nn.GRUCell(32, 48)", args="x, h")
    assert f.op_histogram == {"matmul": 2, "rnn": 1}


def test_a_hand_written_recurrence_stays_matmul_and_pointwise(tmp_path):
    f = features(tmp_path, "for _ in range(4):\n    h = torch.tanh(self.i2h(x) + self.h2h(h))\n"
                           "return h", "torch.randn(8, 16), torch.randn(8, 16)",
                 init="self.i2h = nn.Linear(16, 16)\nself.h2h = nn.Linear(16, 16)", args="x, h")
    assert "rnn" not in f.op_histogram and f.tags[0] == "matmul"


def test_the_suite_lstm_is_rnn_with_its_flops_unchanged():
    f = static_features(load_problem("lstm_sequence_64x128x512"))
    assert f.op_histogram == {"rnn": 128} and f.tags == ("rnn",)
    assert f.flops == 2 * 64 * 128 * (4 * 512) * (512 + 512)  # the decomposition's count too


# -- attention ----------------------------------------------------------------------------

def test_scaled_dot_product_attention_is_one_attention_operator(tmp_path):
    b, h, length, keys, e = 2, 4, 64, 32, 16
    f = features(tmp_path, "return F.scaled_dot_product_attention(q, k, v, is_causal=False)",
                 f"torch.randn({b}, {h}, {length}, {e}), torch.randn({b}, {h}, {keys}, {e}), "
                 f"torch.randn({b}, {h}, {keys}, {e})", args="q, k, v")
    assert f.op_histogram == {"attention": 1} and f.tags == ("attention",)
    assert f.flops == 2 * 2 * b * h * length * keys * e  # QK^T and PV, as FlopCounterMode
    # the math decomposition's s x s score matrix is not traffic: a fused kernel keeps it
    assert f.bytes_unfused == f.bytes_min


def test_attention_between_projections_and_inside_multihead_attention(tmp_path):
    f = features(tmp_path, "q, k, v = self.qkv(x).view(2, 64, 3, 4, 8).permute(2, 0, 3, 1, 4)\n"
                           "y = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
                           "return self.out(y.transpose(1, 2).reshape(2, 64, 32))",
                 "torch.randn(2, 64, 32)",
                 init="self.qkv = nn.Linear(32, 96)\nself.out = nn.Linear(32, 32)")
    assert f.op_histogram["attention"] == 1 and f.op_histogram["matmul"] == 2
    assert "softmax" not in f.op_histogram and set(f.tags) == {"matmul", "attention", "copy"} - {
        "copy"}
    # nn.MultiheadAttention calls sdpa inside another torch function: seen through its
    # decomposition's softmax, which only attention dispatches
    f = features(tmp_path, "return self.mha(x, x, x, need_weights=False)[0]",
                 "torch.randn(2, 16, 32)",
                 init="self.mha = nn.MultiheadAttention(32, 4, batch_first=True)")
    assert f.op_histogram["attention"] == 1 and "softmax" not in f.op_histogram
    # with the weights asked for it is a softmax between GEMMs, on a GPU too
    f = features(tmp_path, "return self.mha(x, x, x, need_weights=True)[0]",
                 "torch.randn(2, 16, 32)",
                 init="self.mha = nn.MultiheadAttention(32, 4, batch_first=True)")
    assert "attention" not in f.op_histogram and f.op_histogram["softmax"] == 1


def test_a_hand_written_attention_stays_matmul_and_softmax(tmp_path):
    f = features(tmp_path, "return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v",
                 "torch.randn(2, 8, 16), torch.randn(2, 8, 16), torch.randn(2, 8, 16)",
                 args="q, k, v")
    assert f.op_histogram == {"matmul": 2, "softmax": 1}


# -- losses -------------------------------------------------------------------------------

PAIR = "torch.randn(64, 32), torch.randn(64, 32)"
PROBABILITIES = "torch.rand(64, 32), torch.rand(64, 32)"
LABELS = "torch.randn(64, 32), torch.randint(0, 32, (64,))"
SIGNS = "torch.randn(64), torch.randn(64), torch.randn(64).sign()"
TRIPLE = "torch.randn(64, 32), torch.randn(64, 32), torch.randn(64, 32).sign()"


@pytest.mark.parametrize("call, inputs", [
    ("F.mse_loss(x, y)", PAIR),
    ("F.l1_loss(x, y)", PAIR),
    ("F.smooth_l1_loss(x, y)", PAIR),
    ("F.huber_loss(x, y)", PAIR),
    ("F.kl_div(x, y, reduction='batchmean')", PAIR),
    ("F.binary_cross_entropy(x, y)", PROBABILITIES),
    ("F.binary_cross_entropy_with_logits(x, y)", PAIR),
    ("F.soft_margin_loss(x, y)", PAIR),
    ("F.cross_entropy(x, y)", LABELS),
    ("F.nll_loss(x, y)", LABELS),
    ("F.multi_margin_loss(x, y)", LABELS),
    ("F.cosine_embedding_loss(x, y, z[:, 0])", TRIPLE),
    ("F.hinge_embedding_loss(x, z)", TRIPLE),
    ("F.triplet_margin_loss(x, y, z)", TRIPLE),
    ("nn.TripletMarginLoss(margin=1.0)(x, y, z)", TRIPLE),
    ("torch.kl_div(x, y)", PAIR),
])
def test_every_loss_function_is_a_loss(tmp_path, call, inputs):
    """Every operator the call dispatches is the loss's (the forward has no other)."""
    f = features(tmp_path, f"return {call}", inputs, args="x, y, z=None")
    assert f.tags == ("loss",), f.op_histogram
    assert set(f.op_histogram) == {"loss"} and f.n_ops >= 1


def test_a_loss_keeps_the_operators_around_it_and_its_pointwise_flops(tmp_path):
    # KernelBench's KLDivLoss: the log is the forward's, the rest the loss's
    f = features(tmp_path, "return F.kl_div(torch.log(x), y, reduction='batchmean')",
                 PROBABILITIES, args="x, y")
    assert f.tags == ("loss", "pointwise") and f.op_histogram["pointwise"] == 1
    assert f.op_histogram["loss"] >= 3
    f = features(tmp_path, "return F.margin_ranking_loss(x, y, z)", SIGNS, args="x, y, z")
    assert f.tags == ("loss",) and f.pointwise_flops > 0  # its arithmetic is still counted
    # a hand-written loss is the operators it is written with
    f = features(tmp_path, "return torch.mean((x - y) ** 2)", PAIR, args="x, y")
    assert f.op_histogram == {"pointwise": 2, "reduction": 1}


def test_the_suite_losses_are_losses():
    for name in ("cross_entropy_32768x4096", "triplet_margin_loss_65536x1024", "mse_loss_8192x8192",
                 "smooth_l1_loss_8192x8192"):
        assert static_features(load_problem(name)).tags == ("loss",), name
