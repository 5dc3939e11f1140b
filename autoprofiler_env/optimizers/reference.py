"""The reference optimizer: a kernel engineer's decisions, each read from the evidence that
bears on it, composed into one candidate.

A person reading a profile decides several things at once (docs/optimizers.md): at which
precision the matrix math runs, how the code is generated, in which memory format the
convolutions work, and whether the launches are captured in a graph. Each decision here has
its own rules, each reading one section's metrics or ncu's findings (or the kernel list and
durations that every section carries), and its own prior for when nothing bears on it. The
chosen transformations are composed (:mod:`.compose`): ``"compile+tf32+cuda_graph"``.

It is a pure function of the problem's static features, its eager time (measured by the
harness, free), the tolerance regime and the collected evidence; so the replay runs it on
recorded evidence and gets the live choice. It follows ncu's guidance, so it can be misled as
a person can: an occupancy finding with a large estimated speedup points a matrix product at
autotuned templates, which rarely beat cuBLAS.

The rules (:data:`RULES`; "every section" means the kernel names and durations, which every
section's run reports):

| rule | decision | section | reads | proposes | the guidance it follows |
|---|---|---|---|---|---|
| L1 | launch | every section | host time (the eager time less the kernels' GPU time) >= 30% of the eager time, >= 2 kernels, on a whole forward's profile (not one of its first operators only, nor one cut by ncu's launch cap) | cuda_graph | CUDA Programming Guide, CUDA Graphs: one launch for a whole sequence of kernels removes the CPU's launch overhead |
| P1 | precision | ComputeWorkloadAnalysis | FMA pipe >= 40% active and tensor pipes < 1% on the GEMM / convolution kernels | tensor cores | ncu's HighPipeUtilization: the FMA pipe runs FP32 math; matrix math belongs on the tensor pipes |
| P2 | precision | SpeedOfLight_RooflineChart | SOLFPRoofline: the GEMM / convolution kernels at >= 30% of the FP32 peak | tensor cores | ncu's roofline: FP32 work near the FP32 roof is bounded by it; the TF32 and FP16 tensor-core roofs are far higher |
| P3 | precision | InstructionStats, SourceCounters | the GEMM kernels' warp instructions x 64 >= half the problem's GEMM FLOPs | tensor cores | ncu's instruction counts: one FFMA (2 FLOPs) per thread per instruction is matrix math on the FP32 pipe; a tensor-core MMA does hundreds of FLOPs per instruction |
| P4 | precision | SpeedOfLight | the GEMM / convolution kernels compute-bound (SM throughput >= 60%) | tensor cores | ncu's SOLBottleneck: compute is the bottleneck; Compute Workload Analysis says which pipe |
| P5 | precision | SpeedOfLight | the GEMM / convolution kernels memory-bound (memory throughput >= SM throughput and >= 60%) | fp16 rather than tf32 | ncu's SOLBottleneck: memory is the bottleneck; 16-bit operands halve the bytes |
| P6 | precision | every section | attention kernels (fmha / flash) | fp16 rather than tf32 | PyTorch's scaled_dot_product_attention: its flash kernels run in 16-bit only |
| C0 | codegen | SpeedOfLight, MemoryWorkloadAnalysis_Tables | memory-class kernels (not GEMM / convolution) holding >= 90% of the time at >= 80% of the DRAM bandwidth | leave the code alone | ncu's SOLBottleneck: above 80% of peak a unit is the bottleneck; work must be removed, not reorganised |
| C3 | codegen | SpeedOfLight, MemoryWorkloadAnalysis_Tables | softmax kernels below 80% of the DRAM bandwidth, >= 30% of the time | triton_softmax | as C1; a one-pass row softmax reads each row once |
| C1 | codegen | SpeedOfLight, MemoryWorkloadAnalysis_Tables | memory-class kernels below 80% of the DRAM bandwidth, >= 30% of the time | compile | ncu's SOLBottleneck: a memory-bound operation below its roofline is latency-bound; Inductor regenerates and fuses it |
| C2 | codegen | MemoryWorkloadAnalysis, its chart, the two roofline charts | DRAM bytes moved >= 1.5x the problem's ideal bytes (inputs, weights, outputs once), memory-class kernels >= 10% of the time | compile | ncu's memory workload analysis: traffic above the ideal is intermediates written and read back; fusion keeps them on chip |
| C4 | codegen | Occupancy, LaunchStats | occupancy and launch-configuration findings on the GEMM / convolution kernels, by ncu's estimated speedup | max_autotune | ncu's TheoreticalOccupancy / LaunchConfiguration: change the block size, registers or tiling; autotuning tries other tiles |
| C5 | codegen | WarpStateStats | CPIStall (warps stalled) findings on the memory-class kernels, by ncu's estimated speedup | compile | ncu's CPIStall: long-scoreboard stalls wait on memory; fewer round trips (fusion) remove them |
| M1 | memory | SourceCounters, MemoryWorkloadAnalysis_Tables | UncoalescedGlobalAccess or MemoryCacheAccessPattern on NCHW 2-D convolution kernels (ncu's weighted estimate >= 1%), with TF32 or FP16 chosen | channels_last | ncu's uncoalesced-access guidance; cuDNN's tensor-core convolutions are NHWC-native and transpose NCHW tensors around each call |

How the rules combine, like a person weighing them:

- Within a decision the proposal with the largest expected gain wins (ties: the rule listed
  first). C0, the verdict that the kernels already run at the DRAM roofline, overrides the
  other code generation rules except C2: bytes moved beyond the ideal can be removed even at
  the roofline.
- The precision rules (P1-P6) read only programs whose GEMM / convolution kernels hold at
  least 20% of the GPU time. P5 or P6 choose FP16 over TF32; where FP16 does not apply, TF32
  (if P1-P4 fired).
- compile (C1, C2, C5) is proposed only where it expects to save at least 10% of the time
  (below that, the prior decides, and the reason says so; ncu's estimates move with the
  sections collected together, so a smaller one does not overrule the prior):
  it regenerates only the memory-class kernels (its expected gain is bounded by their share),
  and a compiled program brings overheads of its own (guards, its own dispatch of the GEMMs);
  on the 40 problems where GEMMs or convolutions hold at least half of the time the first
  recording measured compile at 0.24-1.83x, below 1.15x on 32 of them.
- C4 is not taken where SpeedOfLight shows the GEMM kernels compute-bound, nor where the
  precision decision moves them to tensor cores: its finding was about the FP32 kernel that
  tensor cores replace.
- M1 is taken only with TF32 or FP16: NHWC alone made every convolution slower in the first
  recording (0.24-0.99x on 21 problems).

A decision nothing bears on takes its prior: fp32; no graph; NCHW; for code generation
``compile`` where the program has no GEMM-class operator and runs for at least 20 us, else the
code as it is (a GEMM program is left alone blind: whether lower precision or regenerated code
pays depends on where its time goes, which only a profile shows; and TF32 on a bare matrix
product fails the 1e-2 tolerance more often than not). Precision is lowered only where the
episode's tolerance admits it (fp32 atol >= 1e-3: TF32 and FP16 keep 10 mantissa bits, a
relative rounding of about 5e-4 per operand). ``autocast_bf16`` and ``cudnn_benchmark`` are
never chosen: bf16 keeps 7 mantissa bits (in the first recording fp16 passed 1e-2 on 25
problems where bf16 failed, never the reverse), and cuDNN's heuristics already pick the fastest
algorithm (``cudnn_benchmark`` measured 0.94-1.01x on all 26 problems it applies to). A Triton
kernel is not composed with autocast: the decision keeps the precision and generates code with
``compile``.
"""  # noqa: E501 (a markdown table's rows are one line each)

from __future__ import annotations

import re
from dataclasses import dataclass, field

from autoprofiler_env.features import StaticFeatures, static_features
from autoprofiler_env.optimizers import reference_v1
from autoprofiler_env.optimizers.candidate import Candidate
from autoprofiler_env.optimizers.compose import KINDS, compose, composed_name
from autoprofiler_env.optimizers.transforms import TRANSFORMATIONS, identity_source
from autoprofiler_env.problems.problem import Problem
from autoprofiler_env.profiler.metrics import FMA_PIPE, MEM_PCT, SM_PCT, TENSOR_PIPES, has_mark
from autoprofiler_env.profiler.records import KernelProfile, Profile

DRAM_PCT = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_BYTES_PER_S = "dram__bytes.sum.per_second"
INSTRUCTIONS = "smsp__inst_executed.sum"
OWN_METRICS = (SM_PCT, MEM_PCT, DRAM_PCT, FMA_PIPE, *TENSOR_PIPES, DRAM_BYTES_PER_S,
               INSTRUCTIONS)
"""The metrics this optimizer's rules read (besides kernel names, durations and findings)."""
EVIDENCE_METRICS = tuple(dict.fromkeys((*OWN_METRICS, *reference_v1.EVIDENCE_METRICS)))
"""The metrics the rules of this optimizer and of reference-v1 read: what a dataset keeps."""
EVIDENCE_FINDINGS = frozenset({"SOLFPRoofline", "TheoreticalOccupancy",
                               "AchievedOccupancy", "LaunchConfiguration", "CPIStall",
                               "UncoalescedGlobalAccess", "MemoryCacheAccessPattern"})
"""The ncu rules whose findings the rules read."""

ROOFLINE_PCT = 80.0      # ncu's SOLBottleneck: above 80% of peak a unit is the bottleneck
COMPUTE_BOUND_PCT = 60.0  # ncu's SOLBottleneck: below 60% of peak, latency rather than throughput
LAUNCH_BOUND = 0.3       # host time as a share of the eager time
MIN_EAGER_MS = 0.02      # below 20 us a rewrite's own overhead (a compiled call) exceeds any gain
FUSION_BYTES = 1.5       # DRAM bytes over the ideal bytes that show unfused intermediates
MIN_COMPILE_GAIN = 0.1   # the share of the time compile must expect to save
REDUCED_ATOL = 1e-3      # the loosest fp32 tolerance at which TF32 / FP16 are tried

_GEMM_MARKS = ("gemm", "gemv", "cutlass", "xmma", "implicit", "convolve", "conv_depthwise",
               "convolution", "wgrad", "dgrad", "fprop", "winograd", "fft", "splitkreduce",
               "fmha", "flash")
"""Kernel names of matrix products and convolutions (cuBLAS, cuDNN, CUTLASS, ATen's depthwise
convolution, attention); the other kernels are memory-class (pointwise, reductions, norms:
cuDNN's batch norm and RNN cells included)."""
_ATTENTION_MARKS = ("fmha", "flash", "attention", "sdpa")
_SOFTMAX_MARKS = ("softmax",)
_NCHW_CONV_MARKS = ("nchw", "nchwkcrs")
_GEMM_TAGS = frozenset({"matmul", "conv", "conv_transpose", "attention", "rnn"})
_FP32_PEAK = re.compile(r"achieved (?:close to )?(\d+(?:\.\d+)?)% of this device's FP32 peak")
_OCCUPANCY_RULES = frozenset({"TheoreticalOccupancy", "AchievedOccupancy",
                              "LaunchConfiguration"})
_LAYOUT_RULES = frozenset({"UncoalescedGlobalAccess", "MemoryCacheAccessPattern"})


@dataclass(frozen=True)
class Rule:
    """One row of the rules table."""

    id: str
    decision: str
    sections: tuple[str, ...]  # () means every section (kernel names and durations)
    reads: str
    proposes: str


RULES: tuple[Rule, ...] = (
    Rule("L1", "launch", (), "host time >= 30% of the eager time", "cuda_graph"),
    Rule("P1", "precision", ("ComputeWorkloadAnalysis",), "FMA busy, tensor pipes idle",
         "tensor cores"),
    Rule("P2", "precision", ("SpeedOfLight_RooflineChart",), "SOLFPRoofline >= 30% FP32 peak",
         "tensor cores"),
    Rule("P3", "precision", ("InstructionStats", "SourceCounters"),
         "instructions x 64 >= GEMM FLOPs / 2",
         "tensor cores"),
    Rule("P4", "precision", ("SpeedOfLight",), "GEMM kernels compute-bound", "tensor cores"),
    Rule("P5", "precision", ("SpeedOfLight",), "GEMM kernels memory-bound", "fp16 over tf32"),
    Rule("P6", "precision", (), "attention kernels", "fp16 over tf32"),
    Rule("C0", "codegen", ("SpeedOfLight", "MemoryWorkloadAnalysis_Tables"),
         "memory-class kernels at the DRAM roofline", "leave alone"),
    Rule("C3", "codegen", ("SpeedOfLight", "MemoryWorkloadAnalysis_Tables"),
         "softmax kernels below the DRAM roofline",
         "triton_softmax"),
    Rule("C1", "codegen", ("SpeedOfLight", "MemoryWorkloadAnalysis_Tables"),
         "memory-class kernels below the DRAM roofline",
         "compile"),
    Rule("C2", "codegen", ("MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Chart",
                           "SpeedOfLight_RooflineChart",
                           "SpeedOfLight_HierarchicalTensorRooflineChart"),
         "DRAM bytes >= 1.5x the ideal bytes", "compile"),
    Rule("C4", "codegen", ("Occupancy", "LaunchStats"), "occupancy findings on GEMM kernels",
         "max_autotune"),
    Rule("C5", "codegen", ("WarpStateStats",), "CPIStall findings on memory-class kernels",
         "compile"),
    Rule("M1", "memory", ("SourceCounters", "MemoryWorkloadAnalysis_Tables"),
         "uncoalesced access on NCHW convolutions", "channels_last"),
)
_ORDER = {r.id: i for i, r in enumerate(RULES)}
DECISIONS = ("codegen", "precision", "memory", "launch")
"""The decisions, in the order of the candidate's layers (:data:`.compose.KINDS` less
``conv_algo``, which no rule decides)."""
assert set(DECISIONS) <= set(KINDS)


@dataclass(frozen=True)
class Proposal:
    """What one rule proposes for its decision: a transformation (``""``: leave it as it is),
    the share of the program's time it expects to save, and why."""

    decision: str
    transformation: str
    gain: float
    rule: str
    reason: str
    evidence: dict = field(default_factory=dict)


def _weighted(kernels: list[tuple[KernelProfile, float]], metric: str) -> float | None:
    """The duration-weighted mean of ``metric`` over ``kernels`` that have it."""
    total = weight = 0.0
    for kernel, share in kernels:
        value = kernel.metrics.get(metric)
        if isinstance(value, float):
            total += share * value
            weight += share
    return total / weight if weight > 0 else None


def _fp32_peak(kernels: list[tuple[KernelProfile, float]]) -> float | None:
    """The duration-weighted share of the FP32 peak that ncu's SOLFPRoofline finding reports."""
    total = weight = 0.0
    for kernel, share in kernels:
        for f in kernel.findings:
            if f.rule == "SOLFPRoofline":
                m = _FP32_PEAK.search(f.message)
                if m:
                    total += share * float(m.group(1))
                    weight += share
                    break
    return total / weight if weight > 0 else None


def _finding_weight(kernels: list[tuple[KernelProfile, float]],
                    rules: frozenset[str]) -> tuple[float, str | None]:
    """Over ``kernels``: the time-weighted estimated speedup (%) of OPT findings of ``rules``
    (the largest rule per kernel), and the rule with the largest weighted estimate."""
    weighted, by_rule = 0.0, {}
    for kernel, share in kernels:
        best = None
        for f in kernel.findings:
            if f.kind == "OPT" and f.rule in rules and f.speedup_pct:
                if best is None or f.speedup_pct > best.speedup_pct:
                    best = f
        if best is not None:
            weighted += share * best.speedup_pct
            by_rule[best.rule] = by_rule.get(best.rule, 0.0) + share * best.speedup_pct
    top = max(by_rule, key=by_rule.get) if by_rule else None
    return weighted, top


def proposals(profile: Profile, features: StaticFeatures, eager_ms: float | None = None,
              reduced_precision: bool = True) -> list[Proposal]:
    """What the rules propose for this profile, before applicability, in :data:`RULES` order.

    ``eager_ms``: the eager program's time (the harness's median), for the launch rule;
    ``reduced_precision``: whether the tolerance admits TF32 / FP16.
    """
    if not profile.sections or not profile.kernels:
        return []
    out: list[Proposal] = []
    shares = profile.shares()
    kernels = list(zip(profile.kernels, shares))
    gemm = [(k, s) for k, s in kernels if has_mark(k.name, _GEMM_MARKS)]
    rest = [(k, s) for k, s in kernels if not has_mark(k.name, _GEMM_MARKS)]
    g = sum(s for _, s in gemm)
    m_share = 1.0 - g
    n = len(profile.kernels)
    gpu_ms = profile.duration_ns / 1e6

    # L1: launch-bound. Only on a whole forward's profile: one of its first operators
    # (``MAX_OPS``) or cut by ncu's launch cap holds an unknown part of its GPU time (scaled by
    # the operators' share, KernelBench's level3/31_VisionAttention read 0.3 ms of 19 ms).
    if eager_ms and n >= 2 and gpu_ms > 0 and profile.profiled_share == 1.0:
        host = max(eager_ms - gpu_ms, 0.0) / eager_ms
        if host >= LAUNCH_BOUND:
            out.append(Proposal("launch", "cuda_graph", host, "L1",
                                f"{n} kernels take {gpu_ms * 1e3:.0f} us of GPU time in a "
                                f"{eager_ms * 1e3:.0f} us program: {host:.0%} is host "
                                "time launching them", {"gpu_ms": round(gpu_ms, 4),
                                                        "eager_ms": round(eager_ms, 4)}))

    # P1-P6: precision of the GEMM-class kernels
    sm_g, mem_g = _weighted(gemm, SM_PCT), _weighted(gemm, MEM_PCT)
    if gemm and g >= 0.2 and reduced_precision:
        tensor_evidence: list[tuple[str, str, dict]] = []
        fma = _weighted(gemm, FMA_PIPE)
        tensor = next((v for v in (_weighted(gemm, t) for t in TENSOR_PIPES) if v is not None),
                      None)
        if fma is not None and fma >= 40.0 and (tensor is None or tensor < 1.0):
            tensor_evidence.append(("P1", f"FMA pipe {fma:.0f}% active, tensor pipes "
                                    f"{tensor or 0:.0f}% on the GEMM kernels",
                                    {FMA_PIPE: round(fma, 1)}))
        peak = _fp32_peak(gemm)
        if peak is not None and peak >= 30.0:
            tensor_evidence.append(("P2", f"the GEMM kernels reach {peak:.0f}% of the FP32 peak",
                                    {"fp32_peak_pct": round(peak, 1)}))
        insts = [k.metrics.get(INSTRUCTIONS) for k, _ in gemm]
        if features.flops > 0 and insts and all(isinstance(v, float) for v in insts):
            ratio = 64.0 * sum(insts) / features.flops
            if ratio >= 0.5:
                tensor_evidence.append(("P3", f"{sum(insts):.3g} warp instructions for "
                                        f"{features.flops:.3g} GEMM FLOPs: FP32 FMA math",
                                        {"instructions_x64_per_flop": round(ratio, 2)}))
        if sm_g is not None and sm_g >= COMPUTE_BOUND_PCT:
            tensor_evidence.append(("P4", f"the GEMM kernels are compute-bound ({sm_g:.0f}% SM "
                                    "throughput)", {SM_PCT: round(sm_g, 1)}))
        half: list[tuple[str, str, dict]] = []
        if sm_g is not None and mem_g is not None and mem_g >= max(sm_g, COMPUTE_BOUND_PCT):
            half.append(("P5", f"the GEMM kernels are memory-bound ({mem_g:.0f}% memory, "
                         f"{sm_g:.0f}% SM): 16-bit operands halve their bytes",
                         {MEM_PCT: round(mem_g, 1), SM_PCT: round(sm_g, 1)}))
        attention = sum(s for k, s in gemm if has_mark(k.name, _ATTENTION_MARKS))
        if attention > 0:
            half.append(("P6", f"attention kernels ({attention:.0%} of the time) have flash "
                         "kernels in 16-bit only", {"attention_share": round(attention, 3)}))
        evidence = {k: v for _, _, e in tensor_evidence + half for k, v in e.items()}
        why = "; ".join(w for _, w, _ in tensor_evidence + half)
        if half:  # 16-bit operands: twice TF32's tensor rate and half the bytes
            out.append(Proposal("precision", "autocast_fp16", 0.6 * g, half[0][0], why,
                                evidence))
        if tensor_evidence:  # TF32: the same 10 mantissa bits, no casts; FP16's fallback
            out.append(Proposal("precision", "tf32", 0.5 * g, tensor_evidence[0][0], why,
                                evidence))

    # C0-C5: code generation
    codegen: list[Proposal] = []
    at_roof = False
    if any(isinstance(k.metrics.get(DRAM_PCT), float) for k, _ in rest):
        roof = sum(s for k, s in rest if isinstance(k.metrics.get(DRAM_PCT), float)
                   and k.metrics[DRAM_PCT] >= ROOFLINE_PCT)
        if roof >= 0.9:
            at_roof = True
            codegen.append(Proposal("codegen", "", 1.0, "C0",
                                    f"kernels holding {roof:.0%} of the time run at >= 80% of "
                                    "the DRAM bandwidth: nothing to regenerate",
                                    {"at_dram_roofline": round(roof, 3)}))
        below = [(k, s) for k, s in rest if isinstance(k.metrics.get(DRAM_PCT), float)
                 and k.metrics[DRAM_PCT] < ROOFLINE_PCT]
        below_share = sum(s for _, s in below)
        softmax = [(k, s) for k, s in below if has_mark(k.name, _SOFTMAX_MARKS)]
        softmax_share = sum(s for _, s in softmax)
        if softmax_share >= 0.3:
            dram = _weighted(softmax, DRAM_PCT)
            codegen.append(Proposal("codegen", "triton_softmax",
                                    softmax_share * (1 - dram / ROOFLINE_PCT), "C3",
                                    f"softmax kernels ({softmax_share:.0%} of the time) at "
                                    f"{dram:.0f}% of the DRAM bandwidth: one pass per row",
                                    {DRAM_PCT: round(dram, 1)}))
        if below_share >= 0.3:
            dram = _weighted(below, DRAM_PCT)
            codegen.append(Proposal("codegen", "compile", below_share * (1 - dram / ROOFLINE_PCT),
                                    "C1", f"memory-class kernels ({below_share:.0%} of the "
                                    f"time) at {dram:.0f}% of the DRAM bandwidth",
                                    {DRAM_PCT: round(dram, 1)}))
    rates = [k.metrics.get(DRAM_BYTES_PER_S) for k in profile.kernels]
    if rest and m_share >= 0.1 and features.bytes_min > 0 and all(
            isinstance(v, float) for v in rates):
        moved = sum(r * (k.duration_ns or 0.0) * 1e-9 for r, k in zip(rates, profile.kernels))
        if moved >= FUSION_BYTES * features.bytes_min:
            codegen.append(Proposal("codegen", "compile",
                                    m_share * (1 - features.bytes_min / moved), "C2",
                                    f"{moved / 1e6:.0f} MB moved to and from DRAM against "
                                    f"{features.bytes_min / 1e6:.0f} MB of inputs, weights and "
                                    "outputs: intermediates round-trip", {
                                        "dram_mb": round(moved / 1e6, 1),
                                        "ideal_mb": round(features.bytes_min / 1e6, 1)}))
    compute_bound = sm_g is not None and sm_g >= COMPUTE_BOUND_PCT
    if gemm and not compute_bound:  # SpeedOfLight's compute-bound GEMM is not an occupancy case
        weighted, top = _finding_weight(gemm, _OCCUPANCY_RULES)
        if top is not None and weighted > 0:
            codegen.append(Proposal("codegen", "max_autotune", 0.5 * weighted / 100, "C4",
                                    f"{top} on the GEMM kernels (est. {weighted:.0f}% "
                                    "weighted): other tiles and launch configurations",
                                    {f"finding/{top}": round(weighted, 1)}))
    if rest and not at_roof:
        weighted, top = _finding_weight(rest, frozenset({"CPIStall"}))
        if top is not None and weighted > 0:
            codegen.append(Proposal("codegen", "compile", 0.5 * weighted / 100, "C5",
                                    f"warps stalled on memory in the memory-class kernels "
                                    f"(est. {weighted:.0f}% weighted): fewer round trips",
                                    {"finding/CPIStall": round(weighted, 1)}))
    # compile regenerates only the memory-class kernels, and a compiled program brings its
    # own overheads (guards, its own dispatch of the GEMMs): below MIN_COMPILE_GAIN of the
    # time it is not worth it
    small = [p for p in codegen if p.transformation == "compile" and p.gain < MIN_COMPILE_GAIN]
    codegen = [p for p in codegen if p not in small]
    if small and not codegen:  # too small to act on: the prior decides, and says why
        top = max(small, key=lambda p: p.gain)
        prior = _prior(features, eager_ms)
        codegen = [Proposal("codegen", prior, top.gain, top.rule,
                            f"{top.reason}; compile would save {top.gain:.0%} of the time, "
                            f"below {MIN_COMPILE_GAIN:.0%}: the prior decides "
                            f"({prior or 'the code as it is'})", top.evidence)]
    if at_roof:  # the kernels are at the roofline: only bytes beyond the ideal can go (C2)
        bytes_rule = [p for p in codegen if p.rule == "C2"]
        codegen = bytes_rule or [p for p in codegen if p.rule == "C0"]
    out.extend(codegen)

    # M1: memory format of NCHW 2-D convolutions
    conv = [(k, s) for k, s in gemm if has_mark(k.name, _NCHW_CONV_MARKS)]
    if conv:
        weighted, top = _finding_weight(conv, _LAYOUT_RULES)
        if top is not None and weighted >= 1.0:  # ncu's estimate below 1%: noise
            out.append(Proposal("memory", "channels_last", 0.5 * weighted / 100, "M1",
                                f"{top} on NCHW convolution kernels (est. {weighted:.0f}% "
                                "weighted)", {f"finding/{top}": round(weighted, 1)}))
    return out


def _prior(features: StaticFeatures, eager_ms: float | None) -> str:
    """The code generation nothing in the profile bears on: compile for a program without
    GEMM-class operators that runs long enough to gain, else the code as it is."""
    if eager_ms is not None and eager_ms < MIN_EAGER_MS:
        return ""
    if set(features.tags) & _GEMM_TAGS:
        return ""
    return "compile"


def reduced_precision_allowed(tolerance) -> bool:
    """Whether the tolerance regime (a preset name, a number, or None: the recording's
    KernelBench v0.1 1e-2) admits TF32 / FP16 (fp32 atol >= 1e-3)."""
    from autoprofiler_env.harness.tolerance import DEFAULT, resolve

    return resolve(tolerance if tolerance is not None else DEFAULT).for_dtype("float32")[0] \
        >= REDUCED_ATOL


class ReferenceOptimizer:
    """The deterministic, profile-guided optimizer: one decision per kind, composed (the
    environment's default once its candidates are recorded for every problem).

    >>> ReferenceOptimizer().optimize(problem, profile, eager_ms=1.2).producer
    'compile+tf32'
    """

    name = "reference"
    evidence_metrics = OWN_METRICS
    evidence_findings: frozenset[str] | None = EVIDENCE_FINDINGS

    def __init__(self, device: str = "cuda", tolerance: str | float | None = None) -> None:
        self.device = device
        self.reduced = reduced_precision_allowed(tolerance)

    def choose(self, problem: Problem | None, profile: Profile | None,
               features: StaticFeatures | None = None,
               applicable: set[str] | frozenset[str] | None = None,
               eager_ms: float | None = None) -> tuple[str, str, dict]:
        """(candidate name, reason, evidence) for this problem and profile.

        ``applicable`` names the catalogue's transformations that apply, when the caller knows
        them (the replay: as recorded); otherwise each one's rule is checked on the problem
        and its static features.
        """
        features = features or static_features(problem)
        on_gpu = self.device.startswith("cuda")

        def usable(name: str) -> bool:
            if applicable is not None:
                return name in applicable
            t = TRANSFORMATIONS.get(name)
            return t is not None and (on_gpu or not t.needs_cuda) and t.applies(problem, features)

        found = proposals(profile, features, eager_ms, self.reduced) if profile else []
        chosen: dict[str, Proposal] = {}
        for p in sorted(found, key=lambda p: (-p.gain, _ORDER[p.rule])):
            if p.decision not in chosen and (p.transformation == "" or usable(p.transformation)):
                chosen[p.decision] = p
        if "precision" in chosen and chosen.get("codegen") and chosen["codegen"].rule == "C4":
            # the occupancy finding was about the FP32 GEMM kernel that tensor cores replace
            del chosen["codegen"]
            rest = [p for p in found if p.decision == "codegen" and p.rule != "C4"
                    and (p.transformation == "" or usable(p.transformation))]
            if rest:
                chosen["codegen"] = min(rest, key=lambda p: (-p.gain, _ORDER[p.rule]))
        parts, reasons, evidence = [], [], {}
        for decision in DECISIONS:
            p = chosen.get(decision)
            if p is None:
                if decision == "codegen":
                    prior = _prior(features, eager_ms)
                    if prior and usable(prior):
                        parts.append(prior)
                        reasons.append(f"codegen prior: {prior} (nothing in the profile bears "
                                       "on it)")
                continue
            if decision == "memory" and not any(n in ("tf32", "autocast_fp16") for n in parts):
                continue  # NHWC pays off only for tensor-core convolutions (M1)
            if p.transformation:
                parts.append(p.transformation)
            reasons.append(f"{p.rule}: {p.reason}")
            evidence.update(p.evidence)
        if "autocast_fp16" in parts and any(n.startswith("triton_") for n in parts):
            parts = ["compile" if n.startswith("triton_") else n for n in parts]
            if not usable("compile"):
                parts.remove("compile")
            reasons.append("a Triton kernel is not composed with autocast: compile instead")
        if not parts:
            why = "; ".join(reasons) or ("no profile" if profile is None else
                                          "nothing in the profile calls for a change")
            return "identity", f"leave it alone ({why})", evidence
        return composed_name(parts), "; ".join(reasons), evidence

    def optimize(self, problem: Problem, profile: Profile | None,
                 eager_ms: float | None = None) -> Candidate:
        features = static_features(problem)
        name, reason, evidence = self.choose(problem, profile, features, eager_ms=eager_ms)
        source = identity_source(problem) if name == "identity" else compose(
            problem, features, name)
        return Candidate(problem_uri=problem.uri, source=source, producer=name, reason=reason,
                         evidence=evidence)
