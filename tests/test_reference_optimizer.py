"""The reference optimizer (``"reference"``): each rule of its table fires on the evidence its
row names and not without it, the rules combine as its docstring says, the priors, the
tolerance, applicability, the table itself, and the shipped dataset.

The profiles are synthetic: a few kernels with only the metrics and findings a rule reads
(kernel names as the H200's cuBLAS, cuDNN and ATen kernels spell them)."""

import dataclasses
import random
import re
from pathlib import Path

import pytest

from autoprofiler_env.features import static_features
from autoprofiler_env.optimizers import compose
from autoprofiler_env.optimizers import reference as ref
from autoprofiler_env.optimizers.reference import (
    DECISIONS,
    RULES,
    ReferenceOptimizer,
    proposals,
)
from autoprofiler_env.optimizers.transforms import TRANSFORMATIONS
from autoprofiler_env.problems import load_problem
from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS
from autoprofiler_env.profiler.records import Finding, KernelProfile, Profile, ProfileCost

DOCS = Path(__file__).parents[1] / "docs" / "optimizers.md"

# kernel names as recorded on the H200
GEMM = ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
        "aligna4_alignc4_execute_kernel_trt")
CONV_NCHW = ("sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize256x64x8_"
             "stage3_warpsize4x1x1_g1_ffma_aligna4_alignc4_execute_kernel_trt")
CONV_NHWC = ("sm80_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_"
             "stage4_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_trt")
ATTENTION = ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel"
             "<float, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)")
ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous "
               "namespace)::launch_clamp_scalar(at::TensorIteratorBase &, c10::Scalar, "
               "c10::Scalar, at::native::detail::ClampLimits)::[lambda() (instance 1)]"
               "::operator ()() const::[lambda() (instance 7)]::operator ()() const::"
               "[lambda(float) (instance 1)], std::array<char *, 2>>(int, T2, T3)")
SOFTMAX = ("void at::native::(anonymous namespace)::cunn_SoftMaxForwardReg<float, float, float, "
           "at::native::(anonymous namespace)::SoftMaxForwardEpilogue, long, 8>(T3 *, const T1 "
           "*, T5)")

SM = ref.SM_PCT
MEM = ref.MEM_PCT
DRAM = ref.DRAM_PCT
FMA = ref.FMA_PIPE
TENSOR = ref.TENSOR_PIPES[0]
RATE = ref.DRAM_BYTES_PER_S
INSTS = ref.INSTRUCTIONS

ALL = frozenset(TRANSFORMATIONS)
KERNELBENCH = ReferenceOptimizer(tolerance="kernelbench")  # fp32 1e-4: no TF32 / FP16
DEFAULT = ReferenceOptimizer()  # KernelBench v0.1's 1e-2: TF32 / FP16 allowed


def k(name: str, us: float = 100.0, findings=(), **m) -> KernelProfile:
    """A kernel of ``us`` microseconds with metrics by short name: sm, mem, dram, fma, tensor,
    rate, insts."""
    names = {"sm": SM, "mem": MEM, "dram": DRAM, "fma": FMA, "tensor": TENSOR, "rate": RATE,
             "insts": INSTS}
    return KernelProfile(0, name, "(256, 1, 1)", "(1024, 1, 1)", us * 1e3, 1,
                         {names[key]: float(v) for key, v in m.items()}, (), tuple(findings))


def opt_finding(section: str, rule: str, pct: float, kind: str = "OPT") -> Finding:
    return Finding(section, rule, kind, f"{rule}: est. speedup {pct}%", "global", pct)


def roofline(pct: float) -> Finding:
    """ncu's SOLFPRoofline finding as ncu 2025.3 words it."""
    return Finding("SpeedOfLight_RooflineChart", "SOLFPRoofline", "INF",
                   "The ratio of peak float (FP32) to double (FP64) performance on this device "
                   f"is 2:1. The workload achieved {pct:g}% of this device's FP32 peak "
                   "performance and 0% of its FP64 peak performance. See the Profiling Guide "
                   "(https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html#roofline) "
                   "for more details on roofline analysis.")


def profile(*kernels: KernelProfile, sections=("SpeedOfLight",)) -> Profile:
    ks = tuple(dataclasses.replace(kp, id=i) for i, kp in enumerate(kernels))
    return Profile("problem://test/synthetic", tuple(sections), ks,
                   ProfileCost(1.0, 1, len(ks), 0.001, len(ks)))


@pytest.fixture(scope="module")
def pointwise():
    """A memory-class program's features (no GEMM-class tag): the codegen prior is compile."""
    return static_features(load_problem("relu_16384x16384"))


@pytest.fixture(scope="module")
def gemm(pointwise):
    """A matrix product followed by pointwise work: the codegen prior is the code as it is."""
    return dataclasses.replace(pointwise, tags=("matmul", "pointwise"), flops=2 * 4096 ** 3,
                               op_histogram={"matmul": 1, "pointwise": 1}, n_ops=2)


@pytest.fixture(scope="module")
def conv(pointwise):
    return dataclasses.replace(pointwise, tags=("conv", "pointwise"), flops=10 ** 11,
                               op_histogram={"conv": 1, "pointwise": 1}, n_ops=2,
                               max_input_rank=4)


def fired(p: Profile, features, eager_ms=None, reduced=True) -> set[str]:
    return {x.rule for x in proposals(p, features, eager_ms, reduced)}


def choice(p: Profile | None, features, eager_ms=1.0, optimizer=DEFAULT,
           applicable=ALL) -> str:
    return optimizer.choose(None, p, features, applicable=applicable, eager_ms=eager_ms)[0]


# -- L1: launch ---------------------------------------------------------------------------------

def test_l1_launch_bound_from_the_eager_time_against_the_gpu_time(gemm):
    # eight kernels of 87.5 us: 0.70 ms of GPU time
    p = profile(*[k(GEMM, 87.5) for _ in range(8)])
    assert "L1" in fired(p, gemm, eager_ms=1.005)  # host time 30.3%
    assert choice(p, gemm, eager_ms=1.005) == "cuda_graph"
    assert "L1" not in fired(p, gemm, eager_ms=0.99)  # 29.3%
    assert choice(p, gemm, eager_ms=0.99) == "identity"
    assert "L1" not in fired(p, gemm, eager_ms=None)  # no eager time: nothing to compare
    one = profile(k(GEMM, 100.0))  # one kernel: nothing to capture
    assert "L1" not in fired(one, gemm, eager_ms=10.0)


def test_l1_reads_only_a_whole_forwards_profile(gemm):
    """A profile of the forward's first operators, or one that ncu's launch cap cut, holds an
    unknown part of its GPU time: the launch rule stays silent (KernelBench's
    level3/31_VisionAttention profiled 0.2 ms in its first 24 of 39 operators, 19 ms whole)."""
    p = profile(*[k(GEMM, 87.5) for _ in range(8)])
    whole = dataclasses.replace(p, ops=39, ops_profiled=39)
    assert "L1" in fired(whole, gemm, eager_ms=2.0)
    assert "L1" not in fired(dataclasses.replace(p, ops=39, ops_profiled=24), gemm,
                             eager_ms=2.0)
    assert "L1" not in fired(dataclasses.replace(whole, kernels_capped=True), gemm,
                             eager_ms=2.0)


# -- P1-P6: precision ----------------------------------------------------------------------------

def test_p1_fma_busy_and_tensor_pipes_idle(gemm):
    p = profile(k(GEMM, fma=50, tensor=0))
    assert fired(p, gemm) == {"P1"} and choice(p, gemm) == "tf32"
    assert fired(profile(k(GEMM, fma=35, tensor=0)), gemm) == set()
    assert fired(profile(k(GEMM, fma=50, tensor=5)), gemm) == set()  # already on tensor cores
    # the FMA pipe of a memory-class kernel is no GEMM's
    assert "P1" not in fired(profile(k(ELEMENTWISE, fma=50, tensor=0)), gemm)


def test_p2_reads_the_solfproofline_findings_share_of_the_fp32_peak(gemm):
    p = profile(k(GEMM, findings=[roofline(35)]), sections=("SpeedOfLight_RooflineChart",))
    assert fired(p, gemm) == {"P2"} and choice(p, gemm) == "tf32"
    low = profile(k(GEMM, findings=[roofline(25)]), sections=("SpeedOfLight_RooflineChart",))
    assert fired(low, gemm) == set()
    other = profile(k(GEMM, findings=[dataclasses.replace(
        roofline(35), message="The workload achieved 35% of its FP64 peak performance.")]))
    assert fired(other, gemm) == set()  # only the FP32 peak counts
    # on a memory-class kernel it is no GEMM's
    assert "P2" not in fired(profile(k(ELEMENTWISE, 700, findings=[roofline(35)]),
                                     k(GEMM, 300)), gemm)
    # ncu words a low share "close to 1%": it counts in the average (40% and ~1%: ~20%)
    close = dataclasses.replace(roofline(1), message=roofline(1).message.replace(
        "achieved 1%", "achieved close to 1%"))
    assert "P2" not in fired(profile(k(GEMM, findings=[roofline(40)]), k(GEMM, findings=[close]),
                                     sections=("SpeedOfLight_RooflineChart",)), gemm)


def test_p3_warp_instructions_against_the_gemm_flops(gemm):
    per_flop = gemm.flops / 64  # one FFMA warp instruction per 64 FLOPs
    assert fired(profile(k(GEMM, insts=0.6 * per_flop)), gemm) == {"P3"}
    assert choice(profile(k(GEMM, insts=0.6 * per_flop)), gemm) == "tf32"
    assert fired(profile(k(GEMM, insts=0.4 * per_flop)), gemm) == set()
    # every GEMM kernel must have its count
    assert fired(profile(k(GEMM, insts=per_flop), k(GEMM)), gemm) == set()
    assert fired(profile(k(GEMM, insts=per_flop)), dataclasses.replace(gemm, flops=0)) == set()


def test_p4_compute_bound_gemm_gets_tf32(gemm):
    assert fired(profile(k(GEMM, sm=70, mem=40)), gemm) == {"P4"}
    assert choice(profile(k(GEMM, sm=70, mem=40)), gemm) == "tf32"
    assert fired(profile(k(GEMM, sm=55, mem=40)), gemm) == set()
    # the same throughput on a memory-class kernel says nothing about precision
    assert not fired(profile(k(ELEMENTWISE, sm=70, mem=40)), gemm) & {"P4", "P5"}


def test_p5_memory_bound_gemm_gets_fp16(gemm):
    p = profile(k(GEMM, sm=50, mem=75))
    assert fired(p, gemm) == {"P5"} and choice(p, gemm) == "autocast_fp16"
    assert fired(profile(k(GEMM, sm=50, mem=58)), gemm) == set()  # below 60%
    # compute-bound and memory-bound: P4 and P5 both bear on the one precision decision;
    # 16-bit operands win
    both, fallback = proposals(profile(k(GEMM, sm=70, mem=80)), gemm, 1.0)
    assert (both.rule, both.transformation) == ("P5", "autocast_fp16")
    assert "compute-bound" in both.reason and "memory-bound" in both.reason
    assert (fallback.rule, fallback.transformation) == ("P4", "tf32")  # where fp16 cannot
    assert both.gain > fallback.gain
    assert choice(profile(k(GEMM, sm=70, mem=80)), gemm,
                  applicable=ALL - {"autocast_fp16"}) == "tf32"
    assert choice(profile(k(GEMM, sm=70, mem=80)), gemm) == "autocast_fp16"
    assert fired(profile(k(GEMM, sm=70, mem=65)), gemm) == {"P4"}  # memory below SM


def test_p6_attention_kernels_get_fp16(gemm):
    p = profile(k(ATTENTION))
    assert fired(p, gemm) == {"P6"} and choice(p, gemm) == "autocast_fp16"
    assert fired(profile(k(GEMM)), gemm) == set()
    # the tensor-core evidence of P4 with attention kernels: fp16 rather than tf32
    assert choice(profile(k(ATTENTION, sm=70, mem=40)), gemm) == "autocast_fp16"


# -- C0-C5: code generation ---------------------------------------------------------------------

def test_c0_at_the_dram_roofline_leaves_the_code_alone(pointwise):
    p = profile(k(ELEMENTWISE, 900, dram=85), k(ELEMENTWISE, 100, dram=50))
    assert fired(p, pointwise) == {"C0"}
    # C0 overrides the compile prior, and C1 (10% of the time below the roofline is too
    # little for C1 anyway: C0 at >= 90% and C1 at >= 30% cannot both hold)
    assert choice(p, pointwise) == "identity"
    assert choice(None, pointwise) == "compile"
    # a small GEMM kernel beside them does not keep C0 from the rest
    assert "C0" in fired(profile(k(ELEMENTWISE, 950, dram=85), k(GEMM, 50)), pointwise)
    below = profile(k(ELEMENTWISE, 850, dram=85), k(ELEMENTWISE, 150, dram=50))  # 85% at roof
    assert "C0" not in fired(below, pointwise)
    assert choice(below, pointwise) == "compile"  # the prior


def test_c0_is_overridden_by_c2_but_not_by_c5(pointwise):
    ideal = pointwise.bytes_min
    # 1 ms at a rate that moves 2x the ideal bytes
    fused = profile(k(ELEMENTWISE, 1000, dram=85, rate=2 * ideal / 1e-3))
    assert "C2" in fired(fused, pointwise)
    name, reason, _ = DEFAULT.choose(None, fused, pointwise, applicable=ALL, eager_ms=1.0)
    assert name == "compile" and reason.startswith("C2:")
    stall = [opt_finding("WarpStateStats", "CPIStall", 80.0)]
    assert "C5" in fired(profile(k(ELEMENTWISE, 1000, findings=stall)), pointwise)
    stalled = profile(k(ELEMENTWISE, 1000, dram=85, findings=stall))
    assert fired(stalled, pointwise) == {"C0"}  # C5 dropped at the roofline
    name, reason, _ = DEFAULT.choose(None, stalled, pointwise, applicable=ALL, eager_ms=1.0)
    assert name == "identity" and "C0:" in reason


def test_c1_memory_class_kernels_below_the_dram_roofline(gemm):
    # a GEMM-class program (its prior leaves the code alone): compile comes from C1 only
    p = profile(k(GEMM, 500), k(ELEMENTWISE, 500, dram=40))
    assert fired(p, gemm) == {"C1"} and choice(p, gemm) == "compile"
    small = profile(k(GEMM, 750), k(ELEMENTWISE, 250, dram=40))  # 25% of the time
    assert fired(small, gemm) == set() and choice(small, gemm) == "identity"
    at_roof = profile(k(GEMM, 500), k(ELEMENTWISE, 500, dram=85))
    assert fired(at_roof, gemm) == set()
    # GEMM kernels far from the DRAM roofline are no case for C1
    assert fired(profile(k(GEMM, 1000, dram=20)), gemm) == set()


def test_c2_bytes_moved_against_the_ideal_bytes(gemm):
    ideal = gemm.bytes_min
    rate = 1.6 * ideal / 1e-3  # over the program's 1 ms: 1.6x the ideal bytes
    p = profile(k(GEMM, 500, rate=rate), k(ELEMENTWISE, 500, rate=rate))
    assert fired(p, gemm) == {"C2"} and choice(p, gemm) == "compile"
    few = 1.4 * ideal / 1e-3
    assert fired(profile(k(GEMM, 500, rate=few), k(ELEMENTWISE, 500, rate=few)), gemm) == set()
    # every kernel must have its rate
    assert fired(profile(k(GEMM, 500), k(ELEMENTWISE, 500, rate=2 * rate)), gemm) == set()
    # memory-class kernels under 10% of the time: nothing to fuse
    assert fired(profile(k(GEMM, 950, rate=rate), k(ELEMENTWISE, 50, rate=rate)), gemm) == set()


def test_c3_softmax_kernels_get_triton_softmax_and_win_the_tie_with_c1(pointwise):
    p = profile(k(SOFTMAX, dram=40))
    found = proposals(p, pointwise, 1.0)
    assert {x.rule for x in found} == {"C1", "C3"}
    assert len({x.gain for x in found}) == 1  # a tie
    assert choice(p, pointwise) == "triton_softmax"
    assert fired(profile(k(SOFTMAX, dram=85)), pointwise) == {"C0"}
    # softmax under 30% of the time: C1 for the rest
    mixed = profile(k(SOFTMAX, 200, dram=40), k(ELEMENTWISE, 800, dram=40))
    assert fired(mixed, pointwise) == {"C1"} and choice(mixed, pointwise) == "compile"


def test_c4_occupancy_findings_on_gemm_kernels(gemm):
    occupancy = [opt_finding("Occupancy", "TheoreticalOccupancy", 40.0)]
    p = profile(k(GEMM, findings=occupancy, sm=40, mem=30))
    assert fired(p, gemm) == {"C4"} and choice(p, gemm) == "max_autotune"
    launch = [opt_finding("LaunchStats", "LaunchConfiguration", 40.0)]
    assert fired(profile(k(GEMM, findings=launch)), gemm) == {"C4"}
    # not on memory-class kernels, and not without an estimate
    assert "C4" not in fired(profile(k(GEMM, 100), k(ELEMENTWISE, 900, findings=occupancy)),
                             gemm)
    assert fired(profile(k(GEMM, findings=[opt_finding("WarpStateStats", "CPIStall", 40.0)])),
                 gemm) == set()


def test_c4_not_where_speedoflight_shows_the_gemm_compute_bound(gemm):
    occupancy = [opt_finding("Occupancy", "TheoreticalOccupancy", 80.0)]
    bound = profile(k(GEMM, findings=occupancy, sm=70, mem=30))
    assert "C4" not in fired(bound, gemm, reduced=False)
    assert choice(bound, gemm, optimizer=KERNELBENCH) == "identity"
    assert choice(bound, gemm) == "tf32"  # P4


def test_c4_dropped_where_a_precision_rule_chose_tensor_cores(gemm):
    occupancy = [opt_finding("Occupancy", "TheoreticalOccupancy", 80.0)]
    p = profile(k(GEMM, findings=occupancy, fma=50, tensor=0))  # P1 and C4
    assert fired(p, gemm) == {"P1", "C4"}
    assert choice(p, gemm) == "tf32"
    # without the precision decision (the tolerance refuses it) C4 stands
    assert choice(p, gemm, optimizer=KERNELBENCH) == "max_autotune"
    # and where tf32 does not apply either
    assert choice(p, gemm, applicable=ALL - {"tf32"}) == "max_autotune"
    # dropped, C4 gives way to the next code generation rule
    with_c1 = profile(k(GEMM, 500, findings=occupancy, fma=50, tensor=0),
                      k(ELEMENTWISE, 500, dram=40))
    assert fired(with_c1, gemm) == {"P1", "C1", "C4"}
    assert choice(with_c1, gemm) == "compile+tf32"


def test_c5_cpistall_findings_on_memory_class_kernels(gemm):
    stall = [opt_finding("WarpStateStats", "CPIStall", 80.0)]
    p = profile(k(GEMM, 500), k(ELEMENTWISE, 500, findings=stall),
                sections=("WarpStateStats",))
    assert fired(p, gemm) == {"C5"} and choice(p, gemm) == "compile"
    assert fired(profile(k(GEMM, findings=stall)), gemm) == set()  # on a GEMM kernel
    # compile expects to save under 10% of the time: not worth its overheads; the prior
    # decides (for a GEMM program, the code as it is), and the reason says why
    small = [opt_finding("WarpStateStats", "CPIStall", 2.0)]
    low = profile(k(GEMM, 500), k(ELEMENTWISE, 500, findings=small))
    [leave] = proposals(low, gemm, 1.0)
    assert (leave.rule, leave.transformation) == ("C5", "") and "below 10%" in leave.reason
    assert choice(low, gemm) == "identity"
    info = [opt_finding("WarpStateStats", "CPIStall", 80.0, kind="INF")]
    assert fired(profile(k(GEMM, 500), k(ELEMENTWISE, 500, findings=info)), gemm) == set()


# -- M1: memory format --------------------------------------------------------------------------

def test_m1_channels_last_only_with_tf32_or_fp16(conv):
    uncoalesced = [opt_finding("SourceCounters", "UncoalescedGlobalAccess", 20.0)]
    p = profile(k(CONV_NCHW, findings=uncoalesced, sm=70, mem=40))
    assert fired(p, conv) == {"P4", "M1"}
    assert choice(p, conv) == "tf32+channels_last"
    fp16 = profile(k(CONV_NCHW, findings=uncoalesced, sm=50, mem=75))
    assert choice(fp16, conv) == "autocast_fp16+channels_last"
    # without a tensor-core precision: NCHW stays
    assert choice(p, conv, optimizer=KERNELBENCH) == "identity"
    assert choice(p, conv, applicable=ALL - {"tf32"}) == "identity"
    cache = [opt_finding("MemoryWorkloadAnalysis_Tables", "MemoryCacheAccessPattern", 20.0)]
    assert "M1" in fired(profile(k(CONV_NCHW, findings=cache)), conv)
    # not without the finding, nor on an NHWC convolution
    assert choice(profile(k(CONV_NCHW, sm=70, mem=40)), conv) == "tf32"
    assert "M1" not in fired(profile(k(CONV_NHWC, findings=uncoalesced)), conv)


# -- the priors, the tolerance, composition, applicability ---------------------------------------

def test_priors_without_a_profile(pointwise, gemm):
    assert choice(None, pointwise, eager_ms=1.0) == "compile"
    assert choice(None, pointwise, eager_ms=0.02) == "compile"  # 20 us: long enough
    assert choice(None, pointwise, eager_ms=None) == "compile"  # no eager time known
    assert choice(None, pointwise, eager_ms=0.019) == "identity"  # under 20 us
    assert choice(None, gemm, eager_ms=1.0) == "identity"  # a GEMM problem
    for tag in ("matmul", "conv", "conv_transpose", "attention", "rnn"):
        assert choice(None, dataclasses.replace(pointwise, tags=(tag,))) == "identity", tag
    name, reason, evidence = DEFAULT.choose(None, None, gemm, applicable=ALL, eager_ms=1.0)
    assert "no profile" in reason and evidence == {}
    # a profile that bears on no decision: the same priors
    blank = profile(k(ELEMENTWISE))
    assert choice(blank, pointwise) == "compile" and choice(blank, gemm) == "identity"
    assert choice(blank, pointwise, eager_ms=0.01) == "identity"
    # an empty profile proposes nothing
    assert proposals(profile(sections=()), pointwise, 1.0) == []


def test_the_tolerance_decides_whether_precision_is_lowered(gemm, conv):
    evidence = [profile(k(GEMM, sm=70, mem=40)), profile(k(GEMM, sm=50, mem=75)),
                profile(k(ATTENTION)), profile(k(GEMM, fma=50, tensor=0)),
                profile(k(GEMM, findings=[roofline(50)])),
                profile(k(GEMM, insts=gemm.flops / 64)),
                profile(k(CONV_NCHW, sm=70, mem=40, findings=[
                    opt_finding("SourceCounters", "UncoalescedGlobalAccess", 20.0)]))]
    for p in evidence:
        default = choice(p, conv if p.kernels[0].name == CONV_NCHW else gemm)
        assert compose.parts(default)[0] in ("tf32", "autocast_fp16"), default
        strict = choice(p, gemm, optimizer=KERNELBENCH)
        assert not {"tf32", "autocast_fp16", "autocast_bf16"} & set(compose.parts(strict))
        assert not any(x.decision == "precision"
                       for x in proposals(p, gemm, 1.0, reduced_precision=False))
    assert DEFAULT.reduced and ReferenceOptimizer(tolerance="kernelbench-v0.1").reduced
    assert ReferenceOptimizer(tolerance=1e-3).reduced
    assert not ReferenceOptimizer(tolerance=5e-4).reduced and not KERNELBENCH.reduced


def test_a_triton_kernel_with_fp16_becomes_compile_with_fp16(gemm):
    p = profile(k(ATTENTION, 500), k(SOFTMAX, 500, dram=40))  # P6 and C3
    assert {"P6", "C3"} <= fired(p, gemm)
    name, reason, _ = DEFAULT.choose(None, p, gemm, applicable=ALL, eager_ms=1.0)
    assert name == "compile+autocast_fp16" and "Triton" in reason
    assert choice(p, gemm, applicable=ALL - {"compile"}) == "autocast_fp16"
    # with tf32 the Triton kernel stays
    tf32 = profile(k(GEMM, 500, sm=70, mem=40), k(SOFTMAX, 500, dram=40))
    assert choice(tf32, gemm) == "triton_softmax+tf32"


def test_a_part_that_does_not_apply_is_never_chosen(conv):
    uncoalesced = [opt_finding("SourceCounters", "UncoalescedGlobalAccess", 20.0)]
    # evidence for every decision: L1, P4, C3 / C1, M1
    p = profile(*[k(CONV_NCHW, 40, findings=uncoalesced, sm=70, mem=40) for _ in range(5)],
                *[k(SOFTMAX, 40, dram=40) for _ in range(5)])
    everything = choice(p, conv, eager_ms=1.0)
    assert everything == "triton_softmax+tf32+channels_last+cuda_graph"
    for part in compose.parts(everything):
        without = choice(p, conv, eager_ms=1.0, applicable=ALL - {part})
        assert part not in compose.parts(without), (part, without)
    assert choice(p, conv, applicable=ALL - {"triton_softmax"}).startswith("compile+")  # C1
    assert choice(p, conv, applicable=frozenset()) == "identity"
    for n in range(len(ALL)):
        subset = frozenset(sorted(ALL)[n:n + 4])
        name = choice(p, conv, applicable=subset)
        assert name == "identity" or set(compose.parts(name)) <= subset, (subset, name)


def test_applicability_from_the_problem_and_the_device():
    """Without ``applicable``, each part's rule is checked on the problem (and cuda_graph
    needs a GPU)."""
    mlp = load_problem("mlp_tiny_8layer_64x256")
    launch_bound = profile(*[k(GEMM, 5, sm=70, mem=40) for _ in range(8)],
                           *[k(ELEMENTWISE, 5, dram=20) for _ in range(8)])
    assert fired(launch_bound, static_features(mlp), 0.2) == {"L1", "P4", "C1"}
    assert ReferenceOptimizer().choose(mlp, launch_bound, eager_ms=0.2)[0] == \
        "compile+tf32+cuda_graph"
    # tf32 and cuda_graph need a GPU; compile does not
    assert ReferenceOptimizer(device="cpu").choose(mlp, launch_bound, eager_ms=0.2)[0] == \
        "compile"
    matmul = load_problem("matmul_4096x4096x4096")  # one operator: compile does not apply
    memory = profile(k(GEMM, 500), k(ELEMENTWISE, 500, dram=40))
    assert "C1" in fired(memory, static_features(matmul), 1.0)
    assert ReferenceOptimizer().choose(matmul, memory, eager_ms=1.0)[0] == "identity"
    candidate = ReferenceOptimizer().optimize(mlp, launch_bound, eager_ms=0.2)
    assert candidate.producer == "compile+tf32+cuda_graph"
    assert all(f"# layer {i}: {part}" in candidate.source
               for i, part in enumerate(("compile", "tf32", "cuda_graph")))


# -- the table -----------------------------------------------------------------------------------

def _table_rows(text: str) -> list[list[str]]:
    """The body rows of the first markdown table in ``text``, cells stripped."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| rule |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def _docs_rules_section() -> str:
    text = DOCS.read_text()
    headings = [m for m in re.finditer(r"^#+ .*$", text, re.M)]
    for i, m in enumerate(headings):
        if "rules" in m.group(0).lower():
            end = headings[i + 1].start() if i + 1 < len(headings) else len(text)
            return text[m.end():end]
    raise AssertionError(f"{DOCS} has no heading about the rules")


def test_every_rule_is_in_the_docstrings_table_and_the_docs_once():
    ids = [r.id for r in RULES]
    assert len(set(ids)) == len(ids)
    for where, text in (("the module docstring", ref.__doc__), (DOCS.name,
                                                                 _docs_rules_section())):
        rows = _table_rows(text)
        column = [row[0] for row in rows]
        for rule in RULES:
            assert column.count(rule.id) == 1, (where, rule.id)
        assert sorted(column) == sorted(ids), where
        decisions = {row[0]: row[1] for row in rows}
        assert all(decisions[r.id] == r.decision for r in RULES), where


def test_the_docs_table_is_the_docstrings():
    """docs/optimizers.md says the two tables are the same."""
    assert _table_rows(_docs_rules_section()) == _table_rows(ref.__doc__)


def test_every_rule_names_action_sections_and_a_decision():
    for rule in RULES:
        assert set(rule.sections) <= set(ACTION_SECTIONS), rule
        assert rule.decision in DECISIONS, rule
    assert {r.decision for r in RULES} == set(DECISIONS)


# -- the shipped dataset ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dataset():
    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.dataset.replay import DEFAULT_DATASET

    return Dataset.load(DEFAULT_DATASET)


def test_rules_read_only_the_sections_they_name(dataset):
    """On the shipped dataset, every metric and finding a rule reads comes only from the
    sections its row names (L1 and P6 read the kernel list, which every section has)."""
    reads = {"P1": {ref.FMA_PIPE, *ref.TENSOR_PIPES}, "P2": {"SOLFPRoofline"},
             "P3": {ref.INSTRUCTIONS}, "P4": {ref.SM_PCT}, "P5": {ref.SM_PCT, ref.MEM_PCT},
             "C0": {ref.DRAM_PCT}, "C1": {ref.DRAM_PCT}, "C3": {ref.DRAM_PCT},
             "C2": {ref.DRAM_BYTES_PER_S},
             "C4": {"TheoreticalOccupancy", "AchievedOccupancy", "LaunchConfiguration"},
             "C5": {"CPIStall"}, "M1": {"UncoalescedGlobalAccess", "MemoryCacheAccessPattern"}}
    carried: dict[str, set[str]] = {}
    for uri in dataset.uris():
        for section, p in dataset.record(uri).profiles.items():
            for kp in p.kernels:
                for name in [*kp.metrics, *(f.rule for f in kp.findings)]:
                    carried.setdefault(name, set()).add(section)
    for rule in RULES:
        if not rule.sections:
            assert rule.id not in reads
            continue
        sources = set().union(*(carried.get(name, set()) for name in reads[rule.id]))
        assert sources and sources <= set(rule.sections), (rule.id, sorted(sources))


def test_on_the_shipped_dataset_choices_compose_apply_and_need_only_the_kept_evidence(dataset):
    """Every section's evidence, each section alone and a few random sets, under both
    tolerances: the choice is a valid composition of applicable parts, and the same from the
    profile the replay merges (only ``evidence_metrics``; findings of ``evidence_findings``
    only, as the recording plan assumes)."""
    rng = random.Random(0)
    keep = frozenset(ReferenceOptimizer.evidence_metrics)
    findings = ReferenceOptimizer.evidence_findings
    chosen: set[str] = set()
    for optimizer in (DEFAULT, KERNELBENCH):
        for uri in dataset.uris():
            record = dataset.record(uri)
            applicable = frozenset(record.transformations)
            eager_ms = record.eager["median_ms"]
            drawn = [tuple(rng.sample(dataset.sections, rng.randint(2, 6))) for _ in range(4)]
            for sections in [dataset.sections, *((s,) for s in dataset.sections), *drawn]:
                whole = dataset.profile(uri, sections)
                kept = dataset.profile(uri, sections, keep)
                assert all(set(kp.metrics) <= keep for kp in kept.kernels)
                stripped = dataclasses.replace(kept, kernels=tuple(
                    dataclasses.replace(kp, findings=tuple(
                        f for f in kp.findings if f.rule in findings)) for kp in kept.kernels))
                name, reason, evidence = optimizer.choose(None, whole, record.features,
                                                          applicable=applicable,
                                                          eager_ms=eager_ms)
                assert (name, reason, evidence) == optimizer.choose(
                    None, kept, record.features, applicable=applicable, eager_ms=eager_ms), \
                    (uri, sections)
                assert name == optimizer.choose(None, stripped, record.features,
                                                applicable=applicable,
                                                eager_ms=eager_ms)[0], (uri, sections)
                chosen.add(name)
                if name != "identity":
                    parts = compose.parts(name)
                    assert compose.composed_name(parts) == name, (uri, name)
                    assert set(parts) <= applicable, (uri, name, applicable)
                    if optimizer is KERNELBENCH:
                        assert not {"tf32", "autocast_fp16"} & set(parts), (uri, name)
    # the rules do fire on the recorded evidence: several decisions are composed
    assert len(chosen) >= 8 and any("+" in n for n in chosen), chosen
