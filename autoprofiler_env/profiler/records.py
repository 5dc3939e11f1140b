"""Typed records of a profile: per kernel its metrics and ncu's rule findings, per problem an
aggregate over its kernels weighted by duration, and the cost of collecting it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from typing import NamedTuple

Value = float | str


@dataclass(frozen=True)
class Finding:
    """One result of an ncu rule for one kernel.

    Attributes:
        section: the section id whose rule it is (``WarpStateStats``).
        rule: the rule's id (``CPIStall``).
        kind: ``OPT`` (an optimization opportunity), ``WRN``, ``INF`` or ``ERR``.
        message: ncu's text.
        speedup_type: ``"global"`` (of the whole kernel), ``"local"`` (of what the rule looks
            at), or None when the rule gives no estimate.
        speedup_pct: the estimated speedup in percent, or None.
    """

    section: str
    rule: str
    kind: str
    message: str
    speedup_type: str | None = None
    speedup_pct: float | None = None


@dataclass(frozen=True)
class DisplayedMetric:
    """A metric as the section's header shows it in ncu's report (its formatting kept)."""

    section: str
    label: str
    unit: str
    value: str


@dataclass(frozen=True)
class KernelProfile:
    """One profiled kernel launch.

    ``metrics`` holds every metric the run collected for it (raw names, numbers as floats,
    base units in its profile's ``units``); ``displayed`` the sections' headers as ncu prints
    them.
    """

    id: int
    name: str
    block: str
    grid: str
    duration_ns: float | None
    passes: int | None
    metrics: dict[str, Value] = field(default_factory=dict)
    displayed: tuple[DisplayedMetric, ...] = ()
    findings: tuple[Finding, ...] = ()

    @property
    def short_name(self) -> str:
        """The function name without template arguments and parameters."""
        name = self.name.split("(")[0]
        depth, out = 0, []
        for ch in name:
            if ch == "<":
                depth += 1
            elif ch == ">":
                depth -= 1
            elif depth == 0:
                out.append(ch)
        return "".join(out).split("::")[-1].replace("void ", "").strip() or self.name[:60]


KERNEL_KEYS = frozenset(f.name for f in fields(KernelProfile))
"""A :class:`KernelProfile`'s fields, the keys of its dict."""


class RankedFinding(NamedTuple):
    """A rule's finding over a problem's kernels (:meth:`Profile.findings`): the kernel's
    finding that stands for it, the estimated speedup weighted by the kernels' time and summed
    over them, and that kernel and its share of the time. A kernel's finding may be the same
    object as another kernel's (a dataset's load shares identical ones): the kernel is said
    here, never found by the finding's identity."""

    finding: Finding
    weighted: float
    kernel: KernelProfile
    share: float


@dataclass(frozen=True)
class ProfileCost:
    """What collecting a profile cost.

    Attributes:
        replay_s: wall seconds of the profiled call under ncu (its kernels' replay passes),
            without the profiled program's start-up.
        passes: replay passes per kernel (the largest over the kernels).
        kernel_passes: passes summed over the kernels.
        gpu_replay_s: GPU time of the replays: passes x duration, summed over kernels.
        n_kernels: kernels profiled.
    """

    replay_s: float
    passes: int
    kernel_passes: int
    gpu_replay_s: float
    n_kernels: int


@dataclass(frozen=True)
class Profile:
    """The profile of one problem with one set of sections.

    Attributes:
        ops: the operators the profiled forward call ran (the driver's count); None where it
            was not recorded (profiles of the suite's first recordings).
        ops_profiled: of them, the first ones whose kernels were profiled (``MAX_OPS``, or a
            recording's ``--max-ops``: KernelBench's level-3 models run up to 517).
        kernels_capped: ncu stopped profiling at its launch cap (``MAX_KERNELS``, a problem
            profiled alone after a timeout): kernels past it are missing, however many.
        units: the base unit of each metric its kernels hold that has one (ncu's raw page
            gives one row of units for all kernels: a metric's unit is the same on each).
    """

    problem_uri: str
    sections: tuple[str, ...]
    kernels: tuple[KernelProfile, ...]
    cost: ProfileCost
    ncu_version: str = ""
    ops: int | None = None
    ops_profiled: int | None = None
    kernels_capped: bool = False
    units: dict[str, str] = field(default_factory=dict)

    @property
    def duration_ns(self) -> float:
        """The profiled kernels' GPU time: the forward's only where :attr:`profiled_share`
        is 1."""
        return sum(k.duration_ns or 0.0 for k in self.kernels)

    @property
    def profiled_share(self) -> float | None:
        """The share of the forward's operators whose kernels the profile holds: 1.0 for a
        whole forward (and for a profile recorded without the counts), ``ops_profiled / ops``
        for a forward cut by the operator cap, None when ncu's launch cap cut it (what is
        missing is unknown)."""
        if self.kernels_capped:
            return None
        if not self.ops or self.ops_profiled is None:
            return 1.0
        return min(self.ops_profiled, self.ops) / self.ops

    def shares(self) -> list[float]:
        """Each kernel's share of the problem's GPU time (equal shares without durations)."""
        return list(self._shares)

    @cached_property
    def _shares(self) -> tuple[float, ...]:  # read once per metric: computed once per profile
        total = self.duration_ns
        if total <= 0:
            return (1.0 / len(self.kernels),) * len(self.kernels) if self.kernels else ()
        return tuple((k.duration_ns or 0.0) / total for k in self.kernels)

    def metric(self, name: str) -> float | None:
        """A metric over the problem: the duration-weighted mean over the kernels that have it
        as a number; None if none has it."""
        total = weight = 0.0
        for kernel, share in zip(self.kernels, self._shares):
            value = kernel.metrics.get(name)
            if isinstance(value, float):
                total += share * value
                weight += share
        return total / weight if weight > 0 else None

    def aggregate(self) -> dict[str, float]:
        """Every numeric metric, aggregated as :meth:`metric` does."""
        names = sorted({n for k in self.kernels for n, v in k.metrics.items()
                        if isinstance(v, float)})
        return {n: self.metric(n) for n in names}

    def findings(self) -> list[RankedFinding]:
        """The problem's findings, one per (section, rule, kind): the kernel's finding with the
        largest time-weighted estimated speedup stands for the rule (among equals, that of
        the kernel taking most of the time: a rule without estimates is the longest kernel's
        where it fires there), with the weighted speedup summed over kernels (a rule that
        fires on a kernel taking 10% of the time can save at most 10% of the problem's time),
        and that kernel and its share. Largest first; those without estimates last."""
        best: dict[tuple, tuple[Finding, float, tuple[float, float], int]] = {}
        for i, (kernel, share) in enumerate(zip(self.kernels, self._shares)):
            for f in kernel.findings:
                key = (f.section, f.rule, f.kind)
                weighted = share * (f.speedup_pct or 0.0)
                found, total, top, owner = best.get(key, (f, 0.0, (-1.0, -1.0), i))
                if (weighted, share) > top:
                    found, top, owner = f, (weighted, share), i
                best[key] = (found, total + weighted, top, owner)
        ranked = [RankedFinding(f, total, self.kernels[i], self._shares[i])
                  for f, total, _, i in best.values()]
        return sorted(ranked, key=lambda r: (-r.weighted, r.finding.section, r.finding.rule,
                                             r.finding.kind))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Profile:
        """The profile of :meth:`to_dict`'s dict. A kernel given as a :class:`KernelProfile` is
        taken as it is (a dataset's load builds them, sharing identical header rows and
        findings between them). Raises KeyError or ValueError for a dict of another shape (a
        kernel with other keys: a per-kernel ``units`` is schema 4's)."""
        # positional constructors: a KernelBench dataset builds ~150k of these records on load
        for k in d["kernels"]:
            if type(k) is not KernelProfile and k.keys() != KERNEL_KEYS:
                raise ValueError(f"a kernel's keys are {sorted(k)}, not {sorted(KERNEL_KEYS)}")
        kernels = tuple(
            k if type(k) is KernelProfile else
            KernelProfile(k["id"], k["name"], k["block"], k["grid"], k["duration_ns"],
                          k["passes"], k["metrics"],
                          tuple(DisplayedMetric(m["section"], m["label"], m["unit"], m["value"])
                                for m in k["displayed"]),
                          tuple(Finding(f["section"], f["rule"], f["kind"], f["message"],
                                        f["speedup_type"], f["speedup_pct"])
                                for f in k["findings"]))
            for k in d["kernels"])
        return cls(problem_uri=d["problem_uri"], sections=tuple(d["sections"]), kernels=kernels,
                   cost=ProfileCost(**d["cost"]), ncu_version=d.get("ncu_version", ""),
                   ops=d.get("ops"), ops_profiled=d.get("ops_profiled"),
                   kernels_capped=d.get("kernels_capped", False), units=d["units"])
