"""What collecting a section alone costs on a problem where only ncu's full set was run.

Profiling every section alone on every problem costs about three times the device time of one
run of the full set (docs/profiler.md), so the recorder runs the full set on every problem and
each section alone on a sample of problems. There, the cost of each section alone is a
steady fraction of the full set's cost on the same problem (both grow with the kernels and
their replay passes). :class:`CostModel` fits that fraction per section (and per set) on the
problems where both were measured, and predicts the rest; it reports its leave-one-problem-out
error so that a dataset says how far its modelled costs can be off.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from autoprofiler_env.errors import DatasetError
from autoprofiler_env.profiler.records import ProfileCost


@dataclass(frozen=True)
class Fraction:
    """Cost alone / cost of the full set, as fitted."""

    replay: float
    gpu_replay: float
    problems: int
    loo_median_error: float  # relative error of the replay seconds, leaving each problem out
    loo_max_error: float


class NoCostModelError(DatasetError):
    """A cost to model that no run fitted (:meth:`CostModel.predict`): ``name`` was never
    run alone beside the full set."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no cost model for {name!r}: record it alone on a few problems that "
                         "also have a run of the full set (`autoprofiler record --parts "
                         "profiles,sets`)")
        self.name = name


@dataclass(frozen=True)
class CostModel:
    fractions: dict[str, Fraction]

    @classmethod
    def fit(cls, pairs: dict[str, list[tuple[ProfileCost, ProfileCost]]]) -> CostModel:
        """``pairs``: per section (or set) name, (cost alone, cost of the full set) on each
        problem where both were measured."""
        fractions = {}
        for name, rows in sorted(pairs.items()):
            rows = [(a, f) for a, f in rows if f.replay_s > 0 and a.replay_s > 0]
            if not rows:
                continue
            ratios = [a.replay_s / f.replay_s for a, f in rows]
            gpu = [a.gpu_replay_s / f.gpu_replay_s for a, f in rows if f.gpu_replay_s > 0]
            errors = []
            for i, (alone, full) in enumerate(rows):
                rest = ratios[:i] + ratios[i + 1:]
                if rest:
                    predicted = statistics.median(rest) * full.replay_s
                    errors.append(abs(predicted - alone.replay_s) / alone.replay_s)
            fractions[name] = Fraction(
                replay=statistics.median(ratios),
                gpu_replay=statistics.median(gpu) if gpu else statistics.median(ratios),
                problems=len(rows),
                loo_median_error=statistics.median(errors) if errors else float("nan"),
                loo_max_error=max(errors) if errors else float("nan"))
        return cls(fractions)

    def predict(self, name: str, full: ProfileCost, passes: int) -> ProfileCost:
        """The modelled cost of ``name`` alone on a problem whose full-set cost is ``full``;
        ``passes`` per kernel come from the catalogue (they do not vary with the problem)."""
        f = self.fractions.get(name)
        if f is None:
            raise NoCostModelError(name)
        return ProfileCost(replay_s=f.replay * full.replay_s, passes=passes,
                           kernel_passes=passes * full.n_kernels,
                           gpu_replay_s=f.gpu_replay * full.gpu_replay_s,
                           n_kernels=full.n_kernels)

    def to_dict(self) -> dict:
        return {name: asdict(f) for name, f in self.fractions.items()}

    @classmethod
    def from_dict(cls, d: dict) -> CostModel:
        """The model :meth:`to_dict` wrote (a dataset's ``metadata["cost_model"]``)."""
        return cls({name: Fraction(**f) for name, f in d.items()})

    def filled(self, fallback: CostModel | None) -> CostModel:
        """This model, with ``fallback``'s fraction for each name it could not fit (a
        recording that ran only the full set fits none: it borrows another recording's,
        made on the same GPU with the same ncu)."""
        if fallback is None:
            return self
        return CostModel({**fallback.fractions, **self.fractions})
