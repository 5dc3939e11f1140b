"""The recorded dataset: schema ``autoprofiler-dataset/7``.

One gzipped file holds everything the replay backend needs to answer "problem P, sections S,
optimizer O" on a CPU. Its first line is a JSON header, ``{"schema": ..., "sha256": ...}``;
the rest is one JSON document, whose bytes the ``sha256`` covers (checked on load, without
serialising anything again). The document holds (the profiles' kernels as :func:`pack` writes
them: each a list of its fields, its repeated strings, metric values, header rows and findings
once, in the document's tables):

- ``metadata``: GPU, CUDA, torch, Python and ncu versions (``gpu``, ``cuda``, ``torch``,
  ``python``, ``ncu``; ``triton`` where recorded), the build's date (``built``), tolerance,
  timing method, the cost model's fit (``cost_model``), the recording's cost
  (``recording_cost``; per problem, ``problems``, where the build kept it: KernelBench's),
  the problems left out (``left_out``, ``unprimed_costs``), per optimizer with outcomes the
  judge versions of its rows (``optimizers``; a schema-2 file has ``optimizer`` instead),
  and after ``autoprofiler dataset upgrade`` the checksums of the same content in older
  files (``same_content_as``) (on load, the header's ``sha256`` is added to it);
- ``sections``: the action sections recorded for every problem;
- ``problems``: per problem its URI, level, split, tags, static features, the eager time and
  spread (``eager``; with ``constant_needed`` where recorded: per output dtype, the smallest
  tolerance at which a constant output would pass, so that the replay leaves the problem out
  of a regime that loose; absent: checked well-posed at the recording's tolerance), its
  ``provenance`` (a KernelBench problem's level, file name, the sha256 of the
  file's bytes and the KernelBench commit: :class:`KernelBenchProvenance`; null for the
  project's suite, whose URIs name its files), and
  - ``profiles``: per section, the profile that collecting that section alone gives (kernels
    with the metrics kept as evidence, the section header as ncu printed it, ncu's findings;
    cut out of a run of the full set, see :mod:`.build`) and what collecting it alone costs
    (replay seconds, passes, GPU replay time), how much of the forward it covers
    (``ops``, ``ops_profiled``, ``kernels_capped``: absent in files built before they were
    kept, read as a whole forward), and each of its metrics' base unit, once for the
    profile (``units``: ncu's raw page gives one units row for all kernels);
  - ``set_costs``: the cost of ncu's basic, detailed and full sets;
  - ``modelled_costs``: the sections and sets (``"set:basic"``) whose cost was not measured
    on this problem but predicted from its full set's cost (``metadata["cost_model"]``);
  - ``transformations``: the catalogue's transformations that apply to the problem on the
    recording's device, by name, in catalogue order (static: what
    :func:`~autoprofiler_env.optimizers.applicable` lists; an optimizer that composes them
    reads it at replay time, where the problem's source is not loaded);
  - ``outcomes``: per rule-based optimizer (``"reference"``, ``"reference-v1"``), per
    candidate it can produce (a transformation's name, or a composition's, its parts joined
    with ``+``: ``"compile+autocast_fp16+cuda_graph"``), whether it was correct, its time and
    spread, and its speedup over eager. An optimizer without outcomes for the problem is
    absent. The shipped file's ``"reference-v1"`` outcomes were recorded by judge 1, one per
    applicable transformation; ``metadata["optimizers"]`` names each optimizer's judges;
  - ``llm_outcomes``: for LLM optimizers, whose candidates are not a function of a few rules,
    outcomes keyed by optimizer name, then by the canonical section set (``"A+B"``, ``""`` for
    no profile), each a list of repeats (one per sampled reply);

- ``strings``, ``metric_names``, ``headers``, ``values``, ``rows``, ``findings``: the tables
  the kernels refer to by index (:data:`TABLES`, :data:`PACKED_KERNEL`, :func:`pack`): the
  kernels' names and their findings' section, rule, kind and text; each kernel shape's metric
  names, in order; the header rows' section, label and unit; the distinct metric values, header
  rows and findings.

Kept metrics (to stay small): every action section's header metrics, the metrics the
reference optimizers' rules read, and the kernel duration. Files are written atomically
(a temporary file, then a rename).

Older files still load: their stored bytes are checked against their checksum as they are,
then each record is converted. Schema 6 held each kernel as a mapping, with its metric values,
header rows and findings in it (:func:`upgrade_v6`: the KernelBench file's 1.05 million values
are 37,000 distinct ones; held once, the file loads in two thirds of the time). Schema 5 held
each kernel's metric names, header labels and units, findings' texts and name in full
(:func:`pack`: they are 70% of a KernelBench file's JSON, written once since). Schema 4
kept the units on every kernel (:func:`upgrade_v4`: they move to the profile; they were a
quarter of a KernelBench file's JSON). Schema 3 had no ``provenance`` (:func:`upgrade_v3`:
null).
Schema 2 (outcomes per transformation, all of the first reference optimizer) is converted to
schema 3 first (:func:`upgrade_v2`: its ``outcomes`` become ``{"reference-v1": outcomes}``,
its ``transformations`` the outcomes' names in the order stored, since that recording judged
every applicable transformation). Saving writes schema 7.

Loading refuses, with a :class:`DatasetError` that says what to do, a file that is not gzip
or is damaged (a flipped byte, a truncation), one of any other schema, one whose checksum
does not match, one whose values are out of range (:meth:`ProblemRecord.invalid`: a speedup
that is not a positive number, a NaN or negative time, cost or static feature, a correct
outcome without a speedup, a split other than train, val and test, a level that is not an
integer, tags that are not a list of strings; a kernel whose ID is not a count, whose block
or grid is not ncu's text or whose replay passes are neither null nor a count; a kernel
metric that is not a finite number or a string, or a number in one kernel and a string in
another: :func:`unpack`, :func:`_invalid_metrics`), one whose ``sections`` is not a
non-empty list of distinct names (the environment's actions), one with a kernel that refers
to an entry its tables do not hold, or by anything but an integer, or whose tables are not
lists of what they hold (:func:`_tables`, :func:`unpack`), one whose metadata names a
tolerance that is not a mapping or an optimizer no backend knows, and one with a problem
lacking the profile of one of its ``sections`` (a build keeps only the problems with all of
them), which would otherwise fail later, far from the file, or give a wrong result.
"""

from __future__ import annotations

import gc
import gzip
import hashlib
import json
import math
import threading
import zlib
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import NamedTuple

from autoprofiler_env import gzipped
from autoprofiler_env.atomic import write_atomic
from autoprofiler_env.errors import DatasetError, NotRecordedError
from autoprofiler_env.features import StaticFeatures
from autoprofiler_env.numeric import is_finite_number, shown
from autoprofiler_env.problems.kernelbench import KernelBenchProvenance
from autoprofiler_env.problems.loaders import SPLITS
from autoprofiler_env.profiler.records import (
    KERNEL_KEYS,
    DisplayedMetric,
    Finding,
    KernelProfile,
    Profile,
    ProfileCost,
)

SCHEMA = "autoprofiler-dataset/7"
SCHEMA_V6 = "autoprofiler-dataset/6"
SCHEMA_V5 = "autoprofiler-dataset/5"
SCHEMA_V4 = "autoprofiler-dataset/4"
SCHEMA_V3 = "autoprofiler-dataset/3"
SCHEMA_V2 = "autoprofiler-dataset/2"
READABLE = (SCHEMA, SCHEMA_V6, SCHEMA_V5, SCHEMA_V4, SCHEMA_V3, SCHEMA_V2)
"""The schemas read: :data:`SCHEMA`, and the older ones, converted on load
(:func:`upgrade_v6`, :func:`unpack`, :func:`upgrade_v4`, :func:`upgrade_v3`, :func:`upgrade_v2`)."""
V1 = "reference-v1"
"""The optimizer whose outcomes a schema-2 file holds: the first reference optimizer."""
_REPAIR = "restore it from git or rebuild it with `autoprofiler dataset build`"

# -- the range of each recorded value, checked on load ------------------------------------------
# (what it must be, the test); a test is False for None, NaN and booleans (bool is an int)
# (an int beyond a float's range compares below inf exactly, then overflows where it is used)
_POSITIVE = ("a finite number > 0",
             lambda v: type(v) in (float, int) and is_finite_number(v) and v > 0)
_NON_NEGATIVE = ("a finite number >= 0",
                 lambda v: type(v) in (float, int) and is_finite_number(v) and v >= 0)
_NON_NEGATIVE_OR_INF = ("a number >= 0 or inf", lambda v: (type(v) is float and v >= 0)
                        or (type(v) is int and is_finite_number(v) and v >= 0))
_COUNT = ("an integer >= 0", lambda v: type(v) is int and v >= 0)
_AT_LEAST_ONE = ("an integer >= 1", lambda v: type(v) is int and v >= 1)
_TEXT = ("a string (ncu's text)", lambda v: type(v) is str)
_KERNEL_VALUES = (("id", _COUNT, False), ("block", _TEXT, False), ("grid", _TEXT, False),
                  ("duration_ns", _NON_NEGATIVE, True), ("passes", _COUNT, True))
"""A profiled kernel's fields other than its name and rows: (name, rule, may be null)."""
_OUTCOME_VALUES = (("median_ms", _POSITIVE), ("p20_ms", _POSITIVE), ("p80_ms", _POSITIVE),
                   ("speedup", _POSITIVE), ("max_abs_error", _NON_NEGATIVE_OR_INF))
"""An outcome's numbers, each also None (an incorrect outcome has no time)."""
_COST_VALUES = (("replay_s", _NON_NEGATIVE), ("passes", _COUNT), ("kernel_passes", _COUNT),
                ("gpu_replay_s", _NON_NEGATIVE), ("n_kernels", _COUNT))
"""A :class:`ProfileCost`'s fields, none of them None."""
_EAGER_VALUES = (("p20_ms", _POSITIVE), ("p80_ms", _POSITIVE), ("n_trials", _AT_LEAST_ONE),
                 ("peak_memory_mb", _NON_NEGATIVE))
"""The eager timing's other numbers, each also None or absent; its median is required."""


_FEATURE_COUNTS = ("flops", "pointwise_flops", "bytes_min", "bytes_unfused", "n_ops",
                   "param_count", "param_bytes", "input_bytes", "output_bytes", "n_inputs",
                   "max_input_rank")
"""The static features' numbers: counts and sizes, each >= 0 (the feature vector is their
log10(1 + x): a negative one or a NaN would put the observation outside its space)."""


def _bad(where: str, value, rule: tuple) -> str:
    return f"{where} is {value!r}, not {rule[0]}"


class _BadValue(ValueError):
    """A value of a record that cannot be read as its field (a string where a list of strings
    belongs): said as :meth:`ProblemRecord.invalid` says a value out of range."""


def _strings(value, where: str) -> tuple[str, ...]:
    """``value``, a list of strings, as a tuple (a string would be read as its characters)."""
    if type(value) not in (list, tuple) or any(type(v) is not str for v in value):
        raise _BadValue(_bad(where, value, ("a list of strings",)))
    return tuple(value)


def _invalid_name(name) -> bool:
    """Whether a candidate's name is malformed: not a string, empty, or a composition with an
    empty part (``"compile+"``). Its parts are not checked against the catalogue: a dataset may
    hold candidates another version of the optimizers produces."""
    return type(name) is not str or not all(name.split("+"))


SAME_CONTENT = "same_content_as"
"""The metadata key naming the checksums of the earlier files of the same content (another
schema's encodings of it: :func:`upgrade_file`); :func:`same_content` reads it."""
_HEX = frozenset("0123456789abcdef")


def same_content(metadata: dict, sha256: str | None) -> bool:
    """Whether ``sha256`` (what a policy or a run recorded it was learned on) is the checksum
    of the dataset of ``metadata`` (as loaded, its ``sha256``) or of an earlier file of the
    same content (its :data:`SAME_CONTENT`)."""
    return sha256 is not None and (sha256 == metadata.get("sha256")
                                   or sha256 in (metadata.get(SAME_CONTENT) or ()))


def recorded_as_now(recorded: dict, metadata: dict | None,
                    key: str = "dataset_sha256") -> dict:
    """``recorded`` (a run's settings, as its folder keeps them) with its dataset checksum
    (``recorded[key]``) read as the checksum of the dataset of ``metadata`` where it names an
    earlier file of the same content (:func:`same_content`): what a resumed run compares with
    its settings now. ``recorded`` is not changed."""
    old = recorded.get(key) if isinstance(recorded, dict) else None
    if metadata is None or old is None or old == metadata.get("sha256") \
            or not same_content(metadata, old):
        return recorded
    return {**recorded, key: metadata.get("sha256")}


def _invalid_metadata(metadata: dict) -> str | None:
    """The first metadata value that would fail far from the file: the recording's
    tolerance (null, or a mapping whose ``atol`` and ``rtol`` are numbers >= 0), the
    checksums of the earlier files of its content (null, or a list of sha256s) and the
    dataset's default optimizer (null, or one the backends accept: a reference optimizer's
    name or ``"llm:<model>"``)."""
    tolerance = metadata.get("tolerance")
    if tolerance is not None:
        if type(tolerance) is not dict:
            return _bad("metadata.tolerance", tolerance,
                        ("a mapping of atol and rtol (numbers >= 0)",))
        for name in ("atol", "rtol"):
            value = tolerance.get(name)
            if value is not None and not _NON_NEGATIVE[1](value):
                return _bad(f"metadata.tolerance.{name}", value, _NON_NEGATIVE)
    same = metadata.get(SAME_CONTENT)
    if same is not None and (type(same) is not list or not all(
            type(x) is str and len(x) == 64 and set(x) <= _HEX for x in same)):
        return _bad(f"metadata.{SAME_CONTENT}", same, ("a list of sha256s (64 hexadecimal "
                                                       "digits each)",))
    named = metadata.get("default_optimizer")
    if named is not None:
        from autoprofiler_env.optimizers import REFERENCE_OPTIMIZERS

        if type(named) is not str or not (named in REFERENCE_OPTIMIZERS or (
                named.startswith("llm:") and len(named) > 4)):
            return _bad("metadata.default_optimizer", named,
                        ((f"null or an optimizer's name ({', '.join(REFERENCE_OPTIMIZERS)} or "
                          "'llm:<model>')"),))
    return None


def _invalid_outcome(where: str, o: Outcome) -> str | None:
    if type(o.transformation) is not str:
        return _bad(f"{where}.transformation", o.transformation, ("a string",))
    if type(o.correct) is not bool:
        return _bad(f"{where}.correct", o.correct, ("true or false",))
    if o.error_kind is not None and type(o.error_kind) is not str:
        return _bad(f"{where}.error_kind", o.error_kind, ("a string or null",))
    for name, rule in _OUTCOME_VALUES:
        value = getattr(o, name)
        if value is not None and not rule[1](value):
            return _bad(f"{where}.{name}", value, rule)
    if o.correct and o.speedup is None:
        return f"{where} is correct but has no speedup"
    needed = o.tolerance_needed
    if needed is not None:
        if type(needed) is not dict:
            return _bad(f"{where}.tolerance_needed", needed,
                        ("null or a mapping of dtype to tolerance",))
        for dtype, value in needed.items():
            if type(dtype) is not str or not _NON_NEGATIVE_OR_INF[1](value):
                return _bad(f"{where}.tolerance_needed[{dtype!r}]", value, _NON_NEGATIVE_OR_INF)
    return None


def _invalid_metrics(record: ProblemRecord, kinds: dict[str, tuple],
                     checked: dict[tuple, Callable]) -> str | None:
    """The first kernel metric of ``record`` that is not a finite number or a string, or that
    is a number where the file has it as a string elsewhere or the reverse (``kinds``: each
    metric's kind, value and place as first seen, over the whole file), said; None when all
    are. (Hundreds of thousands of values a file: the places are said only on an error.)

    A kernel whose metrics have the names and value types of one checked before (``checked``,
    over the whole file: the KernelBench file's 30,075 kernels have 14 such signatures)
    agrees with ``kinds`` as that one did, and only its numbers' finiteness is left to check:
    ``math.fsum`` of them is finite only where each is, and raises for an int or a sum beyond
    a float's range (the kernel is then checked value by value, as a new signature is)."""
    for section, profile in record.profiles.items():
        for i, kernel in enumerate(profile.kernels):
            values = tuple(kernel.metrics.values())
            signature = (tuple(kernel.metrics), tuple(map(type, values)))
            numbers = checked.get(signature)
            if numbers is not None:
                try:
                    if math.isfinite(math.fsum(numbers(values))):
                        continue
                except (OverflowError, ValueError):  # beyond a float's range; inf - inf
                    pass
            why = _invalid_kernel_metrics(record.uri, section, i, kernel.metrics, kinds)
            if why is not None:
                return why
            if numbers is None:  # passed: strings, ints and floats (not a bool, None, a list)
                at = [j for j, kind in enumerate(signature[1]) if kind is not str]
                checked[signature] = (itemgetter(*at) if len(at) > 1 else
                                      (lambda v, j=at[0]: (v[j],)) if at else lambda v: ())
    return None


def _invalid_kernel_metrics(uri: str, section: str, i: int, metrics: dict,
                            kinds: dict[str, tuple]) -> str | None:
    """:func:`_invalid_metrics` of one kernel, value by value."""
    for metric, value in metrics.items():
        kind = type(value)  # ncu's value: a number, or a string (an enumeration)
        if kind is not str:
            if not (math.isfinite(value) if kind is float else is_finite_number(value)):
                return _bad(_metric_place(section, i, metric), value,
                            ("a finite number or a string (ncu's value)",))
            kind = float
        seen = kinds.get(metric)
        if seen is None:
            kinds[metric] = (kind, value, uri, section, i)
        elif seen[0] is not kind:
            return (f"{_metric_place(section, i, metric)} is {value!r} and "
                    f"{seen[2]}'s {_metric_place(*seen[3:], metric)} is {seen[1]!r}: "
                    "a metric is a number in every kernel or a string in every kernel")
    return None


def _kernel_place(section: str, kernel: int) -> str:
    return f"profiles[{section!r}].kernels[{kernel}]"


def _metric_place(section: str, kernel: int, metric: str) -> str:
    return f"{_kernel_place(section, kernel)}.metrics[{metric!r}]"


def _invalid_sections(sections) -> str | None:
    """What is wrong with a dataset's ``sections`` (the environment's actions), said; None
    when it is a non-empty list of distinct section names."""
    if type(sections) is not list or not sections:
        return f"{str(sections)[:60]!r}, not a non-empty list of section names"
    bad = next((x for x in sections if type(x) is not str or not x), None)
    if bad is not None:
        return f"a list holding {bad!r}, not a section's name"
    twice = next((x for i, x in enumerate(sections) if x in sections[:i]), None)
    if twice is not None:
        return f"a list naming {twice!r} twice (each section is one action)"
    return None


def _invalid_kernel(where: str, kernel: KernelProfile) -> str | None:
    """What is wrong with a profiled kernel's own fields, said with ``where``; None when they
    are as ncu reports them (its ID a count, its block and grid ncu's text, its duration and
    replay passes null or in range, its metrics a mapping)."""
    i, d, n = kernel.id, kernel.duration_ns, kernel.passes  # 30,000 kernels: the usual first
    if (type(i) is int and i >= 0 and type(kernel.block) is str and type(kernel.grid) is str
            and (d is None or type(d) is float and 0 <= d < math.inf)
            and (n is None or type(n) is int and n >= 0) and type(kernel.metrics) is dict):
        return None
    for name, (what, test), nullable in _KERNEL_VALUES:
        value = getattr(kernel, name)
        if not (test(value) or (nullable and value is None)):
            return _bad(f"{where}.{name}", value, (f"null or {what}" if nullable else what,))
    if type(kernel.metrics) is not dict:
        return _bad(f"{where}.metrics", kernel.metrics, ("a mapping of metric name to value",))
    return None


def _invalid_cost(where: str, cost: ProfileCost) -> str | None:
    for name, rule in _COST_VALUES:
        value = getattr(cost, name)
        if not rule[1](value):
            return _bad(f"{where}.{name}", value, rule)
    return None


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

    def judged(self, tolerance, recorded=None) -> Outcome:
        """This outcome under another tolerance regime (a preset name or a number).

        A regime no stricter than the recording's keeps a correct outcome; a stricter one
        decides from ``tolerance_needed``, or from ``max_abs_error`` where that alone
        suffices (``|c - r| / (1 + |r|) <= |c - r|``). An incorrect outcome stays incorrect.

        Raises:
            NotRecordedError: the record cannot decide it (it was recorded before the judge
                stored ``tolerance_needed``, or the regime is looser than the recording's).
        """
        from autoprofiler_env.harness.tolerance import DEFAULT, passes, resolve

        regime, base = resolve(tolerance), resolve(recorded or DEFAULT)
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
    outcomes: dict[str, dict[str, Outcome]] = field(default_factory=dict)  # optimizer, candidate
    llm_outcomes: dict[str, dict[str, list[Outcome]]] = field(default_factory=dict)
    modelled_costs: tuple[str, ...] = ()  # sections (and "set:NAME") whose cost is modelled
    transformations: tuple[str, ...] = ()  # the applicable ones, by name, in catalogue order
    provenance: KernelBenchProvenance | None = None  # a KernelBench problem's file and commit

    def to_dict(self) -> dict:
        return {
            "uri": self.uri, "level": self.level, "split": self.split, "tags": list(self.tags),
            "features": self.features.to_dict(), "eager": self.eager,
            "profiles": {s: p.to_dict() for s, p in self.profiles.items()},
            "set_costs": {s: asdict(c) for s, c in self.set_costs.items()},
            "transformations": list(self.transformations),
            "outcomes": {m: {c: asdict(o) for c, o in keyed.items()}
                         for m, keyed in self.outcomes.items()},
            "llm_outcomes": {m: {k: [asdict(o) for o in reps] for k, reps in keyed.items()}
                             for m, keyed in self.llm_outcomes.items()},
            "modelled_costs": list(self.modelled_costs),
            "provenance": self.provenance.to_dict() if self.provenance is not None else None,
        }

    @classmethod
    def from_dict(cls, d: dict) -> ProblemRecord:
        return cls(
            uri=d["uri"], level=d["level"], split=d["split"], tags=_strings(d["tags"], "tags"),
            features=StaticFeatures.from_dict(
                {**d["features"], "tags": _strings(d["features"].get("tags", ()),
                                                   "features.tags")}),
            eager=d["eager"],
            profiles={s: Profile.from_dict(p) for s, p in d["profiles"].items()},
            set_costs={s: ProfileCost(**c) for s, c in d["set_costs"].items()},
            outcomes={m: {c: Outcome(**o) for c, o in keyed.items()}
                      for m, keyed in d["outcomes"].items()},
            llm_outcomes={m: {k: [Outcome(**o) for o in reps] for k, reps in keyed.items()}
                          for m, keyed in d.get("llm_outcomes", {}).items()},
            modelled_costs=tuple(d.get("modelled_costs", ())),
            transformations=tuple(d["transformations"]),
            provenance=(KernelBenchProvenance.from_dict(d["provenance"])
                        if d["provenance"] is not None else None))

    def invalid(self) -> str | None:
        """The first recorded value out of its range, said as ``field is value, not what it
        must be``; None when every value is in range.

        Checked: the level (an integer >= 1 or null), the split (train, val, test or null),
        the static features (finite counts >= 0, which the observation's feature vector
        log-scales), the eager timing (a positive, finite median; where recorded, a positive
        p20 and p80, at least one trial, a non-negative peak memory), the transformations'
        names (non-empty strings), every outcome (``outcomes[optimizer][candidate]``: the
        candidate's name non-empty, and its outcome's ``transformation``) and LLM outcome
        (positive, finite times and speedup; a correct one has a speedup; a non-negative max
        abs error and ``tolerance_needed`` per dtype, inf allowed), every profile's and set's
        cost (non-negative seconds and counts), each kernel's duration, and the provenance
        (a level, a ``.py`` file name, a sha256 of 64 hexadecimal digits, a commit or null).
        Names are not checked against the catalogue: another version's candidates load.
        """
        level = self.level
        if level is not None and (type(level) is not int or level < 1):
            return _bad("level", level, ("an integer >= 1 or null",))
        if self.split is not None and self.split not in SPLITS:
            return _bad("split", self.split, (f"one of {', '.join(SPLITS)} (or null)",))
        features = self.features
        for name in _FEATURE_COUNTS:
            value = getattr(features, name)
            if not _NON_NEGATIVE[1](value):
                return _bad(f"features.{name}", value, _NON_NEGATIVE)
        if type(features.op_histogram) is not dict:
            return _bad("features.op_histogram", features.op_histogram,
                        ("a mapping of operator category to count",))
        for category, value in features.op_histogram.items():
            if not _NON_NEGATIVE[1](value):
                return _bad(f"features.op_histogram[{category!r}]", value, _NON_NEGATIVE)
        if self.provenance is not None:
            if not isinstance(self.provenance, KernelBenchProvenance):
                return _bad("provenance", self.provenance, ("null or a KernelBench record",))
            why = self.provenance.invalid()
            if why:
                return f"provenance.{why}"
        eager = self.eager
        if type(eager) is not dict:
            return _bad("eager", eager, ("a mapping",))
        if not _POSITIVE[1](eager.get("median_ms")):
            return _bad("eager.median_ms", eager.get("median_ms"), _POSITIVE)
        for name, rule in _EAGER_VALUES:
            value = eager.get(name)
            if value is not None and not rule[1](value):
                return _bad(f"eager.{name}", value, rule)
        constant = eager.get("constant_needed")
        if constant is not None:
            if type(constant) is not dict:
                return _bad("eager.constant_needed", constant,
                            ("null or a mapping of dtype to tolerance",))
            for dtype, value in constant.items():
                if not _NON_NEGATIVE_OR_INF[1](value):
                    return _bad(f"eager.constant_needed[{dtype!r}]", value,
                                _NON_NEGATIVE_OR_INF)
        for i, name in enumerate(self.transformations):
            if type(name) is not str or not name or "+" in name:
                return _bad(f"transformations[{i}]", name,
                            ("a string naming a transformation (non-empty, without '+')",))
        for optimizer, keyed in self.outcomes.items():
            if not optimizer:
                return _bad("outcomes' optimizer", optimizer, ("an optimizer's name",))
            for candidate, outcome in keyed.items():
                where = f"outcomes[{optimizer!r}][{candidate!r}]"
                if _invalid_name(candidate):
                    return _bad(f"outcomes[{optimizer!r}]'s candidate", candidate,
                                (("a candidate's name (a non-empty string; a composition's "
                                  "parts, joined with '+', each non-empty)"),))
                why = _invalid_outcome(where, outcome)
                if why:
                    return why
                if outcome.transformation != candidate:
                    return _bad(f"{where}.transformation", outcome.transformation,
                                (f"its key {candidate!r}",))
        for model, keyed in self.llm_outcomes.items():
            for key, repeats in keyed.items():
                for i, outcome in enumerate(repeats):
                    why = _invalid_outcome(f"llm_outcomes[{model!r}][{key!r}][{i}]", outcome)
                    if why:
                        return why
        for name, cost in self.set_costs.items():
            why = _invalid_cost(f"set_costs[{name!r}]", cost)
            if why:
                return why
        for section, profile in self.profiles.items():
            why = _invalid_cost(f"profiles[{section!r}].cost", profile.cost)
            if why:
                return why
            ops, profiled = profile.ops, profile.ops_profiled
            for name, value in (("ops", ops), ("ops_profiled", profiled)):
                if value is not None and (type(value) is not int or value < 0):
                    return _bad(f"profiles[{section!r}].{name}", value,
                                ("null or a non-negative integer",))
            if ops is not None and profiled is not None and profiled > ops:
                return _bad(f"profiles[{section!r}].ops_profiled", profiled,
                            (f"at most ops ({ops})",))
            for i, kernel in enumerate(profile.kernels):
                why = _invalid_kernel(f"profiles[{section!r}].kernels[{i}]", kernel)
                if why:
                    return why
        return None


TABLES = ("strings", "metric_names", "headers", "values", "rows", "findings")
"""A schema-7 document's tables: the kernels' names and their findings' section, rule, kind
and text (``strings``), the metric names of each kernel shape (``metric_names``: a list of
names per shape), the header rows' section, label and unit (``headers``), the distinct
metric values (``values``: numbers and strings), the distinct header rows (``rows``:
``[header, value]``) and the distinct findings (``findings``: ``[section, rule, kind,
message, speedup_type, speedup_pct]``, the first four indices into ``strings``)."""

PACKED_KERNEL = ("id", "name", "block", "grid", "duration_ns", "passes", "shape", "values",
                 "rows", "findings")
"""A schema-7 kernel's fields, in order: a list, not a mapping. ``name`` indexes
``strings``, ``shape`` ``metric_names`` (the metrics' names, in order), ``values`` holds one
index into ``values`` per name, ``rows`` and ``findings`` index the tables of theirs."""


def pack(document: dict) -> dict:
    """A document whose records are as schema 5 has them (each kernel a mapping of every
    field), as schema 7 writes it: each kernel a list of :data:`PACKED_KERNEL`'s fields, its
    repeated strings, metric values, header rows and findings written once, in the
    document's :data:`TABLES`, and referred to by index. A KernelBench file's 1.05 million
    metric values are 37,000 distinct ones, its 174,000 header rows 59,000 and its 24,000
    findings 14,000. The document is not changed."""
    strings: dict = {}
    shapes: dict = {}
    headers: dict = {}
    values: dict = {}  # keyed by _key: 1, 1.0 and True stay three, -0.0 and 0.0 two
    rows: dict = {}
    findings: dict = {}

    def index(table: dict, key) -> int:  # the key's index, a new one the first time
        return table.setdefault(key, len(table))

    problems = []
    for record in document["problems"]:
        profiles = {}
        for section, profile in record["profiles"].items():
            kernels = [[
                k["id"], index(strings, k["name"]), k["block"], k["grid"], k["duration_ns"],
                k["passes"], index(shapes, tuple(k["metrics"])),
                [values.setdefault(_key(v), (len(values), v))[0]
                 for v in k["metrics"].values()],
                [index(rows, (index(headers, (m["section"], m["label"], m["unit"])),
                              m["value"])) for m in k["displayed"]],
                [index(findings, (index(strings, f["section"]), index(strings, f["rule"]),
                                  index(strings, f["kind"]), index(strings, f["message"]),
                                  f["speedup_type"], f["speedup_pct"],
                                  _key(f["speedup_pct"]))) for f in k["findings"]]]
                for k in profile["kernels"]]
            profiles[section] = {**profile, "kernels": kernels}
        problems.append({**record, "profiles": profiles})
    return {**document, "problems": problems, "strings": list(strings),
            "metric_names": [list(names) for names in shapes],
            "headers": [list(header) for header in headers],
            "values": [value for _, value in values.values()],
            "rows": [list(row) for row in rows],
            "findings": [list(finding[:6]) for finding in findings]}


class _NotAValue(NamedTuple):
    """A value of the ``values`` table that is not a finite number or a string: refused,
    with its place, by the first kernel that holds it (:func:`unpack`), whose value kinds are
    then new."""

    value: object


class _Tables(NamedTuple):
    """A schema-7 document's tables, checked and built, keyed by index (a negative or
    out-of-range index is then a KeyError, not another entry)."""

    strings: dict[int, str]
    names: dict[int, tuple[str, ...]]
    values: dict[int, object]  # a finite number or a string, or a _NotAValue
    rows: dict[int, DisplayedMetric]
    findings: dict[int, Finding]
    bad: tuple[int, ...] = ()  # the values that are _NotAValue


def _tables(document: dict) -> _Tables:
    """A schema-7 document's tables, checked and built: each distinct metric value, header
    row and finding once (one object, shared by the kernels that refer to it). Raises
    _BadValue for a table that is not a list of what it holds: a shape naming a metric twice
    (one of its values would be lost), a header row whose header is not an entry of
    ``headers`` or whose value is not ncu's text, a finding whose strings are not entries of
    ``strings`` or whose speedup is not null or a finite number >= 0 (the prompt formats it
    as one). A metric value that is not a finite number or a string is kept as
    :class:`_NotAValue`, and refused with its place by the first kernel that holds it."""
    strings, names, headers, values, rows, findings = (document.get(t) for t in TABLES)
    if type(strings) is not list or not {str}.issuperset(map(type, strings)):
        raise _BadValue(f"strings is {str(strings)[:60]!r}, not a list of strings")
    if type(names) is not list or any(type(n) is not list or any(type(m) is not str for m in n)
                                      or len(set(n)) != len(n) for n in names):
        raise _BadValue(f"metric_names is {str(names)[:60]!r}, not a list of lists of "
                        "distinct names")
    if type(headers) is not list or any(
            type(h) is not list or len(h) != 3 or any(type(x) is not str for x in h)
            for h in headers):
        raise _BadValue(f"headers is {str(headers)[:60]!r}, not a list of [section, label, "
                        "unit] rows")
    for name, table in (("values", values), ("rows", rows), ("findings", findings)):
        if type(table) is not list:
            raise _BadValue(f"{name} is {str(table)[:60]!r}, not a list")
    headers = dict(enumerate(tuple(h) for h in headers))
    strings = dict(enumerate(strings))
    # each table is checked whole (loops in C over the KernelBench file's 37k values, 59k rows
    # and 14k findings), and entry by entry only where that fails, to say which one
    bad: tuple[int, ...] = ()
    if not _holds(_values_right, values):  # each bad one said where a kernel holds it
        values = [v if type(v) is str or (type(v) in _NUMBER and is_finite_number(v))
                  else _NotAValue(v) for v in values]
        bad = tuple(i for i, v in enumerate(values) if type(v) is _NotAValue)
    if not _holds(_rows_right, rows, len(headers)):
        for i, row in enumerate(rows):
            if not (type(row) is list and len(row) == 2 and type(row[0]) is int
                    and row[0] in headers):
                raise _BadValue(f"rows[{i}] is {shown(row)}, not a [header, value] row "
                                f"(header: an index of headers' {len(headers)})")
            why = _invalid_header_value(row[1])
            if why:
                raise _BadValue(f"rows[{i}]: a header's value {why}")
    if not _holds(_findings_right, findings, len(strings)):
        for i, row in enumerate(findings):
            if not (type(row) is list and len(row) == 6
                    and all(type(x) is int and x in strings for x in row[:4])):
                raise _BadValue(f"findings[{i}] is {shown(row)}, not a [section, rule, kind, "
                                "message, speedup_type, speedup_pct] row (the first four: "
                                f"indices of strings' {len(strings)})")
            why = _invalid_speedup(row[4], row[5])
            if why:
                raise _BadValue(f"findings[{i}]: a finding's {why}")
    return _Tables(
        strings, dict(enumerate(tuple(n) for n in names)), dict(enumerate(values)),
        dict(enumerate(DisplayedMetric(*headers[h], value) for h, value in rows)),
        dict(enumerate(Finding(strings[a], strings[b], strings[c], strings[m], kind, pct)
                       for a, b, c, m, kind, pct in findings)), bad)


_NUMBER = frozenset({int, float})  # not bool: True is no metric's value
_INDEX = frozenset({int})


def _holds(check: Callable, *args) -> bool:
    """Whether ``check(*args)`` holds, False where it raises (a table of other rows: it is
    then checked entry by entry)."""
    try:
        return bool(check(*args))
    except (TypeError, ValueError, IndexError, KeyError, OverflowError):
        return False


def _finite(numbers: list) -> bool:
    """Whether ints and floats are all finite as floats: their sum is finite only where each
    is (an int beyond a float's range raises; so does a sum beyond it, and the table is then
    checked entry by entry)."""
    return math.isfinite(math.fsum(numbers))


def _values_right(values: list) -> bool:
    numbers = [v for v in values if type(v) is not str]
    return _NUMBER.issuperset(map(type, numbers)) and _finite(numbers)


def _rows_right(rows: list, n_headers: int) -> bool:
    heads = list(map(itemgetter(0), rows))
    return ({list}.issuperset(map(type, rows)) and {2}.issuperset(map(len, rows))
            and _INDEX.issuperset(map(type, heads)) and min(heads, default=0) >= 0
            and max(heads, default=0) < n_headers
            and {str}.issuperset(map(type, map(itemgetter(1), rows))))


def _findings_right(findings: list, n_strings: int) -> bool:
    refs = list(chain.from_iterable(f[:4] for f in findings))
    speedups = [f[5] for f in findings if f[5] is not None]
    return ({list}.issuperset(map(type, findings)) and {6}.issuperset(map(len, findings))
            and _INDEX.issuperset(map(type, refs)) and min(refs, default=0) >= 0
            and max(refs, default=0) < n_strings
            and {str, type(None)}.issuperset(map(type, map(itemgetter(4), findings)))
            and _NUMBER.issuperset(map(type, speedups)) and _finite(speedups)
            and min(speedups, default=0) >= 0)


def unpack(d: dict, tables: _Tables, kinds: dict[str, tuple], signatures: set) -> dict:
    """A problem record of a schema-7 document as :meth:`ProblemRecord.from_dict` takes it,
    with the document's :func:`_tables`: each kernel built as the :class:`KernelProfile` it is
    (:meth:`Profile.from_dict` takes it as it is), its values, header rows and findings the
    tables' objects. Changes ``d`` in place: it is the record just decoded.

    Each metric is a number in every kernel or a string in every kernel (``kinds``: each
    metric's kind, value and place as first seen, over the whole file); a kernel whose shape
    and value kinds are those of one checked before (``signatures``, over the whole file: the
    KernelBench file's 30,075 kernels have 14) agrees with ``kinds`` as that one did.

    Raises _BadValue for a kernel that is not a list of :data:`PACKED_KERNEL`'s fields, that
    refers to an entry of the tables by anything but an integer (a bool or a float would read
    the entry of the int it equals) or to one they do not hold, whose values are not as many
    as its shape's names, or whose metric is a number where another kernel has it as a
    string or the reverse."""
    strings, names, values, rows, findings, _ = tables
    uri = d["uri"]
    for section, profile in d["profiles"].items():
        kernels = profile["kernels"]
        for i, k in enumerate(kernels):
            if type(k) is not list or len(k) != len(PACKED_KERNEL):  # said short: can be long
                raise _BadValue(f"{_kernel_place(section, i)} is {shown(k)}, not a kernel "
                                f"as schema 7 packs it (a list of its {len(PACKED_KERNEL)} fields: "
                                f"{', '.join(PACKED_KERNEL)})")
            kernel_id, name, block, grid, duration, passes, shape, indices, shown_rows, found = k
            try:
                if not (type(indices) is list and type(shown_rows) is list
                        and type(found) is list):
                    raise TypeError  # said below
                if not (type(name) is int and type(shape) is int and _INDEX.issuperset(
                        map(type, chain(indices, shown_rows, found)))):
                    bad = next(x for x in chain((name, shape), indices, shown_rows, found)
                               if type(x) is not int)
                    raise _BadValue(f"{_kernel_place(section, i)} refers to an entry of the "
                                    f"document's tables by {shown(bad)}, not an integer")
                shape_names = names[shape]
                if len(indices) != len(shape_names):
                    raise _BadValue(f"{_kernel_place(section, i)} has {len(indices)} metric "
                                    f"values, not the {len(shape_names)} of "
                                    f"metric_names[{shape}]")
                metric_values = tuple(map(values.__getitem__, indices))
                signature = (shape, tuple(map(type, metric_values)))  # int and float: numbers
                if signature not in signatures:
                    for metric, value in zip(shape_names, metric_values):
                        if type(value) is _NotAValue:
                            raise _BadValue(_bad(_metric_place(section, i, metric), value.value,
                                                 ("a finite number or a string (ncu's value)",)))
                        kind = str if type(value) is str else float
                        seen = kinds.setdefault(metric, (kind, value, uri, section, i))
                        if seen[0] is not kind:
                            raise _BadValue(
                                f"{_metric_place(section, i, metric)} is {value!r} and "
                                f"{seen[2]}'s {_metric_place(*seen[3:], metric)} is "
                                f"{seen[1]!r}: a metric is a number in every kernel or a "
                                "string in every kernel")
                    signatures.add(signature)
                kernels[i] = KernelProfile(
                    kernel_id, strings[name], block, grid, duration, passes,
                    dict(zip(shape_names, metric_values)),
                    tuple(map(rows.__getitem__, shown_rows)),
                    tuple(map(findings.__getitem__, found)) if found else ())
            except KeyError as e:  # a negative or out-of-range index
                raise _BadValue(f"{_kernel_place(section, i)} refers to {e.args[0]!r}, which no "
                                "entry of the document's tables is") from None
            except TypeError:  # a field that should be a list of indices is not one
                raise _BadValue(f"{_kernel_place(section, i)} is not a kernel as schema 7 packs "
                                "it: its values, rows and findings are lists of indices") from None
    return d


def _invalid_header_value(value) -> str | None:
    """What is wrong with a header row's value, said after its name; None for ncu's text."""
    return None if type(value) is str else f"is {shown(value)}, not a string (ncu's text)"


def _invalid_speedup(speedup_type, speedup_pct) -> str | None:
    """What is wrong with a finding's estimate, said from the field's name; None when its
    type is null or a string and its speedup null or a number the prompt can format."""
    if speedup_type is not None and type(speedup_type) is not str:
        return f"speedup_type is {shown(speedup_type)}, not null or a string"
    if speedup_pct is not None and not _NON_NEGATIVE[1](speedup_pct):
        return f"speedup_pct is {shown(speedup_pct)}, not null or {_NON_NEGATIVE[0]}"
    return None


def _invalid_rows(record: ProblemRecord) -> str | None:
    """The first header row or finding of ``record``'s kernels whose value is wrong, said
    with its place; None when all are right. A schema-7 load checks each distinct row once
    (:func:`_tables`); this checks an older schema's records."""
    for section, profile in record.profiles.items():
        for i, kernel in enumerate(profile.kernels):
            for j, m in enumerate(kernel.displayed):
                why = _invalid_header_value(m.value)
                if why:
                    return f"profiles[{section!r}].kernels[{i}].displayed[{j}].value {why}"
            for j, f in enumerate(kernel.findings):
                why = _invalid_speedup(f.speedup_type, f.speedup_pct)
                if why:
                    return f"profiles[{section!r}].kernels[{i}].findings[{j}].{why}"
    return None


def unpack_document(document: dict) -> dict:
    """A schema-7 document as schema 5 has it: every record unpacked (:func:`unpack`), each
    kernel as its JSON mapping, the tables dropped (what a reader of schema 5, or a test that
    edits records, works on). Changes ``document`` in place. Raises _BadValue as
    :func:`unpack` does."""
    tables, kinds, signatures = _tables(document), {}, set()
    for d in document["problems"]:
        for profile in unpack(d, tables, kinds, signatures)["profiles"].values():
            profile["kernels"] = [json.loads(json.dumps(asdict(k))) for k in profile["kernels"]]
    for table in TABLES:
        del document[table]
    return document


def _key(value):
    """``value`` as a key of a table of distinct values: typed (1, 1.0 and True stay three)
    and signed (-0.0 and 0.0 stay two, which compare equal)."""
    if type(value) is float and value == 0:  # (the sign beside the value: 0.0 is not 1.0)
        return float, value, math.copysign(1.0, value)
    return type(value), value


def upgrade_v6(document: dict) -> dict:
    """A schema-6 document as schema 7 packs it (checked then as one is). Schema 6 held each
    kernel as a mapping, its metric values, header rows (``[header, value]``) and findings
    (``[section, rule, kind, message, speedup_type, speedup_pct]``, the first four indices
    into ``strings``) in the kernel: they move to the document's tables, each distinct one
    once. Changes ``document`` in place. Raises _BadValue, naming the problem and the
    kernel, for a kernel that is not a mapping of schema 6's fields, or a header row or
    finding that is not a row of the values schema 6 held (a header's value ncu's text, a
    speedup null or a finite number >= 0)."""
    values: dict = {}
    rows: dict = {}
    findings: dict = {}

    def index(table: dict, row) -> int:  # the row's index, a new one the first time
        return table.setdefault(tuple(map(_key, row)), (len(table), row))[0]

    for d in document["problems"]:
        for section, profile in d["profiles"].items():
            kernels = profile["kernels"]
            for i, k in enumerate(kernels):
                where = f"{d.get('uri')}: {_kernel_place(section, i)}"
                try:
                    if k.keys() != KERNEL_KEYS:
                        raise _BadValue(f"{where}'s keys are {sorted(k)}, not "
                                        f"{sorted(KERNEL_KEYS)}")
                    shape, metrics = k["metrics"]
                    for row in k["displayed"]:
                        if type(row) is not list or len(row) != 2:
                            raise _BadValue(f"{where}: a header row is {shown(row)}, not "
                                            "[header, value]")
                        why = _invalid_header_value(row[1])
                        if why:
                            raise _BadValue(f"{where}: a header's value {why}")
                    for row in k["findings"]:
                        if type(row) is not list or len(row) != 6:
                            raise _BadValue(f"{where}: a finding is {shown(row)}, not [section, "
                                            "rule, kind, message, speedup_type, speedup_pct]")
                        why = _invalid_speedup(row[4], row[5])
                        if why:
                            raise _BadValue(f"{where}: a finding's {why}")
                    kernels[i] = [
                        k["id"], k["name"], k["block"], k["grid"], k["duration_ns"],
                        k["passes"], shape,
                        [values.setdefault(_key(v), (len(values), v))[0] for v in metrics],
                        [index(rows, row) for row in k["displayed"]],
                        [index(findings, row) for row in k["findings"]]]
                except _BadValue:
                    raise
                except (TypeError, ValueError, KeyError, AttributeError) as e:
                    raise _BadValue(f"{where} is not a kernel as schema 6 packs it "
                                    f"({e!r})") from None
    for name, table in (("values", values), ("rows", rows), ("findings", findings)):
        document[name] = [value for _, value in table.values()]
    return document


def upgrade_v4(d: dict) -> dict:
    """A problem record of schema 4, as schema 5 has it: each profile's units once (schema 4
    held them per kernel, a quarter of a KernelBench file's JSON). Changes ``d`` in place:
    it is the record just decoded."""
    for profile in d["profiles"].values():
        units = profile.setdefault("units", {})
        for kernel in profile["kernels"]:
            units.update(kernel.pop("units", {}))
    return d


def upgrade_v3(d: dict) -> dict:
    """A problem record of schema 3, as schema 4 has it: no provenance (schema 3 held only
    the project's suite, whose URIs name its files)."""
    return {**d, "provenance": None}


def upgrade_v2(d: dict) -> dict:
    """A problem record of schema 2, as schema 3 has it: its outcomes (per transformation, the
    first reference optimizer's) become ``{"reference-v1": outcomes}`` (nothing where it had
    none), and its ``transformations`` their names in the order stored (that recording judged
    every transformation that applies, in catalogue order)."""
    outcomes = d["outcomes"]
    return {**d, "outcomes": {V1: outcomes} if outcomes else {},
            "transformations": list(outcomes)}


_UPGRADES = {SCHEMA_V4: (upgrade_v4,), SCHEMA_V3: (upgrade_v3, upgrade_v4),
             SCHEMA_V2: (upgrade_v2, upgrade_v3, upgrade_v4)}


def _upgrade(d: dict, schema: str) -> dict:
    """A problem record of ``schema``, as :data:`SCHEMA` has it."""
    for step in _UPGRADES.get(schema, ()):
        d = step(d)
    return d


def compact(profile: Profile, keep: frozenset[str]) -> Profile:
    """The profile with only the kept metrics on each kernel."""
    kernels = tuple(replace(k, metrics={m: v for m, v in k.metrics.items() if m in keep})
                    for k in profile.kernels)
    return replace(profile, kernels=kernels,
                   units={m: u for m, u in profile.units.items() if m in keep})


_pauses = {"depth": 0, "was_enabled": False}
_pauses_lock = threading.Lock()


@contextmanager
def _collector_paused():
    """Python's cyclic garbage collector paused, then as it was before the first of the
    loads running at once began: decoding a file allocates a million containers, each
    allocation burst would run a collection over all of them. (A ``gc.disable()`` made
    elsewhere while a load runs is undone when the last load ends.)"""
    with _pauses_lock:
        if _pauses["depth"] == 0:
            _pauses["was_enabled"] = gc.isenabled()
            gc.disable()
        _pauses["depth"] += 1
    try:
        yield
    finally:
        with _pauses_lock:
            _pauses["depth"] -= 1
            if _pauses["depth"] == 0 and _pauses["was_enabled"]:
                gc.enable()


@dataclass(frozen=True)
class DatasetFile:
    """The file's content, checked: metadata, sections and problem records by URI."""

    metadata: dict
    sections: tuple[str, ...]
    problems: dict[str, ProblemRecord]

    def save(self, path: Path, same_content_as: list[str] | None = None) -> str:
        """Writes atomically; returns the checksum it stored. The metadata's ``sha256`` (the
        file it was loaded from) is not written, nor its :data:`SAME_CONTENT`, unless given
        (``same_content_as``: only :func:`upgrade_file` knows the content is the same, where
        a dataset changed and saved would otherwise still claim it)."""
        metadata = {k: v for k, v in self.metadata.items() if k not in ("sha256", SAME_CONTENT)}
        if same_content_as:
            metadata[SAME_CONTENT] = list(same_content_as)
        document = json.dumps(pack({"metadata": metadata, "sections": list(self.sections),
                                    "problems": [r.to_dict() for r in self.problems.values()]}),
                              separators=(",", ":")).encode()
        checksum = hashlib.sha256(document).hexdigest()
        header = json.dumps({"schema": SCHEMA, "sha256": checksum}).encode()
        write_atomic(Path(path), gzip.compress(header + b"\n" + document, mtime=0))
        return checksum

    @classmethod
    @_collector_paused()  # it builds ~1M objects, none of them garbage: twice as fast
    def load(cls, path: Path) -> DatasetFile:
        """Reads and checks a dataset file.

        A file of an older schema (6, 5, 4, 3 or 2) is checked as stored (its checksum covers its
        own bytes), then converted (:func:`_upgrade`).

        Raises:
            DatasetError: missing or unreadable; corrupted (not gzip, a damaged or truncated
                stream, a header that is not JSON, a checksum mismatch); a schema other than
                7, 6, 5, 4, 3 or 2; a malformed record (a kernel naming an entry its tables do
                not hold); or a value out of range (:meth:`ProblemRecord.invalid`; a kernel metric
                that is not a finite number or a string, or is a number in one kernel and a
                string in another; a header row's value that is not a string, or a finding's
                speedup that is not a finite number >= 0). The message names the file (and
                the problem and field) and says what to do.
        """
        path = Path(path)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise DatasetError(f"no dataset file at {path}") from None
        except IsADirectoryError:
            raise DatasetError(f"{path} is a folder, not a dataset file (a recording? build one "
                               "from it: `autoprofiler dataset build --recording DIR --complete "
                               "--out FILE`)") from None
        except OSError as e:
            raise DatasetError(f"cannot read the dataset file {path}: {e}") from e
        try:  # any damage to the gzip stream (header, body, CRC, length) or to the header line
            head, _, document = gzipped.decompress(raw).partition(b"\n")
            header = json.loads(head)
        except (zlib.error, OSError, EOFError, ValueError,  # BadGzipFile is an OSError
                RecursionError) as e:
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise DatasetError(f"{path} is corrupted: not a readable dataset (gzipped JSON): "
                               f"{reason}; {_REPAIR}") from e
        schema = header.get("schema") if isinstance(header, dict) else None
        if schema not in READABLE:
            raise DatasetError(f"{path} has schema {schema!r}; this version reads {SCHEMA!r} "
                               f"(and {', '.join(map(repr, READABLE[1:]))}): build it again "
                               "with `autoprofiler dataset build`")
        actual = hashlib.sha256(document).hexdigest()
        if header.get("sha256") != actual:
            raise DatasetError(f"{path} is corrupted: its checksum is {actual[:12]}..., the "
                               f"file says {str(header.get('sha256'))[:12]}...; {_REPAIR}")
        uri = None
        try:
            body = json.loads(document)
            packed = schema in (SCHEMA, SCHEMA_V6)  # else each kernel is stored whole
            tables = _tables(upgrade_v6(body) if schema == SCHEMA_V6 else body) if packed \
                else None
            kinds: dict[str, tuple] = {}  # each metric is a number everywhere, or a string
            signatures: set = set()  # the kernels' shapes and value kinds checked (unpack)
            problems = {}
            for d in body["problems"]:
                uri = d["uri"]
                if uri in problems:
                    raise ValueError("it is recorded twice")
                if packed:
                    d = unpack(d, tables, kinds, signatures)
                problems[uri] = ProblemRecord.from_dict(_upgrade(d, schema))
            uri = None
            if packed and tables.bad:  # one no kernel holds (those held were said there)
                raise _BadValue(f"values[{tables.bad[0]}] is "
                                f"{shown(tables.values[tables.bad[0]].value)}, not a finite "
                                "number or a string (ncu's value; no kernel holds it)")
            metadata = {**body["metadata"], "sha256": actual}
            sections = body["sections"]
        except _BadValue as e:  # a record's value, or the document's tables
            where = f"{uri}: " if uri is not None else ""
            raise DatasetError(f"{path}: {where}{e}; the file was written with a bad value: "
                               f"{_REPAIR}") from e
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            where = f"the record of {uri}" if uri is not None else "its document"
            raise DatasetError(f"{path}: {where} is malformed: {e!r}; {_REPAIR}") from e
        why = _invalid_metadata(metadata)
        if why is not None:
            raise DatasetError(f"{path}: {why}; the file was written with a bad value: "
                               f"{_REPAIR}")
        why = _invalid_sections(sections)
        if why is not None:
            raise DatasetError(f"{path}: sections is {why}; {_REPAIR}")
        checked: dict[tuple, Callable] = {}  # the kernels' signatures (_invalid_metrics)
        for uri, record in problems.items():
            why = record.invalid() or (None if packed else _invalid_metrics(record, kinds, checked)
                                       or _invalid_rows(record))
            if why is not None:
                raise DatasetError(f"{path}: {uri}: {why}; the file was written with a bad "
                                   f"value: {_REPAIR}")
            missing = [s for s in sections if s not in record.profiles]
            if missing:  # a build leaves out a problem without every section's evidence
                raise DatasetError(
                    f"{path}: {uri}: profiles lacks the section {missing[0]!r} ({len(missing)} "
                    f"of the dataset's {len(sections)} sections missing; a build keeps only "
                    f"the problems with every section's profile); {_REPAIR}")
        return cls(metadata, tuple(sections), problems)


_HEADER_BYTES = 1 << 20


def schema_of(path: Path) -> str | None:
    """The schema a dataset file's header names (None where it names none); reads only the
    header. Raises DatasetError as :meth:`DatasetFile.load` does for a file it cannot read."""
    path = Path(path)
    try:
        with gzip.open(path, "rb") as f:
            line = f.readline(_HEADER_BYTES)  # a header is a few kB: no newline, no header
        header = json.loads(line) if line.endswith(b"\n") else None
        if header is None:
            raise ValueError(f"no header line within its first {_HEADER_BYTES} bytes")
    except FileNotFoundError:
        raise DatasetError(f"no dataset file at {path}") from None
    except (zlib.error, OSError, EOFError, ValueError, RecursionError) as e:
        raise DatasetError(f"{path} is corrupted: not a readable dataset (gzipped JSON): {e}; "
                           f"{_REPAIR}") from e
    return header.get("schema") if isinstance(header, dict) else None


def upgrade_file(path: Path, out: Path) -> str | None:
    """Writes the dataset file ``path``, of an older schema, in :data:`SCHEMA` to ``out``
    (which may be ``path``: written atomically): the same content, its metadata's
    :data:`SAME_CONTENT` naming the old file's checksum (and those it named), so that a
    policy learned on the old file, or a training run of it, is known to be of this one
    (:func:`same_content`). Returns the new file's checksum; None where ``path`` is of this
    schema already (copied to ``out`` where that is another file). Raises DatasetError as
    :meth:`DatasetFile.load` does."""
    if schema_of(path) == SCHEMA:
        DatasetFile.load(path)  # checked all the same
        if Path(out).resolve() != Path(path).resolve():
            write_atomic(Path(out), Path(path).read_bytes())  # the same bytes: a copy
        return None
    content = DatasetFile.load(path)
    earlier = [*(content.metadata.get(SAME_CONTENT) or ()), content.metadata["sha256"]]
    return content.save(out, same_content_as=earlier)
