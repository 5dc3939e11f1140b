"""The recorded dataset: schema ``autoprofiler-dataset/2``.

One gzipped file holds everything the replay backend needs to answer "problem P, sections S,
optimizer O" on a CPU. Its first line is a JSON header, ``{"schema": ..., "sha256": ...}``;
the rest is one JSON document, whose bytes the ``sha256`` covers (checked on load, without
serialising anything again). The document holds:

- ``metadata``: GPU, driver, CUDA, torch, triton and ncu versions, date, tolerance, timing
  method (on load, the header's ``sha256`` is added to it);
- ``sections``: the action sections recorded for every problem;
- ``problems``: per problem its URI, level, split, tags, static features, the eager time and
  spread, and
  - ``profiles``: per section, the profile that collecting that section alone gives (kernels
    with the metrics kept as evidence, the section header as ncu printed it, ncu's findings;
    cut out of a run of the full set, see :mod:`.build`) and what collecting it alone costs
    (replay seconds, passes, GPU replay time);
  - ``set_costs``: the cost of ncu's basic, detailed and full sets;
  - ``modelled_costs``: the sections and sets (``"set:basic"``) whose cost was not measured
    on this problem but predicted from its full set's cost (``metadata["cost_model"]``);
  - ``outcomes``: per transformation the optimizer can produce, whether it was correct, its
    time and spread, and its speedup over eager;
  - ``llm_outcomes``: for LLM optimizers, whose candidates are not a function of a few rules,
    outcomes keyed by optimizer name, then by the canonical section set (``"A+B"``, ``""`` for
    no profile), each a list of repeats (one per sampled reply).

Kept metrics (to stay small): every action section's header metrics, the metrics the
reference optimizer's rules read, and the kernel duration. Files are written atomically
(a temporary file, then a rename).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from autoprofiler_env.atomic import write_atomic
from autoprofiler_env.errors import DatasetError, NotRecordedError
from autoprofiler_env.features import StaticFeatures
from autoprofiler_env.profiler.records import Profile, ProfileCost

SCHEMA = "autoprofiler-dataset/2"
RECORDED_TOLERANCE = "kernelbench-v0.1"
"""The regime the shipped recordings were judged under."""


@dataclass(frozen=True)
class Outcome:
    """The measured outcome of one candidate program of a problem, judged at the recording's
    tolerance (KernelBench v0.1's atol = rtol = 1e-2 for every shipped dataset).

    ``max_abs_error`` and ``tolerance_needed`` (per dtype, the smallest ``t`` passing with
    ``atol = rtol = t``: docs/harness.md) let :meth:`judged` replay a stricter regime.
    """

    transformation: str
    correct: bool
    error_kind: str | None = None
    median_ms: float | None = None
    p20_ms: float | None = None
    p80_ms: float | None = None
    speedup: float | None = None
    max_abs_error: float | None = None
    tolerance_needed: dict | None = None

    def judged(self, tolerance, recorded=RECORDED_TOLERANCE) -> Outcome:
        """This outcome under another tolerance regime (a preset name or a number).

        A regime no stricter than the recording's keeps a correct outcome; a stricter one
        decides from ``tolerance_needed``, or from ``max_abs_error`` where that alone
        suffices (``|c - r| / (1 + |r|) <= |c - r|``). An incorrect outcome stays incorrect.

        Raises:
            NotRecordedError: the record cannot decide it (it was recorded before the judge
                stored ``tolerance_needed``, or the regime is looser than the recording's).
        """
        from autoprofiler_env.harness.tolerance import passes, resolve

        regime, base = resolve(tolerance), resolve(recorded)
        if not regime.symmetric:
            raise NotRecordedError(f"the tolerance {regime.name!r} has atol != rtol: a record "
                                   "decides only regimes with atol = rtol")
        dtypes = ("float32", "float64", "float16", "bfloat16")
        looser = any(regime.for_dtype(d)[0] > base.for_dtype(d)[0] for d in dtypes)
        if not self.correct:
            if looser:
                raise NotRecordedError(
                    f"{self.transformation} was judged incorrect at {base.name}; whether it "
                    f"passes the looser {regime.name} was not recorded")
            return self
        if not looser and all(regime.for_dtype(d) == base.for_dtype(d) for d in dtypes):
            return self
        if self.tolerance_needed is not None:
            ok = passes(self.tolerance_needed, regime)
        elif self.max_abs_error is not None and self.max_abs_error <= min(
                regime.for_dtype(d)[0] for d in dtypes):
            ok = True
        else:
            raise NotRecordedError(
                f"{self.transformation} was recorded without tolerance_needed (judge 1) and its "
                f"max abs error {self.max_abs_error} does not decide {regime.name}: record it "
                "again (`autoprofiler record --parts candidates`) or replay at the recording's "
                "tolerance")
        if ok:
            return self
        return replace(self, correct=False, error_kind="mismatch", median_ms=None, p20_ms=None,
                       p80_ms=None, speedup=None)


@dataclass(frozen=True)
class ProblemRecord:
    uri: str
    level: int | None
    split: str | None
    tags: tuple[str, ...]
    features: StaticFeatures
    eager: dict
    profiles: dict[str, Profile] = field(default_factory=dict)
    set_costs: dict[str, ProfileCost] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    llm_outcomes: dict[str, dict[str, list[Outcome]]] = field(default_factory=dict)
    modelled_costs: tuple[str, ...] = ()  # sections (and "set:NAME") whose cost is modelled

    def to_dict(self) -> dict:
        return {
            "uri": self.uri, "level": self.level, "split": self.split, "tags": list(self.tags),
            "features": self.features.to_dict(), "eager": self.eager,
            "profiles": {s: p.to_dict() for s, p in self.profiles.items()},
            "set_costs": {s: asdict(c) for s, c in self.set_costs.items()},
            "outcomes": {t: asdict(o) for t, o in self.outcomes.items()},
            "llm_outcomes": {m: {k: [asdict(o) for o in reps] for k, reps in keyed.items()}
                             for m, keyed in self.llm_outcomes.items()},
            "modelled_costs": list(self.modelled_costs),
        }

    @classmethod
    def from_dict(cls, d: dict) -> ProblemRecord:
        return cls(
            uri=d["uri"], level=d["level"], split=d["split"], tags=tuple(d["tags"]),
            features=StaticFeatures.from_dict(d["features"]), eager=d["eager"],
            profiles={s: Profile.from_dict(p) for s, p in d["profiles"].items()},
            set_costs={s: ProfileCost(**c) for s, c in d["set_costs"].items()},
            outcomes={t: Outcome(**o) for t, o in d["outcomes"].items()},
            llm_outcomes={m: {k: [Outcome(**o) for o in reps] for k, reps in keyed.items()}
                          for m, keyed in d.get("llm_outcomes", {}).items()},
            modelled_costs=tuple(d.get("modelled_costs", ())))


def compact(profile: Profile, keep: frozenset[str]) -> Profile:
    """The profile with only the kept metrics on each kernel."""
    kernels = tuple(replace(k, metrics={m: v for m, v in k.metrics.items() if m in keep},
                            units={m: u for m, u in k.units.items() if m in keep})
                    for k in profile.kernels)
    return replace(profile, kernels=kernels)


@dataclass(frozen=True)
class DatasetFile:
    """The file's content, checked: metadata, sections and problem records by URI."""

    metadata: dict
    sections: tuple[str, ...]
    problems: dict[str, ProblemRecord]

    def save(self, path: Path) -> str:
        """Writes atomically; returns the checksum it stored."""
        metadata = {k: v for k, v in self.metadata.items() if k != "sha256"}
        document = json.dumps({"metadata": metadata, "sections": list(self.sections),
                               "problems": [r.to_dict() for r in self.problems.values()]},
                              separators=(",", ":")).encode()
        checksum = hashlib.sha256(document).hexdigest()
        header = json.dumps({"schema": SCHEMA, "sha256": checksum}).encode()
        write_atomic(Path(path), gzip.compress(header + b"\n" + document, mtime=0))
        return checksum

    @classmethod
    def load(cls, path: Path) -> DatasetFile:
        """Reads and checks a dataset file.

        Raises:
            DatasetError: missing, not gzip or JSON, another schema, or a checksum mismatch.
        """
        path = Path(path)
        try:
            head, _, document = gzip.decompress(path.read_bytes()).partition(b"\n")
            header = json.loads(head)
        except FileNotFoundError:
            raise DatasetError(f"no dataset file at {path}") from None
        except (OSError, EOFError, ValueError) as e:
            raise DatasetError(f"{path} is not a readable dataset (gzipped JSON): {e}; "
                               "restore it from git or record it again") from e
        schema = header.get("schema") if isinstance(header, dict) else None
        if schema != SCHEMA:
            raise DatasetError(f"{path} has schema {schema!r}; this version reads {SCHEMA!r}: "
                               "build it again with `autoprofiler dataset build`")
        actual = hashlib.sha256(document).hexdigest()
        if header.get("sha256") != actual:
            raise DatasetError(f"{path} is corrupted: its checksum is {actual[:12]}..., the "
                               f"file says {str(header.get('sha256'))[:12]}...; restore it "
                               "from git or record it again")
        try:
            body = json.loads(document)
            problems = {d["uri"]: ProblemRecord.from_dict(d) for d in body["problems"]}
            metadata = {**body["metadata"], "sha256": actual}
            sections = tuple(body["sections"])
        except (ValueError, KeyError, TypeError) as e:
            raise DatasetError(f"{path}: a problem record is malformed: {e!r}") from e
        return cls(metadata, sections, problems)
