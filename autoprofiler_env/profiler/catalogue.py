"""The catalogue of Nsight Compute sections, stored as data so that CPU-side code knows them.

It is built from ncu's own files and measurements taken on a GPU machine
(``experiments/device/probe_ncu.sh``, and the profiler study's single-section runs) with
``python -m experiments.studies.build_catalogue PROBE_DIR docs/data/profile_study_h200``.
Per section: its display name, the sets that include it, the metrics its file names (the
header's with their labels), and its replay passes measured alone on one kernel. Versioned by
ncu version.

The environment's actions are :data:`ACTION_SECTIONS`: the sections that single-GPU kernel
work uses. Left out: NVLink, C2C and NUMA sections (they describe the machine, not the
kernel), the double- and half-precision hierarchical rooflines (the suite is fp32), the
single-precision one (SpeedOfLight_RooflineChart shows the same), and PmSampling_WarpStates
(PmSampling's timeline broken down by warp state; its stall reasons are WarpStateStats').
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from autoprofiler_env.errors import UnknownSectionError

DATA_DIR = Path(__file__).parent / "data"
NCU_VERSION = "2025.3.1"

ACTION_SECTIONS: tuple[str, ...] = (
    "SpeedOfLight", "LaunchStats", "Occupancy", "WorkloadDistribution",
    "MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Chart", "MemoryWorkloadAnalysis_Tables",
    "ComputeWorkloadAnalysis", "SchedulerStats", "WarpStateStats", "InstructionStats",
    "SourceCounters", "PmSampling", "SpeedOfLight_RooflineChart",
    "SpeedOfLight_HierarchicalTensorRooflineChart",
)
"""The sections an agent may collect, in the order of the action space."""


@dataclass(frozen=True)
class Section:
    """One ncu section.

    Attributes:
        id: the identifier (``--section ID``).
        display_name: as ncu's report shows it (the details page's "Section Name").
        sets: the section sets that include it (basic, detailed, full, ...).
        header: (label, metric) pairs the section shows first: its key metrics.
        metrics: every metric its file names (header, body, and the extra ones its rules read).
        collected: the metrics a run of it alone actually returned on the H200, less those that
            every section's run returns (:attr:`Catalogue.always_collected`); empty if it was
            not measured.
        passes: replay passes measured when it is collected alone on one simple kernel.
        alone_s: seconds of that whole ncu run on a compiled CUDA program.
    """

    id: str
    display_name: str
    sets: tuple[str, ...]
    header: tuple[tuple[str, str], ...]
    metrics: tuple[str, ...]
    passes: int | None
    alone_s: float | None
    collected: tuple[str, ...] = ()


@dataclass(frozen=True)
class Catalogue:
    ncu_version: str
    gpu: str
    sections: dict[str, Section]
    sets: dict[str, tuple[str, ...]]
    set_passes: dict[str, int]
    always_collected: tuple[str, ...] = ()

    def section(self, section_id: str) -> Section:
        try:
            return self.sections[section_id]
        except KeyError:
            from difflib import get_close_matches

            near = get_close_matches(str(section_id), list(self.sections), n=1)
            raise UnknownSectionError(
                f"unknown section {section_id!r}"
                + (f" (did you mean {near[0]}?)" if near else "")
                + (f" ({section_id!r} is one of ncu's sets, not a section: its sections are "
                   f"{', '.join(self.sets[section_id])})" if section_id in self.sets else "")
                + f"; ncu {self.ncu_version} has: {', '.join(sorted(self.sections))}") from None

    def by_display_name(self, name: str) -> Section | None:
        for s in self.sections.values():
            if s.display_name == name or s.id == name:
                return s
        return None

    def validate(self, section_ids) -> list[str]:
        """The ids, checked; raises UnknownSectionError naming the valid ones."""
        return [self.section(s).id for s in section_ids]


# -- building from ncu's files ------------------------------------------------------------------

_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|([A-Za-z_][\w.]*)|([{}:])|(-?[\d.]+)|#[^\n]*')


def parse_text_proto(text: str) -> dict:
    """A minimal reader of protobuf's text format (what .section files are): each field maps to
    the list of its values; a message is a dict, a scalar a string."""
    tokens = [m.group(1) if m.group(1) is not None else m.group(2) or m.group(3) or m.group(4)
              for m in _TOKEN.finditer(text) if not m.group(0).startswith("#")]
    position = 0

    def message(end: str | None) -> dict:
        nonlocal position
        fields: dict[str, list] = {}
        while position < len(tokens):
            key = tokens[position]
            if key == end:
                position += 1
                return fields
            position += 1
            if tokens[position] == ":":
                position += 1
            if tokens[position] == "{":
                position += 1
                fields.setdefault(key, []).append(message("}"))
            else:
                fields.setdefault(key, []).append(tokens[position])
                position += 1
        return fields

    return message(None)


def _metric_names(node) -> list[str]:
    names = []
    if isinstance(node, dict):
        for key, values in node.items():
            for v in values:
                if key == "Name" and isinstance(v, str) and "__" in v:
                    names.append(v)
                else:
                    names.extend(_metric_names(v))
    return names


def _supports_cc90(metric: dict) -> bool:
    for flt in metric.get("Filter", []):
        items = flt.get("Items", [])
        if items and not any(int(i.get("MinArch", ["CC_0"])[0][3:]) <= 90
                             <= int(i.get("MaxArch", ["CC_999"])[0][3:]) for i in items):
            return False
    return True


def _measured_metrics(study_dir: Path) -> tuple[dict[str, set[str]], set[str]]:
    """Per section, the metric columns its run alone returned (the profiler study's
    ``section-<id>`` runs), and those that every run returned."""
    from autoprofiler_env.profiler.parse import parse_raw
    from autoprofiler_env.profiler.runner import NcuRun

    per_section = {}
    for directory in sorted(study_dir.glob("section-*")):
        run = NcuRun.load(directory)
        per_section[run.sections[0]] = {m for k in parse_raw(run.raw_csv).values()
                                        for m in k["metrics"]}
    common = set.intersection(*per_section.values()) if per_section else set()
    return per_section, common


def build(probe_dir: Path, study_dir: Path | None = None) -> dict:
    """The catalogue's JSON from a probe folder (see experiments/device/probe_ncu.sh) and,
    optionally, the profiler study's runs (for the metrics each section really returns)."""
    sections_dir = next(p for p in probe_dir.rglob("SpeedOfLight.section")).parent
    passes = {(r["kind"], r["name"]): r for r in csv.DictReader(
        (probe_dir / "section_passes.csv").open())}
    sections = {}
    for path in sorted(sections_dir.glob("*.section")):
        proto = parse_text_proto(path.read_text())
        sid = proto["Identifier"][0]
        header = tuple((m["Label"][0], m["Name"][0]) for h in proto.get("Header", [])
                       for m in h.get("Metrics", []) if "Label" in m and _supports_cc90(m))
        measured = passes.get(("section", sid), {})
        sections[sid] = Section(
            id=sid, display_name=proto["DisplayName"][0],
            sets=tuple(s["Identifier"][0] for s in proto.get("Sets", [])),
            header=header, metrics=tuple(dict.fromkeys(_metric_names(proto))),
            passes=int(measured["passes"]) if measured.get("passes") else None,
            alone_s=int(measured["ms"]) / 1000 if measured.get("ms") else None)
    measured, common = _measured_metrics(study_dir) if study_dir else ({}, set())
    for sid, names in measured.items():
        sections[sid] = Section(**{**asdict(sections[sid]),
                                   "collected": tuple(sorted(names - common))})
    sets: dict[str, list[str]] = {}
    for s in sections.values():
        for name in s.sets:
            sets.setdefault(name, []).append(s.id)
    version = re.search(r"Version (\S+)", (probe_dir / "ncu_version.txt").read_text()).group(1)
    return {
        "schema": 1, "ncu_version": version.rsplit(".", 1)[0] if version.count(".") > 2
        else version, "gpu": "NVIDIA H200",
        "sections": {k: asdict(v) for k, v in sections.items()},
        "sets": {k: sorted(v) for k, v in sorted(sets.items())},
        "set_passes": {name: int(r["passes"]) for (kind, name), r in passes.items()
                       if kind == "set" and r["passes"]},
        "always_collected": sorted(common),
    }


@lru_cache(maxsize=4)
def load_catalogue(ncu_version: str = NCU_VERSION) -> Catalogue:
    """The stored catalogue of one ncu version."""
    path = DATA_DIR / f"sections-ncu-{ncu_version}.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        known = sorted(p.stem.removeprefix("sections-ncu-") for p in DATA_DIR.glob("*.json"))
        raise UnknownSectionError(f"no section catalogue for ncu {ncu_version}; stored: "
                                  f"{', '.join(known)}") from None
    sections = {k: Section(**{**v, "sets": tuple(v["sets"]),
                              "header": tuple(map(tuple, v["header"])),
                              "metrics": tuple(v["metrics"]),
                              "collected": tuple(v.get("collected", ()))})
                for k, v in data["sections"].items()}
    return Catalogue(data["ncu_version"], data["gpu"], sections,
                     {k: tuple(v) for k, v in data["sets"].items()}, data["set_passes"],
                     tuple(data.get("always_collected", ())))
