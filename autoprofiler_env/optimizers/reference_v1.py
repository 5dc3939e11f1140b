"""The first reference optimizer (``optimizer="reference-v1"``): a deterministic, profile-guided
choice of one transformation. Kept for comparison with :mod:`.reference`, which composes
decisions; its outcomes were recorded by judge 1 and stay in the dataset with it.

It is a pure function of the problem's static information and the evidence in the profile.
Every rule reads only what the collected sections provide, so it can be misled as a person or
an LLM can: a large estimated speedup in a finding can point at the wrong fix.

Rules (each proposes a transformation with an expected gain, the fraction of the program's
time it expects to save; the largest gain among the transformations that apply wins; ties go
to the earlier rule):

| # | evidence (section) | proposes | expected gain |
|---|---|---|---|
| 1 | many short kernels: >= 4 kernels averaging < 8 us (kernel durations: any section) | cuda_graph | launch time saved: n x 5 us against n x 5 us + GPU time |
| 2 | memory-bound: memory throughput >= compute throughput (SpeedOfLight), >= 2 kernels | compile | 0.5 x the time share of the kernels that are not GEMMs or convolutions |
| 3 | a GEMM / convolution taking most of the time is compute-bound (SpeedOfLight: SM >= 60%) | tf32 | 0.6 x the GEMM / convolution share |
| 4 | the FMA pipe busy and the tensor pipes idle (ComputeWorkloadAnalysis) on GEMM / conv kernels | tf32 | 0.7 x their share |
| 5 | a softmax or norm kernel that is not at the memory roofline (kernel name; SpeedOfLight memory < 70%) | triton_softmax / triton_layer_norm | 0.4 x its share |
| 6 | NCHW convolution kernels (kernel name) with uncoalesced or cache-pattern findings (SourceCounters, MemoryWorkloadAnalysis) | channels_last | 0.5 x the finding's weighted estimate |
| 7 | occupancy findings (Occupancy, LaunchStats, SchedulerStats) | max_autotune | the finding's time-weighted estimated speedup |
| 8 | warp-stall findings (WarpStateStats CPIStall) and other memory findings | compile | 0.5 x the finding's time-weighted estimated speedup |

Without a profile (or when no rule fires) it applies the prior: ``compile`` where it applies,
else ``tf32``, else the reference unchanged (``identity``), stated in the candidate's reason.
"""  # noqa: E501 (a markdown table's rows are one line each)

from __future__ import annotations

from dataclasses import dataclass, field

from autoprofiler_env.features import StaticFeatures, static_features
from autoprofiler_env.optimizers.candidate import Candidate
from autoprofiler_env.optimizers.transforms import TRANSFORMATIONS, identity_source
from autoprofiler_env.problems.problem import Problem
from autoprofiler_env.profiler.metrics import FMA_PIPE, MEM_PCT, SM_PCT, TENSOR_PIPES, has_mark
from autoprofiler_env.profiler.records import Profile

EVIDENCE_METRICS = (SM_PCT, MEM_PCT, FMA_PIPE, *TENSOR_PIPES)
"""The metrics the rules read (besides kernel names, durations and findings)."""
LAUNCH_US = 5.0  # host-side cost of one kernel launch from eager PyTorch
PRIOR = ("compile", "tf32")
CHOICES = frozenset({"cuda_graph", "compile", "tf32", "triton_softmax", "triton_layer_norm",
                     "channels_last", "max_autotune", *PRIOR, "identity"})
"""Every transformation a rule or the prior can choose (the others of the catalogue never
are: no rule proposes autocast, for one). The oracle's search stops once it reaches the best
of these (``ReplayBackend.best_score``); a test checks the rules stay inside it."""

_GEMM_MARKS = ("gemm", "cutlass", "sm90_xmma", "xmma", "conv", "cudnn", "implicit", "wgrad",
               "dgrad", "fprop", "winograd", "nchw", "nhwc")
_CONV_MARKS = ("nchw", "conv")
_SOFTMAX_MARKS = ("softmax",)
_NORM_MARKS = ("layer_norm", "layernorm", "rms_norm", "rmsnorm")
_OCCUPANCY_RULES = {"AchievedOccupancy", "TheoreticalOccupancy", "LaunchConfiguration",
                    "IssueSlotUtilization"}
_LAYOUT_RULES = {"UncoalescedAccess", "UncoalescedSharedAccess", "MemoryCacheAccessPattern"}


@dataclass(frozen=True)
class Proposal:
    transformation: str
    gain: float
    rule: int
    reason: str
    evidence: dict = field(default_factory=dict)


def proposals(profile: Profile) -> list[Proposal]:
    """What the rules propose for this profile, before applicability."""
    if not profile.sections or not profile.kernels:
        return []
    out: list[Proposal] = []
    shares = profile.shares()
    kernels = list(zip(profile.kernels, shares))
    n = len(profile.kernels)
    total_us = profile.duration_ns / 1e3
    gemm_share = sum(s for k, s in kernels if has_mark(k.name, _GEMM_MARKS))

    # 1: launch-bound
    if n >= 4 and total_us / n < 8.0:
        launch_us = n * LAUNCH_US
        out.append(Proposal("cuda_graph", launch_us / (launch_us + total_us), 1,
                            f"{n} kernels averaging {total_us / n:.1f} us: launch-bound",
                            {"n_kernels": n, "mean_kernel_us": round(total_us / n, 2)}))
    sm, mem = profile.metric(SM_PCT), profile.metric(MEM_PCT)
    # 2: memory-bound chain
    if sm is not None and mem is not None and mem >= sm and n >= 2:
        out.append(Proposal("compile", 0.5 * (1.0 - gemm_share), 2,
                            f"memory-bound ({mem:.0f}% memory vs {sm:.0f}% compute) over {n} "
                            "kernels: fuse them", {MEM_PCT: mem, SM_PCT: sm, "n_kernels": n}))
    # 3: compute-bound GEMM / convolution
    if sm is not None and sm >= 60.0 and gemm_share >= 0.5:
        out.append(Proposal("tf32", 0.6 * gemm_share, 3,
                            f"compute-bound ({sm:.0f}% SM throughput) in GEMM/convolution "
                            f"kernels ({gemm_share:.0%} of the time): use tensor cores",
                            {SM_PCT: sm, "gemm_share": round(gemm_share, 3)}))
    # 4: FMA busy, tensor cores idle
    fma = profile.metric(FMA_PIPE)
    tensor = next((v for v in (profile.metric(t) for t in TENSOR_PIPES) if v is not None), None)
    if fma is not None and fma >= 40.0 and (tensor is None or tensor < 1.0) and gemm_share > 0:
        out.append(Proposal("tf32", 0.7 * gemm_share, 4,
                            f"FMA pipe {fma:.0f}% busy, tensor pipes idle: use TF32 tensor "
                            "cores", {FMA_PIPE: fma, "tensor_pipe_pct": tensor}))
    # 5: softmax / norm kernels below the memory roofline
    for marks, transformation in ((_SOFTMAX_MARKS, "triton_softmax"),
                                  (_NORM_MARKS, "triton_layer_norm")):
        share = sum(s for k, s in kernels if has_mark(k.name, marks))
        if share > 0 and mem is not None and mem < 70.0:
            out.append(Proposal(transformation, 0.4 * share, 5,
                                f"{transformation.split('_', 1)[1]} kernels ({share:.0%} of "
                                f"the time) at {mem:.0f}% memory throughput",
                                {MEM_PCT: mem, "share": round(share, 3)}))
    # 6-8: ncu's findings
    for finding, weighted, _, _ in profile.findings():
        if finding.kind != "OPT" or weighted <= 0:
            continue
        evidence = {f"{finding.section}/{finding.rule}": round(weighted, 2)}
        if finding.rule in _LAYOUT_RULES and any(has_mark(k.name, _CONV_MARKS) for k, _ in kernels):
            out.append(Proposal("channels_last", 0.5 * weighted / 100, 6,
                                f"{finding.rule} on convolution kernels (est. {weighted:.0f}%)",
                                evidence))
        elif finding.rule in _OCCUPANCY_RULES:
            out.append(Proposal("max_autotune", weighted / 100, 7,
                                f"{finding.rule}: est. {weighted:.0f}% from better launch "
                                "configurations", evidence))
        else:
            out.append(Proposal("compile", 0.5 * weighted / 100, 8,
                                f"{finding.section} {finding.rule}: est. {weighted:.0f}%; "
                                "fewer memory round trips", evidence))
    return out


class ReferenceOptimizerV1:
    """The first deterministic, profile-guided optimizer: one transformation per candidate.

    >>> ReferenceOptimizerV1().optimize(problem, profile).producer
    'tf32'
    """

    name = "reference-v1"
    evidence_metrics = EVIDENCE_METRICS
    evidence_findings: frozenset[str] | None = None  # rule 8 reads any OPT finding

    def __init__(self, device: str = "cuda", tolerance: str | float | None = None) -> None:
        self.device = device  # the tolerance does not change its choice

    def choose(self, problem: Problem | None, profile: Profile | None,
               features: StaticFeatures | None = None,
               applicable: set[str] | frozenset[str] | None = None,
               eager_ms: float | None = None) -> tuple[str, str, dict]:
        """(transformation, reason, evidence) for this problem and profile.

        ``applicable`` names the transformations that apply, when the caller knows them (the
        replay: the ones recorded); otherwise each transformation's rule is checked on the
        problem and its static features. ``eager_ms`` is not read (the interface is the
        current optimizer's).
        """
        on_gpu = self.device.startswith("cuda")
        if applicable is None:
            features = features or static_features(problem)

        def usable(name: str) -> bool:
            if applicable is not None:
                return name in applicable
            t = TRANSFORMATIONS.get(name)
            return t is not None and (on_gpu or not t.needs_cuda) and t.applies(problem, features)

        ranked = sorted((p for p in proposals(profile) if usable(p.transformation))
                        if profile is not None else [], key=lambda p: (-p.gain, p.rule))
        if ranked:
            best = ranked[0]
            return (best.transformation,
                    f"rule {best.rule}: {best.reason} (expected gain {best.gain:.0%})",
                    best.evidence)
        for name in PRIOR:
            if usable(name):
                return name, f"prior: no rule fired on the evidence, so {name}", {}
        return "identity", "prior: no transformation applies; the reference unchanged", {}

    def optimize(self, problem: Problem, profile: Profile | None,
                 eager_ms: float | None = None) -> Candidate:
        features = static_features(problem)
        name, reason, evidence = self.choose(problem, profile, features)
        source = (identity_source(problem) if name == "identity"
                  else TRANSFORMATIONS[name].rewrite(problem, features))
        return Candidate(problem_uri=problem.uri, source=source, producer=name, reason=reason,
                         evidence=evidence)
