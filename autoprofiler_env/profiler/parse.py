"""Turning an ncu run's exported pages into :class:`Profile` records, one per problem.

The raw page (``--page raw --csv --print-units base``) gives every collected metric of every
kernel with its base unit; the details page (``--page details --csv``) gives the sections'
headers as ncu formats them and the rule results with their estimated speedups; ncu's log
gives each kernel's replay passes; the driver's status lines give each problem's replay time.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, replace

from autoprofiler_env.errors import ReportReadError
from autoprofiler_env.profiler.catalogue import Catalogue, load_catalogue
from autoprofiler_env.profiler.records import (
    DisplayedMetric,
    Finding,
    KernelProfile,
    Profile,
    ProfileCost,
)
from autoprofiler_env.profiler.runner import DURATION_METRIC, NcuRun, failed_problem, timed_out

_RANGE = re.compile(r":ap_(\d+):")
# "- 3: 0%....100% - 38 passes"; with --launch-count, "- 3 (4/65): ..."
_PROFILING = re.compile(r'==PROF== Profiling "[^"]*" - (\d+)(?: \(\d+/\d+\))?: ')
# the end of a kernel's progress: its replay finished ("100%"), then its passes
_PASSES_DONE = re.compile(r"100% - (\d+) pass")
_ID_COLUMNS = 13  # ID ... CC: the columns before the metrics on the raw page
# Not evidence about the kernel: the GPU's fixed properties, the profiler's own bookkeeping
# (replay passes, bytes it saved and restored), ncu's scratch values.
_SKIP_PREFIXES = ("device__attribute_", "profiler__", "derived_tempMetric")


@dataclass(frozen=True)
class ProfileFailure:
    """A problem the run could not profile, and why."""

    problem_uri: str
    error: str


def _number(text: str) -> float | str:
    cleaned = text.replace(",", "").strip()
    try:
        return float(cleaned)
    except ValueError:
        return text.strip()


def _rows(text: str, page: str) -> list[dict]:
    if not text.strip():
        return []
    try:
        return list(csv.DictReader(io.StringIO(text)))
    except csv.Error as e:
        raise ReportReadError(f"the {page} page is not valid CSV: {e}") from e


def _problem_index(row: dict) -> int | None:
    for key, value in row.items():
        if key and "Push/Pop_Range" in key and value:
            match = _RANGE.search(value)
            if match:
                return int(match.group(1))
    return None


def parse_raw(text: str) -> dict[int, dict]:
    """Kernel id -> {problem, name, block, grid, metrics, units} from the raw page."""
    if not text.strip():
        return {}
    try:
        table = list(csv.reader(io.StringIO(text)))
    except csv.Error as e:
        raise ReportReadError(f"the raw page is not valid CSV: {e}") from e
    if len(table) < 2 or table[0][:1] != ["ID"]:
        raise ReportReadError("the raw page has no header row starting with ID; export it "
                              "with `ncu --import R --page raw --csv --print-units base`")
    header, units = table[0], table[1]
    kernels = {}
    for row in table[2:]:
        if len(row) != len(header):
            raise ReportReadError(f"a raw-page row has {len(row)} fields, the header "
                                  f"{len(header)}: the export was cut off")
        named = dict(zip(header, row))
        metrics, metric_units = {}, {}
        for name, unit, value in zip(header[_ID_COLUMNS:], units[_ID_COLUMNS:],
                                     row[_ID_COLUMNS:]):
            if not value or value == "n/a" or name.startswith(_SKIP_PREFIXES):
                continue
            metrics[name] = _number(value)
            if unit:
                metric_units[name] = unit
        kernels[int(named["ID"])] = {
            "problem": _problem_index(named), "name": named["Kernel Name"],
            "block": named["Block Size"], "grid": named["Grid Size"],
            "metrics": metrics, "units": metric_units}
    return kernels


def parse_details(text: str, catalogue: Catalogue) -> dict[int, tuple[list, list]]:
    """Kernel id -> (displayed header metrics, findings) from the details page."""
    out: dict[int, tuple[list, list]] = {}
    for row in _rows(text, "details"):
        try:
            kernel = int(row["ID"])
        except (KeyError, TypeError, ValueError):
            raise ReportReadError(f"a details-page row's ID is {row.get('ID')!r}, not a "
                                  "kernel's; export the page again with ncu --import REPORT "
                                  "--page details --csv") from None
        displayed, findings = out.setdefault(kernel, ([], []))
        section = catalogue.by_display_name(row["Section Name"])
        section_id = section.id if section else row["Section Name"]
        if row.get("Rule Name"):
            findings.append(Finding(
                section=section_id, rule=row["Rule Name"], kind=row["Rule Type"].strip(),
                message=" ".join(row["Rule Description"].split()),
                speedup_type=row.get("Estimated Speedup Type", "").strip() or None,
                speedup_pct=_estimate(row.get("Estimated Speedup") or "")))
        elif row.get("Metric Name"):
            displayed.append(DisplayedMetric(section_id, row["Metric Name"],
                                             row.get("Metric Unit", "").strip(),
                                             row.get("Metric Value", "").strip()))
    return out


def _estimate(text: str) -> float | None:
    """A rule's estimated speedup in percent; None where ncu gives none, or gives what is not
    a finite number >= 0 (a dataset holds no other: the rule's text still says what it found)."""
    value = _number(text)
    return value if type(value) is float and math.isfinite(value) and value >= 0 else None


def parse_passes(log: str) -> dict[int, int]:
    """Kernel id -> replay passes, from ncu's ``==PROF== Profiling "k" - 3: ... - 38 passes``
    (``- 3 (4/65): ...`` when the run is capped with ``--launch-count``).

    A kernel's progress is read up to the next kernel's line, not only on its own line: ncu
    prints other lines in the middle of it (a slow launch's ``==WARNING== Launching the
    workload is taking more time than expected``, the program's own output), and the
    ``....100% - 38 passes`` then ends a later line. A kernel whose replay did not reach
    100% (ncu stopped it: ``0%....50%==PROF== Trying to shutdown ...`` then `` - 24 passes``)
    has no passes here: it was not profiled."""
    starts = list(_PROFILING.finditer(log))
    passes = {}
    for start, after in zip(starts, [*starts[1:], None]):
        done = _PASSES_DONE.search(log, start.end(), after.start() if after else len(log))
        if done:
            passes[int(start.group(1))] = int(done.group(1))
    return passes


def launch_cap(command: list[str]) -> int | None:
    """The kernels a run profiled at most (its ``--launch-count``, less the primer's launch),
    or None for a run without the cap."""
    if "--launch-count" not in command:
        return None
    return int(command[command.index("--launch-count") + 1]) - 1


def profiles_from_run(run: NcuRun, catalogue: Catalogue | None = None
                      ) -> tuple[list[Profile], list[ProfileFailure]]:
    """The run's profiles, and the problems it failed on (crashed, hung, or no kernels)."""
    catalogue = catalogue or load_catalogue()
    raw = parse_raw(run.raw_csv)
    details = parse_details(run.details_csv, catalogue)
    passes = parse_passes(run.log)
    done = {r["index"]: r for r in run.status if r.get("event") == "problem"}
    hung = failed_problem(run.status)
    stopped = any(r.get("event") == "deadline" for r in run.status)
    cap = launch_cap(run.command)
    profiles, failures = [], []
    for index, problem in enumerate(run.problems):
        uri = problem["uri"]
        status = done.get(index)
        if status is None:
            why = ("the profiled program outlasted the per-problem timeout here"
                   if index == hung and timed_out(run.status)
                   else "the profiled program hung or crashed here" if index == hung
                   else "not finished: the run's deadline stopped it" if stopped
                   else "not reached: the run stopped at an earlier problem")
            failures.append(ProfileFailure(uri, why))
            continue
        if not status.get("ok"):
            failures.append(ProfileFailure(uri, status.get("error", "failed")))
            continue
        kernels, units = [], {}
        for kid in sorted(k for k, v in raw.items() if v["problem"] == index):
            info = raw[kid]
            units.update(info["units"])
            displayed, findings = details.get(kid, ([], []))
            duration = info["metrics"].get(DURATION_METRIC)
            kernels.append(KernelProfile(
                id=kid, name=info["name"], block=info["block"], grid=info["grid"],
                duration_ns=duration if isinstance(duration, float) else None,
                passes=passes.get(kid), metrics=info["metrics"],
                displayed=tuple(displayed), findings=tuple(findings)))
        if not kernels:
            failures.append(ProfileFailure(uri, "no kernel was profiled (the forward launched "
                                                "none on the GPU, or the report lacks it)"))
            continue
        kernel_passes = [k.passes or 0 for k in kernels]
        cost = ProfileCost(
            replay_s=float(status.get("profiled_s", 0.0)), passes=max(kernel_passes),
            kernel_passes=sum(kernel_passes),
            gpu_replay_s=sum((k.passes or 0) * (k.duration_ns or 0.0) for k in kernels) / 1e9,
            n_kernels=len(kernels))
        profiles.append(Profile(uri, tuple(run.sections), tuple(kernels), cost,
                                run.ncu_version, ops=status.get("ops"),
                                ops_profiled=status.get("ops_profiled"),
                                kernels_capped=cap is not None and len(kernels) >= cap,
                                units=units))
    return profiles, failures


def cut(profile: Profile, sections: tuple[str, ...], cost: ProfileCost,
        catalogue: Catalogue | None = None) -> Profile:
    """The profile that a run with only ``sections`` would give, cut out of a run that
    collected more (ncu's full set): per kernel, the metrics those sections collect alone
    (the catalogue's ``collected``, and the ones every run returns), their header values and
    their findings. ``cost`` is what collecting ``sections`` costs (the caller knows it: the
    cut cannot). docs/profiler.md measures how well this agrees with real runs of ``sections``.
    """
    catalogue = catalogue or load_catalogue()
    keep = set(catalogue.always_collected) | {DURATION_METRIC}
    for s in sections:
        keep.update(catalogue.section(s).collected)
    wanted = set(sections)
    per_kernel = cost.passes
    kernels = tuple(replace(
        k, passes=per_kernel,
        metrics={m: v for m, v in k.metrics.items() if m in keep},
        displayed=tuple(d for d in k.displayed if d.section in wanted),
        findings=tuple(f for f in k.findings if f.section in wanted)) for k in profile.kernels)
    return replace(profile, sections=tuple(sections), kernels=kernels, cost=cost,
                   units={m: u for m, u in profile.units.items() if m in keep})
