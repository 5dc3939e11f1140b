"""The dataset format and its replay, built from the profiles recorded on the H200."""

import gzip
import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from autoprofiler_env.dataset import Dataset, DatasetFile
from autoprofiler_env.dataset.build import build_from_folders, kept_metrics
from autoprofiler_env.errors import DatasetError, NotRecordedError
from autoprofiler_env.optimizers.reference import ReferenceOptimizer
from autoprofiler_env.problems import load_problem
from autoprofiler_env.profiler import NcuRun, profiles_from_run

DATA = Path(__file__).parents[1] / "docs" / "data"
STUDY = DATA / "profile_study_h200"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("dataset") / "study.json.gz"
    build_from_folders(STUDY, DATA / "recording_h200" / "reference.jsonl").save(path)
    return path


@pytest.fixture(scope="module")
def ds(saved):
    return Dataset.load(saved)


def test_the_study_builds_a_complete_dataset(ds):
    info = ds.info()
    assert info["problems"] == 12 and info["complete"] and info["profiles"] == 12 * 15
    assert info["metadata"]["gpu"] == "NVIDIA H200" and len(info["metadata"]["sha256"]) == 64
    record = ds.record("problem://autoprofiler/v1/level1/matmul_4096x4096x4096")
    assert record.eager["median_ms"] > 2.0 and record.features.flops == 2 * 4096 ** 3
    for profile in record.profiles.values():
        for kernel in profile.kernels:
            assert set(kernel.metrics) <= kept_metrics()


def test_a_single_section_replays_as_recorded(ds):
    uri = "problem://autoprofiler/v1/level1/relu_16384x16384"
    alone = ds.profile(uri, ["WarpStateStats"])
    assert alone == ds.record(uri).profiles["WarpStateStats"]


def test_merged_profile_has_every_sections_evidence_and_summed_cost(ds):
    uri = "problem://autoprofiler/v1/level3/resnet_basic_block_32x64x56x56"
    a, b = ds.profile(uri, ["SpeedOfLight"]), ds.profile(uri, ["WarpStateStats"])
    both = ds.profile(uri, ["WarpStateStats", "SpeedOfLight"])  # order does not matter
    assert both.sections == ("SpeedOfLight", "WarpStateStats")
    assert both == ds.profile(uri, ["SpeedOfLight", "WarpStateStats", "SpeedOfLight"])
    assert len(both.kernels) == len(a.kernels) == 9
    assert both.cost.passes == a.cost.passes + b.cost.passes == 19
    assert both.cost.replay_s == pytest.approx(a.cost.replay_s + b.cost.replay_s)
    k = both.kernels[0]
    assert set(a.kernels[0].metrics) | set(b.kernels[0].metrics) == set(k.metrics)
    assert len(k.findings) == len(a.kernels[0].findings) + len(b.kernels[0].findings)
    assert ds.profile(uri, []).sections == ()


def test_replayed_evidence_leads_to_the_live_choice():
    """For every recorded subset run (5 subsets x 12 problems), the reference optimizer
    chooses the same transformation from the merged single-section profiles as from the
    profile of the real run with those sections."""
    ds = Dataset(build_from_folders(STUDY, DATA / "recording_h200" / "reference.jsonl"))
    opt = ReferenceOptimizer()
    pairs = same = 0
    for directory in sorted(STUDY.glob("subset-*")):
        run = NcuRun.load(directory)
        for live in profiles_from_run(run)[0]:
            problem = load_problem(live.problem_uri)
            replayed = ds.profile(live.problem_uri, run.sections)
            pairs += 1
            same += opt.choose(problem, live)[0] == opt.choose(problem, replayed)[0]
    assert pairs == 60 and same == 60


def test_unrecorded_keys_raise(ds):
    uri = "problem://autoprofiler/v1/level1/relu_16384x16384"
    with pytest.raises(NotRecordedError, match="no recorded outcome of 'compile'"):
        ds.outcome(uri, "compile")
    with pytest.raises(NotRecordedError, match="not recorded"):
        ds.profile(uri, ["Nvlink"])
    with pytest.raises(NotRecordedError, match="no problem"):
        ds.record("problem://autoprofiler/v1/level1/nope")


def _read(path):
    head, _, document = gzip.decompress(path.read_bytes()).partition(b"\n")
    return json.loads(head), json.loads(document)


def _write(path, header, body):
    path.write_bytes(gzip.compress(json.dumps(header).encode() + b"\n"
                                   + json.dumps(body, separators=(",", ":")).encode()))


def test_corrupted_files_are_refused(saved, tmp_path):
    header, body = _read(saved)
    body["problems"][0]["eager"]["median_ms"] *= 2  # a silent edit
    _write(tmp_path / "tampered.json.gz", header, body)
    with pytest.raises(DatasetError, match="corrupted"):
        DatasetFile.load(tmp_path / "tampered.json.gz")
    body["problems"][0]["eager"]["median_ms"] /= 2  # undone: the same bytes, accepted
    _write(tmp_path / "restored.json.gz", header, body)
    assert DatasetFile.load(tmp_path / "restored.json.gz") == DatasetFile.load(saved)
    truncated = tmp_path / "truncated.json.gz"
    truncated.write_bytes(saved.read_bytes()[:1000])
    with pytest.raises(DatasetError, match="not a readable dataset"):
        DatasetFile.load(truncated)
    with pytest.raises(DatasetError, match="no dataset file"):
        DatasetFile.load(tmp_path / "missing.json.gz")
    _write(tmp_path / "old.json.gz", {**header, "schema": "autoprofiler-dataset/1"}, body)
    with pytest.raises(DatasetError, match="schema 'autoprofiler-dataset/1'.*dataset build"):
        DatasetFile.load(tmp_path / "old.json.gz")
    (tmp_path / "v1.json.gz").write_bytes(gzip.compress(json.dumps(  # schema 1: one document
        {"schema": "autoprofiler-dataset/1", **body}).encode()))
    with pytest.raises(DatasetError, match="schema 'autoprofiler-dataset/1'"):
        DatasetFile.load(tmp_path / "v1.json.gz")


REPAIR = "restore it from git or rebuild it with `autoprofiler dataset build`"


def _with_outcome(body):
    """The body's first record, given a correct outcome of 'compile' (the study has none)."""
    record = body["problems"][0]
    record["outcomes"]["compile"] = {
        "transformation": "compile", "correct": True, "error_kind": None, "median_ms": 0.5,
        "p20_ms": 0.49, "p80_ms": 0.51, "speedup": 1.25, "max_abs_error": 3e-6,
        "tolerance_needed": {"float32": 3e-6}}
    return record


def _resealed(path, body):
    """Writes ``body`` with a valid header: the checksum matches whatever it holds."""
    document = json.dumps(body, separators=(",", ":")).encode()
    _write(path, {"schema": "autoprofiler-dataset/2",
                  "sha256": hashlib.sha256(document).hexdigest()}, body)


def test_a_damaged_byte_anywhere_or_a_truncation_is_refused_as_corrupted(saved, tmp_path):
    """Whatever gzip raises (zlib.error, BadGzipFile, EOFError) is a DatasetError that says
    the file is corrupted and what to do."""
    data = saved.read_bytes()
    damaged = {}
    for offset in (0, 1, 2, 3,  # the gzip header: magic, method, flags
                   10, 11, 200, len(data) // 2, len(data) - 9,  # the deflate stream
                   len(data) - 8, len(data) - 5, len(data) - 4, len(data) - 1):  # CRC, length
        flipped = bytearray(data)
        flipped[offset] ^= 0xFF
        damaged[f"flip-{offset}"] = bytes(flipped)
    for length in (0, 5, 10, 1000, len(data) // 2, len(data) - 4, len(data) - 1):
        damaged[f"cut-{length}"] = data[:length]
    damaged["plain-json"] = json.dumps({"schema": "autoprofiler-dataset/2"}).encode()
    damaged["no-header-line"] = gzip.compress(b"\xff\xfe not json")
    for name, content in damaged.items():
        path = tmp_path / f"{name}.json.gz"
        path.write_bytes(content)
        with pytest.raises(DatasetError) as e:
            DatasetFile.load(path)
        message = str(e.value)
        assert message.startswith(f"{path} is corrupted: "), name
        assert message.endswith(f"; {REPAIR}") and "\n" not in message, name
    # the header's mtime, extra flags and OS bytes (4-9) are not checked by gzip, nor need be:
    # the content is the same, and its checksum says so
    flipped = bytearray(data)
    flipped[4] ^= 0xFF
    (tmp_path / "mtime.json.gz").write_bytes(bytes(flipped))
    assert DatasetFile.load(tmp_path / "mtime.json.gz") == DatasetFile.load(saved)


def test_dataset_info_on_a_corrupted_file_exits_2_with_one_line(saved, tmp_path):
    flipped = bytearray(saved.read_bytes())
    flipped[3] ^= 0xFF  # the flags: zlib.error before the fix
    (tmp_path / "flipped.json.gz").write_bytes(bytes(flipped))
    _, body = _read(saved)
    _with_outcome(body)["outcomes"]["compile"]["speedup"] = -1.0
    _resealed(tmp_path / "negative.json.gz", body)
    for path, why in ((tmp_path / "flipped.json.gz", "is corrupted"),
                      (tmp_path / "negative.json.gz", "speedup is -1.0")):
        out = subprocess.run([sys.executable, "-m", "experiments.cli", "dataset", "info",
                              str(path)], capture_output=True, text=True, timeout=120,
                             check=False, cwd=Path(__file__).parents[1])
        assert out.returncode == 2 and out.stdout == ""
        assert len(out.stderr.splitlines()) == 1, out.stderr
        assert out.stderr.startswith(f"autoprofiler: error: {path}") and why in out.stderr


def _set(path):
    """A mutation setting the value at ``path`` (keys and indices below a problem record)."""
    def apply(record, value):
        for key in path[:-1]:
            record = record[key]
        record[path[-1]] = value
    return apply


@pytest.mark.parametrize("where, value, says", [
    (("outcomes", "compile", "speedup"), -1.5,
     "outcomes['compile'].speedup is -1.5, not a finite number > 0"),
    (("outcomes", "compile", "speedup"), 0.0, "outcomes['compile'].speedup is 0.0"),
    (("outcomes", "compile", "speedup"), None, "outcomes['compile'] is correct but has no speedup"),
    (("outcomes", "compile", "median_ms"), math.nan, "outcomes['compile'].median_ms is nan"),
    (("outcomes", "compile", "correct"), "yes", "outcomes['compile'].correct is 'yes'"),
    (("outcomes", "compile", "max_abs_error"), -1e-3,
     "outcomes['compile'].max_abs_error is -0.001"),
    (("outcomes", "compile", "tolerance_needed"), {"float32": -1.0},
     "outcomes['compile'].tolerance_needed['float32'] is -1.0, not a number >= 0 or inf"),
    (("outcomes", "compile", "tolerance_needed"), {"float32": None},
     "outcomes['compile'].tolerance_needed['float32'] is None"),
    (("eager", "median_ms"), math.nan, "eager.median_ms is nan, not a finite number > 0"),
    (("eager", "median_ms"), -0.2, "eager.median_ms is -0.2"),
    (("eager", "p80_ms"), math.inf, "eager.p80_ms is inf"),
    (("set_costs", "full", "replay_s"), -3.0, "set_costs['full'].replay_s is -3.0"),
    (("profiles", "SpeedOfLight", "cost", "passes"), -1,
     "profiles['SpeedOfLight'].cost.passes is -1, not an integer >= 0"),
    (("profiles", "SpeedOfLight", "cost", "gpu_replay_s"), math.nan,
     "profiles['SpeedOfLight'].cost.gpu_replay_s is nan"),
    (("profiles", "SpeedOfLight", "kernels", 0, "duration_ns"), -5.0,
     "profiles['SpeedOfLight'].kernels[0].duration_ns is -5.0"),
])
def test_a_valid_checksum_over_a_bad_value_is_refused_naming_problem_field_and_value(
        saved, tmp_path, where, value, says):
    """A bad value would fail far from the file (``math domain error`` in the benchmark)."""
    _, body = _read(saved)
    record = _with_outcome(body)
    _resealed(tmp_path / "good.json.gz", body)
    assert DatasetFile.load(tmp_path / "good.json.gz").problems[record["uri"]].outcomes[
        "compile"].speedup == 1.25
    _set(where)(record, value)
    path = tmp_path / "bad.json.gz"
    _resealed(path, body)
    with pytest.raises(DatasetError) as e:
        DatasetFile.load(path)
    assert str(e.value).startswith(f"{path}: {record['uri']}: {says}")
    assert str(e.value).endswith(REPAIR) and "\n" not in str(e.value)


def test_values_at_the_edge_of_their_range_load(saved, tmp_path):
    """inf is a tolerance no regime reaches; None is a value not recorded; an incorrect
    outcome has no time; a cost may be zero."""
    _, body = _read(saved)
    record = _with_outcome(body)
    outcome = record["outcomes"]["compile"]
    outcome.update(tolerance_needed={"float32": math.inf, "float16": 0.0}, max_abs_error=None)
    record["eager"].update(p20_ms=None, p80_ms=None)
    record["set_costs"]["full"]["gpu_replay_s"] = 0.0
    record["outcomes"]["_incorrect"] = {"transformation": "_incorrect", "correct": False,
                                        "error_kind": "mismatch"}
    _resealed(tmp_path / "edge.json.gz", body)
    loaded = DatasetFile.load(tmp_path / "edge.json.gz").problems[record["uri"]]
    assert loaded.outcomes[outcome["transformation"]].tolerance_needed["float32"] == math.inf
    assert loaded.outcomes["_incorrect"].speedup is None


def test_round_trip_is_exact(ds, tmp_path):
    path = tmp_path / "again.json.gz"
    ds.content.save(path)
    assert DatasetFile.load(path) == ds.content


def test_llm_outcomes_by_section_set_with_repeats_and_an_explicit_policy(ds, tmp_path):
    import dataclasses

    import numpy as np

    from autoprofiler_env.dataset import Outcome

    uri = "problem://autoprofiler/v1/level1/relu_16384x16384"
    record = ds.record(uri)
    reps = [Outcome("llm:m", True, None, 0.4, speedup=1.25), Outcome("llm:m", False, "mismatch")]
    record = dataclasses.replace(record, llm_outcomes={"m": {
        "": [Outcome("llm:m", True, None, 0.5, speedup=1.0)],
        "SpeedOfLight+WarpStateStats": reps}})
    content = dataclasses.replace(ds.content, problems={**ds.content.problems, uri: record})
    path = tmp_path / "llm.json.gz"
    content.save(path)
    loaded = Dataset.load(path)
    assert loaded.info()["llm_outcomes"] == 3
    # the canonical key ignores order; repeats are drawn with the caller's generator
    drawn = {loaded.llm_outcome(uri, "m", ["WarpStateStats", "SpeedOfLight"],
                                rng=np.random.default_rng(s)).correct for s in range(20)}
    assert drawn == {True, False}
    with pytest.raises(NotRecordedError, match="was not recorded with sections SpeedOfLight"):
        loaded.llm_outcome(uri, "m", ["SpeedOfLight"])
    fallback = loaded.llm_outcome(uri, "m", ["SpeedOfLight", "WarpStateStats", "Occupancy"],
                                  missing="largest_recorded_subset")
    assert fallback == reps[0]
    assert loaded.llm_outcome(uri, "m", ["Occupancy"],
                              missing="largest_recorded_subset").speedup == 1.0
    with pytest.raises(NotRecordedError, match="no outcomes of the LLM optimizer"):
        loaded.llm_outcome(uri, "other", [])


# -- evidence cut out of the full set, and modelled costs ---------------------------------------

def _study_runs() -> dict[str, dict]:
    from autoprofiler_env.profiler import NcuRun, profiles_from_run

    runs: dict[str, dict] = {}
    for directory in sorted(STUDY.iterdir()):
        name = directory.name
        key = (name.removeprefix("section-") if name.startswith("section-")
               else "set:" + name.removeprefix("set-") if name.startswith("set-") else None)
        if key is None:
            continue
        for p in profiles_from_run(NcuRun.load(directory))[0]:
            runs.setdefault(p.problem_uri, {})[key] = p
    return runs


def test_a_cut_keeps_only_what_its_sections_collect():
    from autoprofiler_env.profiler.parse import cut
    from autoprofiler_env.profiler.records import ProfileCost

    full = _study_runs()["problem://autoprofiler/v1/level1/matmul_4096x4096x4096"]["set:full"]
    cost = ProfileCost(1.0, 10, 10, 0.5, 1)
    sol = cut(full, ("SpeedOfLight",), cost)
    (kernel,), (whole,) = sol.kernels, full.kernels
    assert sol.sections == ("SpeedOfLight",) and sol.cost == cost and kernel.passes == 10
    assert "sm__throughput.avg.pct_of_peak_sustained_elapsed" in kernel.metrics
    assert "smsp__pcsamp_sample_count" in whole.metrics  # SourceCounters' / WarpStateStats'
    assert "smsp__pcsamp_sample_count" not in kernel.metrics
    assert len(kernel.metrics) < len(whole.metrics) / 5
    assert {f.section for f in kernel.findings} <= {"SpeedOfLight"}
    assert {d.section for d in kernel.displayed} == {"SpeedOfLight"}


def test_the_cost_model_is_fitted_where_both_were_measured_and_says_its_error():
    from autoprofiler_env.dataset.costs import CostModel

    runs = _study_runs()
    pairs = {name: [(r[name].cost, r["set:full"].cost) for r in runs.values()]
             for name in ("SpeedOfLight", "LaunchStats", "set:basic")}
    model = CostModel.fit(pairs)
    sol = model.fractions["SpeedOfLight"]
    assert sol.problems == 12 and 0.05 < sol.replay < 0.5  # 10 of the full set's 38 passes
    assert model.fractions["LaunchStats"].replay < sol.replay / 5  # 1 pass
    assert 0 < sol.loo_median_error < sol.loo_max_error < 1
    full = next(iter(runs.values()))["set:full"].cost
    predicted = model.predict("SpeedOfLight", full, passes=10)
    assert predicted.replay_s == pytest.approx(sol.replay * full.replay_s)
    assert predicted.kernel_passes == 10 * full.n_kernels
    with pytest.raises(DatasetError, match="record it alone"):
        model.predict("WarpStateStats", full, passes=9)


def test_a_problem_with_only_the_full_set_gets_modelled_costs():
    from autoprofiler_env.dataset.build import evidence_and_costs
    from autoprofiler_env.dataset.costs import CostModel
    from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS

    runs = _study_runs()
    uri = "problem://autoprofiler/v1/level1/softmax_16384x4096"
    model = CostModel.fit({s: [(r[s].cost, r["set:full"].cost) for u, r in runs.items()
                               if u != uri] for s in (*ACTION_SECTIONS, "set:basic",
                                                      "set:detailed")})
    measured, measured_sets, none = evidence_and_costs(runs[uri], ACTION_SECTIONS, model)
    only_full = {"set:full": runs[uri]["set:full"]}
    profiles, set_costs, modelled = evidence_and_costs(only_full, ACTION_SECTIONS, model)
    assert none == () and modelled == (*ACTION_SECTIONS, "set:basic", "set:detailed")
    assert set_costs["full"] == measured_sets["full"]
    for s in ACTION_SECTIONS:  # the same evidence, a modelled cost
        assert profiles[s].kernels == measured[s].kernels
        assert profiles[s].cost.passes == measured[s].cost.passes or s == "PmSampling"
    ratio = profiles["SpeedOfLight"].cost.replay_s / measured["SpeedOfLight"].cost.replay_s
    assert 0.5 < ratio < 2


def test_a_run_alone_of_other_kernels_than_the_full_sets_gets_a_modelled_cost():
    """A batched run alone has no kernel cap: for a problem of more than MAX_KERNELS kernels
    it measured more work than the capped full-set run, so its cost is not used."""
    from dataclasses import replace

    from autoprofiler_env.dataset.build import evidence_and_costs
    from autoprofiler_env.dataset.costs import CostModel
    from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS

    runs = _study_runs()
    uri = "problem://autoprofiler/v1/level1/softmax_16384x4096"
    model = CostModel.fit({s: [(r[s].cost, r["set:full"].cost) for u, r in runs.items()
                               if u != uri] for s in ACTION_SECTIONS})
    sol = runs[uri]["SpeedOfLight"]
    longer = replace(sol, cost=replace(sol.cost, n_kernels=sol.cost.n_kernels + 100,
                                       replay_s=sol.cost.replay_s * 50))
    _, _, modelled = evidence_and_costs({**runs[uri], "SpeedOfLight": longer}, ACTION_SECTIONS,
                                        model)
    assert modelled == ("SpeedOfLight",)
    _, _, modelled = evidence_and_costs(runs[uri], ACTION_SECTIONS, model)
    assert modelled == ()


def test_complete_keeps_only_problems_with_every_candidates_outcome_and_says_why():
    from autoprofiler_env.dataset.build import build
    from autoprofiler_env.jsonlines import read_jsonl

    run_dirs = sorted(p.parent for p in STUDY.glob("section-*/run.json"))
    reference = read_jsonl(DATA / "recording_h200" / "reference.jsonl")
    study = {p["uri"] for p in NcuRun.load(STUDY / "set-full").problems}
    rows = [r for r in read_jsonl(DATA / "recording_h200" / "candidates.jsonl")
            if r["uri"] in study]
    softmax = "problem://autoprofiler/v1/level1/softmax_16384x4096"
    dropped = next(r for r in rows if r["uri"] == softmax)
    rows = [r for r in rows if r is not dropped]
    everything = build(run_dirs, reference, rows)
    assert len(everything.problems) == 12 and softmax in everything.problems
    assert everything.metadata["left_out"] == {
        u: "not the evidence of every section" for u in
        {r["uri"] for r in reference} - study}  # the rest of the suite: no profiles here
    complete = build(run_dirs, reference, rows, complete=True)
    assert set(complete.problems) == study - {softmax}
    assert complete.metadata["left_out"][softmax] == "not every candidate's outcome"


def test_costs_holding_ncus_start_up_are_modelled_or_replaced_by_a_primed_run(tmp_path):
    """The study's runs predate the driver's primer, and matmul_4096 came first in each: its
    section costs are modelled from its full set's, and its full set's cost is flagged until
    a primed run of it exists."""
    from dataclasses import replace

    from autoprofiler_env.dataset.build import build
    from autoprofiler_env.jsonlines import read_jsonl
    from autoprofiler_env.profiler.catalogue import ACTION_SECTIONS

    reference = read_jsonl(DATA / "recording_h200" / "reference.jsonl")
    run_dirs = sorted(p.parent for p in STUDY.glob("s*-*/run.json")
                      if p.parent.name.startswith(("section-", "set-")))
    matmul = "problem://autoprofiler/v1/level1/matmul_4096x4096x4096"
    content = build(run_dirs, reference, [])
    assert content.problems[matmul].modelled_costs == (*ACTION_SECTIONS, "set:basic",
                                                       "set:detailed")
    assert content.metadata["unprimed_costs"] == {matmul: ["set:full"]}
    others = [r for u, r in content.problems.items() if u != matmul]
    assert len(others) == 11 and all(r.modelled_costs == () for r in others)
    full = NcuRun.load(STUDY / "set-full")
    index = [p["uri"] for p in full.problems].index(matmul)
    primed = replace(full, status=[{"event": "primer", "s": 1.0}] + [
        r for r in full.status if r.get("index") in (None, index)])
    primed.save(tmp_path / "primed")
    again = build([*run_dirs, tmp_path / "primed"], reference, [])
    assert again.metadata["unprimed_costs"] == {}
    assert again.problems[matmul].set_costs["full"].replay_s == content.problems[
        matmul].set_costs["full"].replay_s  # (the stand-in primed run holds the same numbers)
