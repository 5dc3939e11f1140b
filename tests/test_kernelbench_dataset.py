"""Datasets by name, KernelBench provenance, stratified splits, the recording order, and a
KernelBench recording built into a dataset (issue 18). The KernelBench checkout here is a
fake: the project's own suite files laid out as KernelBench lays out its levels, with the
H200 runs of the profiler study renamed to their KernelBench URIs."""

import gzip
import hashlib
import json
import warnings
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from autoprofiler_env.checksum import file_sha256
from autoprofiler_env.dataset import SCHEMA, Dataset, DatasetFile
from autoprofiler_env.dataset.format import unpack_document
from autoprofiler_env.dataset.names import SHIPPED, resolve_dataset
from autoprofiler_env.dataset.replay import DEFAULT_DATASET
from autoprofiler_env.dataset.splits import PROPORTIONS, balanced_order, stratified_splits
from autoprofiler_env.errors import (
    DatasetError,
    DatasetNotShippedError,
    ProblemNotFoundError,
    SourceMismatchError,
    UnknownDatasetError,
)
from autoprofiler_env.jsonlines import read_jsonl
from autoprofiler_env.problems.kernelbench import (
    KernelBenchCheckout,
    KernelBenchProvenance,
    identify,
)
from autoprofiler_env.profiler import NcuRun

ROOT = Path(__file__).parents[1]
DATA = ROOT / "docs" / "data"
STUDY = DATA / "profile_study_h200"
SUITE = ROOT / "autoprofiler_env" / "problems" / "suite"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
# KernelBench-format files of the fake checkout: the suite's, under KernelBench's names
LAYOUT = {
    "level1/1_Square_matmul.py": "level1/matmul_4096x4096x4096.py",
    "level1/2_Softmax.py": "level1/softmax_16384x4096.py",
    "level1/3_ReLU.py": "level1/relu_16384x16384.py",
    "level1/4_LayerNorm.py": "level1/layer_norm_16384x4096.py",
    "level2/1_Gemm_GELU_LayerNorm.py": "level2/linear_gelu_layernorm_4096x4096.py",
    "level2/2_Conv2d_BatchNorm_ReLU.py": "level2/conv2d_batchnorm_relu_32x64x112x112.py",
    "level3/1_TinyMLP.py": "level3/mlp_tiny_8layer_64x256.py",
}
SUITE_URI = {kb: "problem://autoprofiler/v1/" + suite[:-3] for kb, suite in LAYOUT.items()}
KB_URI = {kb: "problem://kernelbench/" + kb[:-3] for kb in LAYOUT}


def _in_process_features(problem):
    from autoprofiler_env.features import static_features

    return static_features(problem)


def _checkout(root: Path) -> Path:
    for kb, suite in LAYOUT.items():
        (root / "KernelBench" / kb).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SUITE / suite, root / "KernelBench" / kb)
    (root / "KernelBench" / "level1" / "5_Broken.py").write_text("x = 1\n")  # no Model
    (root / "KernelBench" / "level4").mkdir()  # not recorded
    return root


def _renamed_run(run: NcuRun, only=None) -> NcuRun:
    """The run with the fake checkout's problems (``only``: those of them) under their
    KernelBench URIs: what ncu would have saved for them."""
    by_suite = {v: KB_URI[k] for k, v in SUITE_URI.items()
                if only is None or KB_URI[k] in only}

    def renamed(row):
        return {**row, "uri": by_suite.get(row["uri"], row["uri"])} if "uri" in row else row
    primer = [] if any(r.get("event") == "primer" for r in run.status) else [
        {"event": "primer", "s": 4.0}]  # as the recorder's runs have it: every cost primed
    return replace(run, problems=[renamed(p) for p in run.problems],
                   status=primer + [renamed(r) for r in run.status])


def _recorded_reference(out: Path, uris) -> None:
    by_suite = {v: KB_URI[k] for k, v in SUITE_URI.items()}
    rows = [{**r, "uri": by_suite[r["uri"]], "wall_s": 2.5}
            for r in read_jsonl(DATA / "recording_h200" / "reference.jsonl")
            if r["uri"] in by_suite and by_suite[r["uri"]] in uris]
    with (out / "reference.jsonl").open("a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def _recorded_full(out: Path, name: str = "000-study", only=None) -> None:
    _renamed_run(NcuRun.load(STUDY / "set-full"), only).save(out / "sets" / "full" / name)


def _outcome(uri: str, name: str) -> dict:
    return {"uri": uri, "transformation": name, "correct": True, "error_kind": None,
            "candidate_ms": 0.5, "candidate_p20_ms": 0.49, "candidate_p80_ms": 0.51,
            "speedup": 1.25, "max_abs_error": 1e-5, "judge": 3, "wall_s": 11.0,
            "tolerance_needed": {"float32": 1e-5}}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A fake checkout and its prepared recording, with reference timings, the full set's run
    and the plan of every problem, but no candidates."""
    from autoprofiler_env.dataset.record.kernelbench import (
        MANIFEST,
        plan_chunk,
        prepare_manifest,
    )

    root = _checkout(tmp_path_factory.mktemp("checkout"))
    checkout = KernelBenchCheckout(root, commit=COMMIT)
    manifest = prepare_manifest(checkout, seed=0, features=_in_process_features)
    out = tmp_path_factory.mktemp("recording")
    manifest.save(out / MANIFEST)
    problems = manifest.problems_from(checkout)
    _recorded_reference(out, {p.uri for p in problems})
    _recorded_full(out)
    plans = plan_chunk(out, problems)
    return root, out, manifest, plans


def _with_candidates(out: Path, plans: dict, leave_out: set = frozenset()) -> None:
    with (out / "candidates.jsonl").open("w") as f:
        for uri, names in plans.items():
            for name in names:
                if uri not in leave_out:
                    f.write(json.dumps(_outcome(uri, name)) + "\n")


# -- names ----------------------------------------------------------------------------------

def test_a_shipped_name_a_path_and_none_resolve_to_files():
    assert resolve_dataset("suite") == DEFAULT_DATASET == SHIPPED["suite"].path
    assert resolve_dataset(None) == DEFAULT_DATASET
    assert resolve_dataset("runs/x.json.gz") == Path("runs/x.json.gz")  # loading says if not
    assert resolve_dataset(DEFAULT_DATASET) == DEFAULT_DATASET
    assert Dataset.load("suite").metadata["sha256"] == Dataset.load(DEFAULT_DATASET).metadata[
        "sha256"]


def test_the_shipped_kernelbench_dataset_is_the_committed_recordings_complete_subset():
    """Every problem of the shipped file is one of the committed manifest's, by level, file,
    sha256 and commit, in the manifest's split; every other problem of the manifest is named
    in the build's ``left_out`` (refused, or not finished yet): a recording stop's complete
    subset is what is shipped, and nothing else."""
    dataset = Dataset.load("kernelbench")
    manifest = json.loads((DATA / "recording_kernelbench_h200" / "kernelbench.json").read_text())
    by_uri = {f"problem://kernelbench/level{p['level']}/{Path(p['file']).stem}": p
              for p in manifest["problems"]}
    shipped = dataset.content.problems
    assert shipped and set(shipped) <= set(by_uri)
    for uri, record in shipped.items():
        entry = by_uri[uri]
        assert (record.provenance.level, record.provenance.file, record.provenance.sha256,
                record.provenance.commit, record.split) == (
            entry["level"], entry["file"], entry["sha256"], manifest["commit"], entry["split"])
    left_out = dataset.metadata["left_out"]
    assert set(shipped) | set(left_out) == set(by_uri) and not set(shipped) & set(left_out)
    info = dataset.info()
    assert info["kernelbench"]["problems"] == len(shipped)
    assert sum(info["kernelbench"]["left_out"].values()) == len(by_uri) - len(shipped)
    assert info["kernelbench"]["commits"] == [manifest["commit"]]
    assert dataset.metadata["gpu"] == "NVIDIA H200"


def test_every_shipped_kernelbench_problems_costs_count_its_kernels_passes():
    """No set cost of the shipped file reads 0 passes or 0 s of GPU replay where it profiled
    kernels: 41_Max_Pooling_1D's and 97_ScaledDotProductAttention's full set did (one kernel
    each, whose passes ncu's log gave after a warning), and a budget in passes was 0 there.
    Every kernel of the recording's full set runs 37 or 38 passes."""
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401  (registers the ids)

    dataset = Dataset.load("kernelbench")
    for uri, record in dataset.content.problems.items():
        costs = {**record.set_costs, **{s: p.cost for s, p in record.profiles.items()}}
        for name, cost in costs.items():
            assert cost.n_kernels >= 1 and cost.passes >= 1 and cost.gpu_replay_s > 0, (
                uri, name, cost)
            assert cost.passes <= cost.kernel_passes <= cost.passes * cost.n_kernels, (
                uri, name, cost)
        full = record.set_costs["full"]
        assert full.passes == 38 and full.kernel_passes >= 37 * full.n_kernels, (uri, full)
    pool = "problem://kernelbench/level1/41_Max_Pooling_1D"
    with pytest.warns(UserWarning, match="ill-posed here"):  # (at the recorded tolerance)
        env = gym.make("AutoProfiler-v0", dataset="kernelbench", budget_unit="passes",
                       budget=1.0)
    env.reset(options={"problem": pool})
    assert env.unwrapped.episode_budget == 38.0
    assert env.unwrapped.action_masks()[:-1].all()  # the whole full set's budget: every one


def test_an_unknown_name_is_a_typed_error_listing_the_shipped_ones():
    with pytest.raises(UnknownDatasetError, match="no dataset named 'suit': the shipped ones "
                       "are suite, kernelbench"):
        resolve_dataset("suit")
    with pytest.raises(DatasetError, match="no dataset file at"):  # path-like: a missing file
        Dataset.load("missing/dataset.json.gz")
    # a shipped file's own name, or its stem, outside its folder: the name it goes by
    with pytest.raises(UnknownDatasetError, match="the shipped h200-kernelbench.json.gz is "
                       "named 'kernelbench'"):
        Dataset.load("h200-kernelbench.json.gz")
    with pytest.raises(UnknownDatasetError, match="h200-reference.json.gz is named 'suite'"):
        resolve_dataset("h200-reference")


def test_a_name_not_shipped_yet_says_how_to_record_and_build_it(tmp_path, monkeypatch, capsys):
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401
    import autoprofiler_env.dataset.names as names
    from experiments.cli import main

    monkeypatch.setattr(names, "DATA_DIR", tmp_path)  # an install without the file
    with pytest.raises(DatasetNotShippedError) as e:
        resolve_dataset("kernelbench")
    message = str(e.value)
    assert "not shipped in this install yet (no h200-kernelbench.json.gz)" in message
    assert "autoprofiler record --source" in message and "dataset build" in message
    assert "docs/kernelbench.md" in message and "\n" not in message
    with pytest.raises(DatasetNotShippedError):
        gym.make("AutoProfiler-v0", dataset="kernelbench")
    assert main(["dataset", "info", "--dataset", "kernelbench"]) == 2
    assert "h200-kernelbench.json.gz" in capsys.readouterr().err


def test_commands_take_a_name_and_refuse_an_unknown_one_in_one_line():
    cli = [sys.executable, "-m", "experiments.cli"]
    info = subprocess.run(cli + ["dataset", "info", "--dataset", "suite"], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert info.returncode == 0 and json.loads(info.stdout)["problems"] == 96
    bad = subprocess.run(cli + ["benchmark", "--dataset", "suit", "--budgets", "0.25"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "no dataset named 'suit'" in bad.stderr


# -- provenance in the format ---------------------------------------------------------------

def _reseal(path: Path, body: dict, schema: str) -> None:
    document = json.dumps(body, separators=(",", ":")).encode()
    header = json.dumps({"schema": schema, "sha256": hashlib.sha256(document).hexdigest()})
    path.write_bytes(gzip.compress(header.encode() + b"\n" + document))


def _body(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()).partition(b"\n")[2])


def test_provenance_round_trips_and_an_older_schema_loads_without_it(study_dataset, tmp_path):
    content = DatasetFile.load(study_dataset)
    uri = next(iter(content.problems))
    provenance = KernelBenchProvenance(1, "19_ReLU.py", "ab" * 32, COMMIT)
    record = replace(content.problems[uri], provenance=provenance)
    marked = replace(content, problems={**content.problems, uri: record})
    marked.save(tmp_path / "v4.json.gz")
    loaded = DatasetFile.load(tmp_path / "v4.json.gz")
    assert loaded.problems[uri].provenance == provenance and loaded.problems == marked.problems
    assert json.loads(gzip.decompress((tmp_path / "v4.json.gz").read_bytes()).split(b"\n")[0])[
        "schema"] == SCHEMA == "autoprofiler-dataset/7"
    # schema 3 had no provenance: it loads, every record without one
    body = unpack_document(_body(tmp_path / "v4.json.gz"))
    for r in body["problems"]:
        del r["provenance"]
    _reseal(tmp_path / "v3.json.gz", body, "autoprofiler-dataset/3")
    old = DatasetFile.load(tmp_path / "v3.json.gz")
    assert all(r.provenance is None for r in old.problems.values())
    assert {u: replace(r, provenance=None) for u, r in marked.problems.items()} == old.problems
    # a malformed provenance is refused, naming the problem and the field
    body = _body(tmp_path / "v4.json.gz")
    bad = next(r for r in body["problems"] if r["uri"] == uri)
    bad["provenance"]["sha256"] = "not-a-hash"
    _reseal(tmp_path / "bad.json.gz", body, SCHEMA)
    with pytest.raises(DatasetError, match=f"{uri}: provenance.sha256 is 'not-a-hash', not 64 "
                       "hexadecimal digits"):
        DatasetFile.load(tmp_path / "bad.json.gz")


def test_a_checkout_names_problems_by_level_and_file_and_checks_their_bytes(tmp_path):
    root = _checkout(tmp_path)
    checkout = KernelBenchCheckout(root, commit=COMMIT[:7])  # the repository's root is found
    assert checkout.root == (root / "KernelBench").resolve() and checkout.commit == COMMIT[:7]
    problems, broken = checkout.problems()
    assert [p.uri for p in problems] == [KB_URI[k] for k in LAYOUT]  # level, then number
    assert [Path(e.path).name for e in broken] == ["5_Broken.py"]
    relu = next(p for p in problems if p.name == "3_ReLU")
    provenance = checkout.provenance(relu)
    assert provenance == KernelBenchProvenance(1, "3_ReLU.py", file_sha256(relu.path),
                                               COMMIT[:7])
    assert provenance.uri == relu.uri and identify(relu.path) == (1, "3_ReLU.py")
    assert checkout.problem(provenance).path == relu.path
    relu.path.write_text(relu.path.read_text() + "\n# edited\n")
    with pytest.raises(SourceMismatchError, match="is not the file recorded as KernelBench "
                       "level 1 3_ReLU.py: its sha256 is .*, the recorded one .* \\(KernelBench "
                       f"commit {COMMIT[:7]}\\)"):
        checkout.problem(provenance)
    with pytest.raises(ProblemNotFoundError, match="not a KernelBench checkout"):
        KernelBenchCheckout(tmp_path / "KernelBench" / "level1")


def test_the_commit_is_gits_only_where_git_tracks_the_files(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("no git on this machine")
    own = _checkout(tmp_path / "own")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(own)]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "x"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert KernelBenchCheckout(own).commit == head
    with pytest.raises(SourceMismatchError, match="not of the commit given"):
        KernelBenchCheckout(own, commit="fedcba9")
    # a copy inside another project's ignored folder: that project's commit is not KernelBench's
    project = tmp_path / "project"
    project.mkdir()
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(project)]
    subprocess.run(git + ["init", "-q"], check=True)
    (project / ".gitignore").write_text("/KernelBench/\n")
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "x"], check=True)
    shutil.copytree(own / "KernelBench", project / "KernelBench")
    assert KernelBenchCheckout(project / "KernelBench").commit is None


# -- splits and the recording order ---------------------------------------------------------

STRATA = {(1, "conv"): 36, (1, "pointwise"): 21, (1, "matmul"): 16, (1, "reduction"): 8,
          (1, "loss"): 1, (1, "scan"): 5, (1, "softmax"): 2, (2, "conv"): 63,
          (2, "matmul"): 37, (3, "conv"): 25, (3, "matmul"): 17, (3, "rnn"): 8}
"""Strata of the size and skew of KernelBench's levels 1-3 (a few of one, some of dozens)."""


def _strata() -> dict[str, tuple]:
    return {f"problem://x/level{lv}/{op}_{i}": (lv, op) for (lv, op), n in STRATA.items()
            for i in range(n)}


def test_splits_are_seeded_stratified_and_cover_every_problem_once():
    strata = _strata()
    splits = stratified_splits(strata, seed=0)
    assert splits == stratified_splits(dict(reversed(list(strata.items()))), seed=0)
    assert splits != stratified_splits(strata, seed=1)
    assert set(splits) == set(strata) and set(splits.values()) == {"train", "val", "test"}
    n = len(strata)
    for split, share in PROPORTIONS.items():  # 60 / 20 / 20, to one problem
        assert abs(Counter(splits.values())[split] - share * n) <= 1
    for stratum, size in STRATA.items():  # every stratum's share of each split, to one
        counts = Counter(splits[k] for k in strata if strata[k] == stratum)
        for split, share in PROPORTIONS.items():
            assert abs(counts[split] - share * size) < 1, (stratum, split, counts)
        if size >= 5:
            assert set(counts) == {"train", "val", "test"}
    with pytest.raises(ValueError, match="the pattern must deal"):
        stratified_splits(strata, pattern=("train", "dev"))


def test_the_seed_draws_where_the_deal_starts():
    """The pattern is dealt from an offset the seed draws: sha256 of "<seed>/offset", modulo
    the pattern's length. Five strata of one problem each take the pattern from there, in
    the strata's sorted order; over seeds 0-9 the first problem gets each of the splits."""
    import hashlib

    from autoprofiler_env.dataset.splits import PATTERN

    strata = {f"problem://x/level1/{op}_0": (1, op) for op in ("add", "conv", "gemm", "norm",
                                                               "relu")}
    firsts = set()
    for seed in range(10):
        offset = int(hashlib.sha256(f"{seed}/offset".encode()).hexdigest(), 16) % 5
        splits = stratified_splits(strata, seed=seed)
        assert [splits[k] for k in sorted(strata)] == [PATTERN[(offset + i) % 5]
                                                       for i in range(5)], seed
        firsts.add(splits["problem://x/level1/add_0"])
    assert firsts == {"train", "val", "test"}


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_every_prefix_of_the_recording_order_is_balanced(seed):
    strata = _strata()
    splits = stratified_splits(strata, seed=seed)
    groups = {k: (*strata[k], splits[k]) for k in strata}
    order = balanced_order(groups, seed=seed)
    assert sorted(order) == sorted(groups) and order == balanced_order(groups, seed=seed)
    assert order != balanced_order(groups, seed=seed + 1)
    cells = {"level": lambda g: g[0], "stratum": lambda g: g[:2], "split": lambda g: g[2],
             "level and split": lambda g: (g[0], g[2])}
    n = len(order)
    for name, cell in cells.items():
        whole = Counter(cell(g) for g in groups.values())
        seen: Counter = Counter()
        for k, key in enumerate(order, 1):
            seen[cell(groups[key])] += 1
            worst = max(abs(seen[c] - k * m / n) for c, m in whole.items())
            assert worst <= 2, (name, k, worst)  # within two problems of its share, always
    # the strata of one: placed, not starved to the end
    assert order.index(next(k for k in strata if strata[k] == (1, "loss"))) < n - 10


def test_the_manifest_records_strata_splits_order_and_the_files_left_out(prepared, tmp_path):
    from autoprofiler_env.dataset.record.kernelbench import RecordingManifest

    root, out, manifest, _ = prepared
    assert manifest.commit == COMMIT and manifest.levels == (1, 2, 3)
    assert {m.uri for m in manifest.problems} == set(KB_URI.values())
    assert list(manifest.skipped) == ["level1/5_Broken.py"]
    assert "does not define Model" in manifest.skipped["level1/5_Broken.py"]
    by_uri = {m.uri: m for m in manifest.problems}
    assert by_uri[KB_URI["level1/1_Square_matmul.py"]].op == "matmul"
    assert by_uri[KB_URI["level1/1_Square_matmul.py"]].provenance.sha256 == file_sha256(
        root / "KernelBench" / "level1" / "1_Square_matmul.py")
    strata = {m.uri: m.stratum for m in manifest.problems}
    assert manifest.splits == stratified_splits(strata, seed=0)
    assert [m.uri for m in manifest.problems] == balanced_order(
        {m.uri: (*m.stratum, m.split) for m in manifest.problems}, seed=0)
    assert RecordingManifest.load(out / "kernelbench.json") == manifest
    loaded = manifest.problems_from(KernelBenchCheckout(root))
    assert [(p.uri, p.split) for p in loaded] == [(m.uri, m.split) for m in manifest.problems]
    plan = json.loads((out / "plan.json").read_text())  # planned with the manifest's splits
    assert {p["uri"]: p["split"] for p in plan["problems"]} == manifest.splits
    (tmp_path / "bad.json").write_text('{"schema": "other"}')
    with pytest.raises(DatasetError, match="not a KernelBench recording's manifest"):
        RecordingManifest.load(tmp_path / "bad.json")
    with pytest.raises(DatasetError, match="prepare the recording first"):
        RecordingManifest.load(tmp_path / "kernelbench.json")


# -- recording, chunk by chunk --------------------------------------------------------------

@pytest.fixture
def on_the_h200(monkeypatch):
    """This machine taken for the H200 whose rows the fakes of the GPU parts write
    (``_recorded_reference``: a recording is one machine's), with ncu."""
    from autoprofiler_env.dataset.record import machine
    from autoprofiler_env.profiler import runner

    row = read_jsonl(DATA / "recording_h200" / "reference.jsonl")[0]
    monkeypatch.setattr(machine, "machine_info", lambda device: {
        k: row[k] for k in ("torch", "python", "device", "gpu", "cuda")})
    monkeypatch.setattr(runner, "find_ncu", lambda ncu=None: "ncu")


def _new_recording(prepared, tmp_path) -> Path:
    """A recording folder holding only the prepared manifest."""
    out = tmp_path / "rec"
    out.mkdir()
    shutil.copy(prepared[1] / "kernelbench.json", out)
    return out


def _references_recorded(out: Path):
    """A ``record_reference`` that writes the H200 recording's rows of the problems asked into
    ``out`` (the GPU part, faked)."""
    def fake_reference(problems, config, path, deadline=None):
        _recorded_reference(out, {p.uri for p in problems})
        return read_jsonl(path)

    return fake_reference


def test_work_left_for_want_of_time_before_the_deadline_is_a_stop_by_the_time_budget(
        prepared, tmp_path, monkeypatch, on_the_h200):
    """The ncu part starts nothing with too little time left (MIN_RUN_S), though the deadline
    has not passed: the recorder passes over the chunks and must say that the time budget
    stopped it, so that the command is run again (2026-12-04 on the H200: 17 s left, 21
    chunks passed over, 'stopped_by_time_budget': false). Without a budget, nothing is left."""
    import autoprofiler_env.dataset.record as record
    from autoprofiler_env.dataset.record.kernelbench import record_kernelbench

    root, _, manifest, _ = prepared
    out = _new_recording(prepared, tmp_path)
    declined = []

    def declining_ncu(problems, configs, root_, chunk, deadline=None, **kwargs):
        declined.append(len(problems))  # as with less than MIN_RUN_S left: no run started
        return 0

    monkeypatch.setattr(record, "record_reference", _references_recorded(out))
    monkeypatch.setattr(record, "record_ncu", declining_ncu)
    checkout = KernelBenchCheckout(root, commit=COMMIT)
    summary = record_kernelbench(out, checkout, chunk=4, time_budget_s=600, device="cpu",
                                 max_ops=24)
    assert sum(declined) == len(manifest.problems)  # every chunk reached, none recorded
    assert summary["needs"]["full"] == len(manifest.problems)
    assert summary["stopped_by_time_budget"]
    references = record_kernelbench(out, checkout, chunk=4, time_budget_s=600, device="cpu",
                                    max_ops=24, reference_only=True)
    assert not references["stopped_by_time_budget"]  # all it was asked for is done
    assert not record_kernelbench(out, checkout, chunk=4, device="cpu", max_ops=24,
                                  reference_only=True)["stopped_by_time_budget"]


def test_with_too_little_time_for_an_ncu_run_the_ncu_part_is_not_called(
        prepared, tmp_path, monkeypatch, on_the_h200):
    """With under MIN_RUN_S left the ncu part would start nothing: it is not called, so that
    ``timings.jsonl`` gets no line of no device time for each chunk passed over (2026-12-05
    on the H200: nine lines of 0.02 s), and the budget is still said to have stopped it."""
    import autoprofiler_env.dataset.record as record
    from autoprofiler_env.dataset.record.kernelbench import record_kernelbench
    from autoprofiler_env.dataset.record.ncu import MIN_RUN_S

    root, _, manifest, _ = prepared
    out = _new_recording(prepared, tmp_path)
    called = []

    monkeypatch.setattr(record, "record_reference", _references_recorded(out))
    monkeypatch.setattr(record, "record_ncu", lambda *args, **kwargs: called.append(1) or 0)
    checkout = KernelBenchCheckout(root, commit=COMMIT)
    summary = record_kernelbench(out, checkout, chunk=4, time_budget_s=MIN_RUN_S / 2,
                                 device="cpu", max_ops=24)
    assert not called and summary["stopped_by_time_budget"]
    assert summary["needs"]["full"] == len(manifest.problems)
    assert {r["part"] for r in read_jsonl(out / "timings.jsonl")} == {"reference"}
    record_kernelbench(out, checkout, chunk=4, time_budget_s=MIN_RUN_S * 4, device="cpu",
                       max_ops=24)
    assert len(called) == 2  # with time for a run, each chunk's ncu part is called


def test_each_chunk_records_every_part_before_the_next_and_a_stop_leaves_a_prefix(
        prepared, tmp_path, monkeypatch, on_the_h200):
    """Fakes for the GPU parts (their rows from the H200 recording); the plan is the real one,
    made on this CPU from the chunk's evidence. A stop after one problem's candidates leaves
    the order's first problems complete; the next call finishes what is left."""
    import autoprofiler_env.dataset.record as record
    import autoprofiler_env.dataset.record.kernelbench as kb
    from autoprofiler_env.dataset.record.kernelbench import record_kernelbench, recording_status

    root, _, manifest, _ = prepared
    out = _new_recording(prepared, tmp_path)
    calls = []

    def fake_reference(problems, config, path, deadline=None):
        calls.append(("reference", [p.uri for p in problems]))
        _recorded_reference(out, {p.uri for p in problems})
        return read_jsonl(path)

    def fake_ncu(problems, configs, root_, chunk, deadline=None, **kwargs):
        calls.append(("full", [p.uri for p in problems]))
        assert kwargs["max_ops"] == 24 and len(problems) <= chunk <= 4
        assert kwargs["alone"] == stepped  # the manifest's problems of a stepped op kind
        _recorded_full(out, f"{len(calls):03d}", only={p.uri for p in problems})
        return 1

    stop = {"after": 1, "candidates": 0}

    def fake_candidates(problems, path, config, warm_workers=6, deadline=None, plan=None,
                        reuse=(), timeout_s=None):
        assert timeout_s == 180  # KernelBench's own limit for a candidate
        calls.append(("candidates", [p.uri for p in problems]))
        with path.open("a") as f:
            for p in problems:
                if stop["candidates"] >= stop["after"]:
                    break
                for name in plan[p.uri]:
                    f.write(json.dumps(_outcome(p.uri, name)) + "\n")
                stop["candidates"] += 1
        return read_jsonl(path)

    real_plan = kb.plan_chunk

    def spy_plan(out_, problems, cost_model=None):
        calls.append(("plan", [p.uri for p in problems]))
        return real_plan(out_, problems, cost_model)

    monkeypatch.setattr(record, "record_reference", fake_reference)
    monkeypatch.setattr(record, "record_ncu", fake_ncu)
    monkeypatch.setattr(record, "record_candidates", fake_candidates)
    monkeypatch.setattr(kb, "plan_chunk", spy_plan)
    monkeypatch.setattr(kb, "_past", lambda deadline: stop["candidates"] >= stop["after"])
    monkeypatch.setattr(kb, "STEPPED_OPS", frozenset({"matmul"}))  # no RNN in this checkout
    stepped = {m.uri for m in manifest.problems if m.op == "matmul"}
    assert stepped and len(stepped) < len(manifest.problems)
    checkout = KernelBenchCheckout(root, commit=COMMIT)
    order = [m.uri for m in manifest.problems]
    summary = record_kernelbench(out, checkout, chunk=4, time_budget_s=60, device="cpu",
                                 max_ops=24)
    first = order[:4]
    assert [c[0] for c in calls] == ["reference", "full", "plan", "candidates"]
    assert all(c[1] == first for c in calls)  # the first chunk, whole, in the order
    assert summary["stopped_by_time_budget"] and summary["complete"] == 1
    assert summary["needs"]["candidates"] == 3 and summary["needs"]["reference"] == 3
    done = {r["uri"] for r in read_jsonl(out / "candidates.jsonl")}
    assert done == {order[0]}  # the order's first problem, complete
    stop["after"] = 99
    calls.clear()
    summary = record_kernelbench(out, checkout, chunk=4, device="cpu", max_ops=24)
    assert [c[0] for c in calls] == ["candidates", "reference", "full", "plan", "candidates"]
    assert calls[0][1] == first[1:] and calls[1][1] == order[4:]
    assert summary == {**recording_status(out, manifest), "stopped_by_time_budget": False}
    assert summary["complete"] == len(order) and not any(summary["needs"].values())
    parts = [r["part"] for r in read_jsonl(out / "timings.jsonl")]
    assert Counter(parts) == {"reference": 2, "full": 2, "plan": 2, "candidates": 3}
    calls.clear()
    assert record_kernelbench(out, checkout, chunk=4, device="cpu")["complete"] == len(order)
    assert calls == []  # nothing left: nothing runs
    row = read_jsonl(out / "candidates.jsonl")[0]  # starved beside the recorder's processes
    with (out / "candidates.jsonl").open("a") as f:
        f.write(json.dumps({**row, "correct": False, "error_kind": "out_of_memory"}) + "\n")
    status = recording_status(out, manifest)
    assert status["complete"] == len(order) - 1 and status["needs"]["candidates"] == 1
    (root / "KernelBench" / "level3" / "1_TinyMLP.py").write_text("# another file\n")
    try:
        with pytest.raises(SourceMismatchError, match="1 of the recording's 7 files differ "
                           "from the checkout's, the first level3/1_TinyMLP.py"):
            record_kernelbench(out, checkout, chunk=4, device="cpu")
    finally:
        shutil.copy(SUITE / LAYOUT["level3/1_TinyMLP.py"],
                    root / "KernelBench" / "level3" / "1_TinyMLP.py")


def test_the_reference_timings_of_every_chunk_can_come_first(prepared, tmp_path,
                                                              monkeypatch, on_the_h200):
    """``--parts reference``: every problem's reference timing, chunk by chunk, and nothing
    else (the problems the judge refuses are known before the costly parts); the next full
    call goes on from the ncu runs."""
    import autoprofiler_env.dataset.record as record
    from autoprofiler_env.dataset.record.kernelbench import record_kernelbench

    root, _, manifest, _ = prepared
    out = _new_recording(prepared, tmp_path)
    calls = []

    def fake_reference(problems, config, path, deadline=None):
        calls.append(("reference", [p.uri for p in problems]))
        _recorded_reference(out, {p.uri for p in problems})
        return read_jsonl(path)

    def fake_ncu(problems, configs, root_, chunk, deadline=None, **kwargs):
        calls.append(("full", [p.uri for p in problems]))
        return 0

    monkeypatch.setattr(record, "record_reference", fake_reference)
    monkeypatch.setattr(record, "record_ncu", fake_ncu)
    checkout = KernelBenchCheckout(root, commit=COMMIT)
    order = [m.uri for m in manifest.problems]
    summary = record_kernelbench(out, checkout, chunk=4, device="cpu", reference_only=True)
    assert calls == [("reference", order[:4]), ("reference", order[4:])]
    assert summary["needs"]["reference"] == 0 and summary["needs"]["full"] == len(order)
    calls.clear()
    assert record_kernelbench(out, checkout, chunk=4, device="cpu",
                              reference_only=True)["needs"]["full"] == len(order)
    assert calls == []  # every reference timed: nothing runs
    record_kernelbench(out, checkout, chunk=4, device="cpu", time_budget_s=60)
    assert calls[0] == ("full", order[:4])  # the chunks go on from their ncu runs


def test_each_part_of_a_chunk_can_be_spread_over_gpus(prepared, tmp_path, monkeypatch):
    """With workers, each part of a chunk is one fan-out (a unit per problem, the single-GPU
    path's rows: tests/test_record_fanout.py), the recording's judge and the stepped problems
    handed to it; the plan is made here, between the ncu runs and the candidates."""
    import autoprofiler_env.dataset.record.fanout as fanout
    import autoprofiler_env.dataset.record.kernelbench as kb
    from autoprofiler_env.dataset.record.kernelbench import record_kernelbench

    root, _, manifest, _ = prepared
    out = _new_recording(prepared, tmp_path)
    workers = object()  # the fake fan-out below is all that sees them
    calls = []

    def fake_fanout(out_, problems, workers_, parts, config=None, time_budget_s=None,
                    plan=None, reuse=(), alone=(), **kwargs):
        assert out_ == out and workers_ is workers and config.posed_at == "kernelbench"
        assert set(alone) == stepped and 0 < time_budget_s <= 600
        [part] = parts
        uris = [p.uri for p in problems]
        calls.append((part, uris))
        if part == "reference":
            _recorded_reference(out, set(uris))
        elif part == "full":
            _recorded_full(out, f"{len(calls):03d}", only=set(uris))
        else:
            assert list(plan) == uris and all(plan.values())
            with (out / "candidates.jsonl").open("a") as f:
                for uri in uris:
                    for name in plan[uri]:
                        f.write(json.dumps(_outcome(uri, name)) + "\n")
        return {}

    monkeypatch.setattr(fanout, "record_fanout", fake_fanout)
    monkeypatch.setattr(kb, "STEPPED_OPS", frozenset({"matmul"}))
    stepped = {m.uri for m in manifest.problems if m.op == "matmul"}
    order = [m.uri for m in manifest.problems]
    summary = record_kernelbench(out, KernelBenchCheckout(root, commit=COMMIT), chunk=4,
                                 time_budget_s=600, device="cpu", workers=workers)
    assert calls == [(part, chunk) for chunk in (order[:4], order[4:])
                     for part in ("reference", "full", "candidates")]
    assert summary["complete"] == len(order) and not summary["stopped_by_time_budget"]
    assert Counter(r["part"] for r in read_jsonl(out / "timings.jsonl")) == {"plan": 2}


def test_the_cli_prepares_a_manifest_once_and_refuses_parts(tmp_path):
    root = _checkout(tmp_path / "ck")
    out = tmp_path / "rec"
    cli = [sys.executable, "-m", "experiments.cli", "record", "--source", str(root), "--out",
           str(out)]
    # a copy, not a git checkout: its commit must be given (reviewed: a manifest naming none
    # was written, and only then was --commit asked for, which a prepared recording refuses)
    unnamed = subprocess.run(cli + ["--prepare", "--levels", "1"], capture_output=True,
                             text=True, cwd=ROOT, timeout=300)
    assert unnamed.returncode == 2 and "its commit is unknown: give --commit SHA" in (
        unnamed.stderr) and not out.exists()
    run = subprocess.run(cli + ["--prepare", "--commit", COMMIT, "--levels", "1"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "4 problems in" in run.stdout and "1 skipped" in run.stdout
    assert "skipped level1/5_Broken.py" in run.stderr
    again = subprocess.run(cli + ["--prepare"], capture_output=True, text=True, cwd=ROOT,
                           timeout=300)
    assert again.returncode == 2 and "the recording is prepared" in again.stderr
    parts = subprocess.run(cli + ["--parts", "full"], capture_output=True, text=True,
                           cwd=ROOT, timeout=300)
    assert parts.returncode == 2 and "give no --parts" in parts.stderr
    ray = subprocess.run(cli + ["--workers", "2", "--address", "host:6379"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert ray.returncode == 2 and "--address is the Ray cluster of --workers ray" in ray.stderr
    # a file that imports a package this machine lacks: no manifest (it would deal other splits)
    needs = root / "KernelBench" / "level1" / "6_NeedsAPackage.py"
    needs.write_text("import no_such_package_here\n"
                     + (root / "KernelBench" / "level1" / "3_ReLU.py").read_text())
    lacking = subprocess.run([*cli[:-1], str(tmp_path / "rec2"), "--prepare", "--commit",
                              COMMIT, "--levels", "1"],
                             capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert lacking.returncode == 2, lacking.stderr[-2000:]
    assert ("1 files import a package this machine lacks (e.g. level1/6_NeedsAPackage.py"
            in lacking.stderr and "pip install -e '.[kernelbench]'" in lacking.stderr)
    assert not (tmp_path / "rec2").exists()


# -- building -------------------------------------------------------------------------------

def test_a_kernelbench_recording_builds_its_complete_problems_with_provenance(prepared,
                                                                              tmp_path):
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401
    from autoprofiler_env.dataset.build import build_from_recording

    shared, recorded, manifest, plans = prepared
    root = tmp_path / "checkout"  # a copy: it is removed below
    shutil.copytree(shared, root)
    out = tmp_path / "rec"
    shutil.copytree(recorded, out)
    assert set(plans) == set(KB_URI.values()) and all(plans.values())
    incomplete = KB_URI["level2/1_Gemm_GELU_LayerNorm.py"]
    _with_candidates(out, plans, leave_out={incomplete})
    with pytest.raises(DatasetError, match="give that checkout \\(--source DIR\\)"):
        build_from_recording(out)
    content = build_from_recording(out, source=root, complete=True)
    assert set(content.problems) == set(KB_URI.values()) - {incomplete}
    assert content.metadata["left_out"] == {
        incomplete: "not every planned candidate's outcome of reference"}
    by_uri = {m.uri: m for m in manifest.problems}
    for uri, record in content.problems.items():
        assert record.provenance == by_uri[uri].provenance
        assert record.provenance.commit == COMMIT
        assert record.split == by_uri[uri].split and record.tags[0] == by_uri[uri].op
        assert set(record.outcomes) == {"reference"}
        assert set(record.outcomes["reference"]) == set(plans[uri])
    assert list(content.problems)[0] == KB_URI["level1/1_Square_matmul.py"]  # KernelBench's order
    meta = content.metadata
    assert meta["default_optimizer"] == "reference" and meta["kernelbench"]["commit"] == COMMIT
    assert meta["kernelbench"]["skipped"] == manifest.skipped
    costs = meta["recording_cost"]["problems"]
    assert set(costs) == set(content.problems)
    relu = KB_URI["level1/3_ReLU.py"]
    assert costs[relu]["reference_s"] == 2.5 and costs[relu]["ncu_s"] > 0
    assert costs[relu]["candidates"] == len(plans[relu])
    assert costs[relu]["candidates_s"] == 11.0 * len(plans[relu])
    path = tmp_path / "kb.json.gz"
    content.save(path)
    shutil.rmtree(root)  # the replay needs no sources
    dataset = Dataset.load(path)
    info = dataset.info(problems=True)
    assert info["kernelbench"]["problems"] == len(content.problems)
    assert info["kernelbench"]["commits"] == [COMMIT]
    assert info["metadata"]["recording_cost"]["problems"] == f"{len(costs)} problems' seconds " \
                                                             "(--problems)"
    listed = {r["uri"]: r for r in info["records"]}
    assert listed[relu]["file"] == "3_ReLU.py" and listed[relu]["recording_s"] == costs[relu][
        "total_s"]
    env = gym.make("AutoProfiler-v0", dataset=str(path), split=None).unwrapped
    assert env.optimizer == "reference" and set(env.problems) == set(content.problems)
    obs, info = env.reset(seed=0, options={"problem": relu})
    *_, terminated, _, step_info = env.step(env.STOP)
    assert terminated and step_info["problem"] == relu
    # a verdict of too little GPU memory reached beside other processes is judged again
    row = next(r for r in read_jsonl(out / "candidates.jsonl") if r["uri"] == relu)
    with (out / "candidates.jsonl").open("a") as f:
        f.write(json.dumps({**row, "correct": False, "error_kind": "out_of_memory"}) + "\n")
    shutil.copytree(shared, root)
    again = build_from_recording(out, source=root, complete=True)
    assert set(again.problems) == set(content.problems) - {relu}
    assert again.metadata["left_out"][relu] == ("not every planned candidate's outcome of "
                                                "reference")


def _plan_missing_one(prepared, tmp_path) -> tuple[Path, str, str]:
    """A copy of the prepared recording whose plan of one problem lacks its last candidate,
    every other planned candidate recorded: (the copy, that problem, the candidate)."""
    _, recorded, _, plans = prepared
    out = tmp_path / "rec"
    shutil.copytree(recorded, out)
    uri = next(u for u, names in plans.items() if len(names) >= 2)
    dropped = plans[uri][-1]
    doc = json.loads((out / "plan.json").read_text())
    entry = next(p for p in doc["problems"] if p["uri"] == uri)
    entry["candidates"] = [c for c in entry["candidates"] if c["name"] != dropped]
    (out / "plan.json").write_text(json.dumps(doc))
    _with_candidates(out, {**plans, uri: [n for n in plans[uri] if n != dropped]})
    return out, uri, dropped


def test_a_problem_whose_plan_made_here_reaches_more_is_left_out(prepared, tmp_path):
    """A plan made on the device that missed a candidate (another torch, other features):
    the build's own plan finds it, and the problem is not shipped."""
    from autoprofiler_env.dataset.build import build_from_recording

    root, _, _, plans = prepared
    out, uri, dropped = _plan_missing_one(prepared, tmp_path)
    content = build_from_recording(out, source=root, complete=True)
    assert uri not in content.problems and len(content.problems) == len(plans) - 1
    assert dropped in content.metadata["left_out"][uri]
    assert content.metadata["optimizers"]["reference"]["problems"] == len(plans) - 1
    # without --complete every problem with evidence is built, the candidates as recorded
    assert uri in build_from_recording(out, source=root).problems


def test_replan_gives_a_problem_the_candidates_its_plan_now_reaches(prepared, tmp_path):
    """After the optimizer changed (the launch rule stopped reading cut forwards), ``record
    --replan`` plans the recorded problems again on a CPU: a problem whose saved plan lacks a
    candidate gets the new plan and needs its candidates again, the judged ones kept; the
    others are left as they are, and a second call (the command's) adds nothing."""
    from autoprofiler_env.dataset.record.kernelbench import _state, replan

    root, _, _, plans = prepared
    out, uri, dropped = _plan_missing_one(prepared, tmp_path)
    assert _state(out).needs(uri) is None  # complete by its saved plan
    checkout = KernelBenchCheckout(root, commit=COMMIT)
    assert replan(out, checkout) == {uri: [dropped]}
    state = _state(out)
    assert state.planned[uri] == plans[uri] and state.needs(uri) == "candidates"
    assert all(state.needs(u) is None for u in plans if u != uri)
    main = [sys.executable, "-m", "experiments.cli", "record", "--source", str(root),
            "--commit", COMMIT, "--out", str(out), "--replan"]
    again = subprocess.run(main, capture_output=True, text=True, check=False)
    assert again.returncode == 0 and "0 problems' plans reach new candidates" in again.stdout


def test_a_checkout_that_is_not_the_recorded_one_is_refused_at_build(prepared, tmp_path):
    from autoprofiler_env.dataset.build import build_from_recording

    root, recorded, _, _ = prepared
    other = tmp_path / "other"
    shutil.copytree(root, other)
    (other / "KernelBench" / "level1" / "2_Softmax.py").write_text("# edited\n")
    with pytest.raises(SourceMismatchError, match="level1/2_Softmax.py"):
        build_from_recording(recorded, source=other)
    # a checkout given for a recording of the suite's own problems
    with pytest.raises(DatasetError, match=r"holds the suite's problems alone: build it without "
                                           r"--source \(it is the folder of your own problem "
                                           r"files, or a KernelBench checkout for a recording "
                                           r"of one\)"):
        build_from_recording(DATA / "recording_h200", source=root)


def test_a_candidate_recorded_as_a_timeout_completes_its_problem_and_replays_as_eager(
        prepared, tmp_path):
    """A candidate that outlasted the judge's limit (KernelBench's 180 s) is recorded, as
    failed: its problem is complete, and an episode whose profile leads to it scores as the
    eager program (0)."""
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401
    from autoprofiler_env.dataset.build import build_from_recording
    from autoprofiler_env.dataset.record.kernelbench import PLAN

    root, recorded, _, plans = prepared
    out = tmp_path / "rec"
    shutil.copytree(recorded, out)
    _with_candidates(out, plans)
    planned = {(p["uri"], c["name"]): c["sections"]
               for p in json.loads((out / PLAN).read_text())["problems"]
               for c in p["candidates"]}
    (uri, name), sections = next(iter(planned.items()))
    rows = [{**r, "correct": False, "error_kind": "timeout", "candidate_ms": None,
             "candidate_p20_ms": None, "candidate_p80_ms": None, "speedup": None,
             "max_abs_error": None, "tolerance_needed": None, "timeout_s": 180.0}
            if (r["uri"], r["transformation"]) == (uri, name) else r
            for r in read_jsonl(out / "candidates.jsonl")]
    (out / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    content = build_from_recording(out, source=root, complete=True)
    assert uri in content.problems and not content.metadata["left_out"]
    outcome = content.problems[uri].outcomes["reference"][name]
    assert not outcome.correct and outcome.error_kind == "timeout"
    path = tmp_path / "kb.json.gz"
    content.save(path)
    env = gym.make("AutoProfiler-v0", dataset=str(path), split=None, budget=1.0).unwrapped
    env.reset(seed=0, options={"problem": uri})
    for section in sections:
        env.step(env.sections.index(section))
    _, reward, terminated, _, info = env.step(env.STOP)
    assert terminated and info["candidate"] == name and info["error_kind"] == "timeout"
    assert reward == 0.0 and not info["correct"]


def test_the_fidelity_study_plans_kernelbench_pairs_and_reads_them_from_the_checkout(
        prepared, tmp_path):
    """Issue 18's fidelity sample: 24 pairs of the KernelBench dataset, its ``reference``
    optimizer, its problems read from the checkout (sha256 checked); the settings are the
    study folder's."""
    from autoprofiler_env.dataset.build import build_from_recording
    from autoprofiler_env.errors import ProblemNotFoundError
    from experiments.studies import fidelity

    root, recorded, _, plans = prepared
    out = tmp_path / "rec"
    shutil.copytree(recorded, out)
    _with_candidates(out, plans)
    path = tmp_path / "kb.json.gz"
    build_from_recording(out, source=root, complete=True).save(path)
    study_dir = tmp_path / "fidelity"
    study = fidelity.settings(study_dir, str(path), "reference", 24)
    groups = fidelity._load_plan(study_dir, study)
    assert [len(g["sections"]) for g in groups] == list(fidelity.PAIRS[24])
    assert sum(len(g["uris"]) for g in groups) == 24
    assert {u for g in groups for u in g["uris"]} <= set(plans)
    assert json.loads((study_dir / fidelity.STUDY).read_text()) == study
    assert fidelity._judge_limit(study) == 180  # the recording's: KernelBench's own
    # the folder keeps its settings: another optimizer or size is refused, the rest follow
    assert fidelity.settings(study_dir) == study
    with pytest.raises(ValueError, match="optimizer 'reference', not 'reference-v1'"):
        fidelity.settings(study_dir, optimizer="reference-v1")
    assert fidelity.main(["analyze", "--out", str(study_dir), "--pairs", "36"]) == 2
    uris = [u for g in groups for u in g["uris"]]
    problems = fidelity._problems(study, uris, root)
    assert set(problems) == set(uris)
    recorded = Dataset.load(path)
    for uri, problem in problems.items():  # each the checkout's file the dataset recorded
        assert problem.path.parent.parent == root / "KernelBench"
        assert problem.path.name == recorded.record(uri).provenance.file
    with pytest.raises(ProblemNotFoundError, match="KernelBench checkout"):
        fidelity._problems(study, uris, None)


def test_dataset_build_and_info_commands_for_a_kernelbench_recording(prepared, tmp_path):
    root, recorded, _, plans = prepared
    out = tmp_path / "rec"
    shutil.copytree(recorded, out)
    _with_candidates(out, plans)
    cli = [sys.executable, "-m", "experiments.cli", "dataset"]
    path = tmp_path / "kb.json.gz"
    built = subprocess.run(cli + ["build", "--recording", str(out), "--source", str(root),
                                  "--complete", "--out", str(path)],
                           capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    assert f"{len(plans)} problems, 15 sections" in built.stdout
    info = subprocess.run(cli + ["info", str(path), "--problems"], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert info.returncode == 0, info.stderr
    shown = json.loads(info.stdout)
    assert len(shown["records"]) == len(plans) and shown["kernelbench"]["commits"] == [COMMIT]
    assert shown["metadata"]["gpu"] == "NVIDIA H200" and shown["metadata"]["ncu"]


def test_a_plan_that_names_no_candidate_is_complete_with_empty_outcomes(prepared):
    """The optimizer leaves such a problem alone whatever it is shown: nothing to record, and
    the replay serves it."""
    from autoprofiler_env.dataset.build import build, suite_fallback
    from autoprofiler_env.dataset.record.plan import PlannedProblem
    from autoprofiler_env.envs.backends import ReplayBackend

    _, recorded, _, plans = prepared
    uri = KB_URI["level1/3_ReLU.py"]
    problem = next(p for p in prepared[2].problems_from(KernelBenchCheckout(prepared[0]))
                   if p.uri == uri)
    content = build([d.parent for d in (recorded / "sets").rglob("run.json")],
                    read_jsonl(recorded / "reference.jsonl"), [], problems={uri: problem},
                    optimizer_rows={"reference": []},
                    plans={"reference": [PlannedProblem(uri, "train", ())]}, complete=True,
                    complete_for="reference", cost_model=suite_fallback())
    assert content.problems[uri].outcomes == {"reference": {}}
    assert ReplayBackend(Dataset(content), optimizer="reference").problems(None) == [uri]


# -- live -----------------------------------------------------------------------------------

def test_the_live_backend_checks_a_users_file_against_the_recorded_one(prepared, tmp_path):
    from autoprofiler_env.dataset.build import build_from_recording
    from autoprofiler_env.envs.backends import LiveBackend

    root, recorded, _, plans = prepared
    out = tmp_path / "rec"
    shutil.copytree(recorded, out)
    _with_candidates(out, plans)
    path = tmp_path / "kb.json.gz"
    content = build_from_recording(out, source=root, complete=True)
    content.save(path)
    relu = KB_URI["level1/3_ReLU.py"]
    mine = tmp_path / "mine" / "level1" / "3_ReLU.py"  # the user's own copy of the file
    mine.parent.mkdir(parents=True)
    shutil.copy(root / "KernelBench" / "level1" / "3_ReLU.py", mine)
    live = LiveBackend([str(mine)], device="cpu", dataset=str(path))
    assert live.problems(None) == [relu] and live.uri_of(str(mine)) == relu
    assert live.optimizer_name == "reference"  # the dataset's
    assert live._problems[relu].split == content.problems[relu].split
    mine.write_text(mine.read_text() + "\n# my change\n")
    with pytest.raises(SourceMismatchError, match="not the file recorded as KernelBench level 1 "
                       f"3_ReLU.py.*commit {COMMIT}"):
        LiveBackend([str(mine)], device="cpu", dataset=str(path))
    # the dataset's problems, from a checkout (checked), with their splits
    live = LiveBackend(None, device="cpu", dataset=str(path), source=str(root))
    assert set(live.problems(None)) == set(content.problems)
    assert set(live.problems("test")) == {u for u, r in content.problems.items()
                                          if r.split == "test"}
    # a problem a constant passes at the recorded tolerance is left out, as the replay does
    from dataclasses import replace

    from autoprofiler_env.dataset.format import DatasetFile

    ill = replace(content.problems[relu], eager={**content.problems[relu].eager,
                                                 "constant_needed": {"float32": 1e-3}})
    DatasetFile(content.metadata, content.sections, {**content.problems, relu: ill}).save(
        tmp_path / "ill.json.gz")
    with pytest.warns(UserWarning, match=f"1 of the dataset's problems are left out.*{relu}"):
        live = LiveBackend(None, device="cpu", dataset=str(tmp_path / "ill.json.gz"),
                           source=str(root))
    assert set(live.problems(None)) == set(content.problems) - {relu}
    assert relu in LiveBackend(None, device="cpu", dataset=str(tmp_path / "ill.json.gz"),
                               source=str(root), tolerance="kernelbench").problems(None)
    with pytest.raises(ProblemNotFoundError, match="give source="):
        LiveBackend([relu], device="cpu", dataset=str(path))
    with pytest.raises(ValueError, match="give dataset= too"):
        LiveBackend(None, device="cpu", source=str(root))
    # without a dataset, a user's file is a local problem, as before
    assert LiveBackend([str(mine)], device="cpu").problems(None)[0].startswith(
        "problem://local/")


def test_a_dataset_knows_the_operator_cap_it_was_recorded_under():
    """The recorder's ``--max-ops`` is read off the profiles (KernelBench's recording cut its
    long forwards at 24 operators), so that a live profile is taken as the replay's was: a
    file that cut forwards says its cap, one whose forwards are all whole says none while the
    profiler's default keeps them whole, and the longest otherwise; caps that differ are
    refused, and an ``ops_profiled`` above ``ops`` does not load."""
    dataset = Dataset.load("kernelbench")
    assert dataset.max_ops == 24  # its level-3 forwards are cut
    assert Dataset.load("suite").max_ops is None  # built before the counts were kept
    uris = dataset.uris()

    def with_ops(counts: dict) -> Dataset:
        """The shipped file with these counts, its other problems without any (whole)."""
        problems = {}
        for uri, record in dataset.content.problems.items():
            ops, profiled = counts.get(uri, (None, None))
            problems[uri] = replace(record, profiles={
                s: replace(p, ops=ops, ops_profiled=profiled)
                for s, p in record.profiles.items()})
        return Dataset(replace(dataset.content, problems=problems))

    assert with_ops({uris[0]: (39, 24), uris[1]: (60, 24), uris[2]: (5, 5)}).max_ops == 24
    assert with_ops({uris[0]: (5, 5), uris[1]: (90, 90)}).max_ops == 90
    assert with_ops({uris[0]: (5, 5)}).max_ops is None
    with pytest.raises(DatasetError, match=r"different operator caps \(\[16, 24\]\)"):
        with_ops({uris[0]: (39, 24), uris[1]: (60, 16)}).max_ops  # noqa: B018
    broken = with_ops({uris[0]: (5, 6)}).record(uris[0])
    assert "ops_profiled is 6, not at most ops (5)" in broken.invalid()


def test_a_dataset_knows_which_recorded_profiles_ncus_launch_cap_cut():
    """KernelBench's recording capped ncu's launches only for the problems it profiled alone
    (a batched run timed out, or a stepped op): those say True, the others False; a file
    built before the counts were kept, and a problem the dataset lacks, say None."""
    dataset = Dataset.load("kernelbench")
    capped = {u.removeprefix("problem://kernelbench/") for u in dataset.uris()
              if dataset.launch_capped(u)}
    assert capped >= {  # the file grows as the recording goes on: these two stay capped
        "level1/78_conv_transposed_2D_asymmetric_input_asymmetric_kernel___padded__",
        "level3/36_LSTMHn"}
    assert dataset.launch_capped("problem://kernelbench/level1/26_GELU_") is False  # batched
    suite = Dataset.load("suite")
    assert {suite.launch_capped(u) for u in suite.uris()} == {None}
    assert dataset.launch_capped("problem://kernelbench/level9/none") is None


def test_a_recording_goes_on_under_the_operator_cap_its_runs_cut_at(prepared, tmp_path):
    """One recording, one ``--max-ops``: KernelBench's runs cut long forwards at 24
    operators, and a call with another cap (the CLI's default, 64, where the device script's
    MAX_OPS=24 is forgotten) is refused before anything runs; runs cut at two caps are
    refused too."""
    from autoprofiler_env.dataset.record.kernelbench import record_kernelbench
    from autoprofiler_env.dataset.record.ncu import recorded_cap

    root, recorded, _, _ = prepared
    out = tmp_path / "rec"
    shutil.copytree(recorded, out)
    full = out / "sets" / "full"
    assert recorded_cap(full) is None  # every forward whole: any cap goes on
    [path] = full.rglob("run.json")
    meta = json.loads(path.read_text())
    rows = [i for i, r in enumerate(meta["status"]) if r.get("event") == "problem"]
    meta["status"][rows[0]].update(ops=50, ops_profiled=24)
    path.write_text(json.dumps(meta))
    assert recorded_cap(full) == 24
    checkout = KernelBenchCheckout(root, commit=COMMIT)
    with pytest.raises(DatasetError, match=r"cut forwards at 24 operators: record it on with "
                       r"--max-ops 24 \(MAX_OPS=24 in the device script\), not 64"):
        record_kernelbench(out, checkout, max_ops=64, device="cpu")
    meta["status"][rows[1]].update(ops=50, ops_profiled=32)
    path.write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match=r"different operator caps \(\[24, 32\]\)"):
        recorded_cap(full)


def test_every_kernelbench_problem_has_the_same_costs_observation_at_a_budget():
    """What docs/kernelbench.md ("Selecting it") and README say: each section's cost is
    modelled as a fixed share of the problem's full-set cost, and a budget is a fraction of
    that cost, so at a budget every problem's ``costs`` and first action mask are one (the
    suite's, measured alone on some problems, differ)."""
    import gymnasium as gym
    import numpy as np

    import autoprofiler_env  # noqa: F401  (registers the ids)

    for name, same in (("kernelbench", True), ("suite", False)):
        env = gym.make("AutoProfiler-v0", dataset=name, split=None, budget=0.1)
        costs, masks = set(), set()
        for uri in env.unwrapped.problems:
            observation, _ = env.reset(options={"problem": uri})
            costs.add(np.round(observation["costs"], 6).tobytes())
            masks.add(observation["action_mask"].tobytes())
        assert (len(costs) == 1 and len(masks) == 1) == same, name


def test_the_benchmark_and_learn_tree_serve_the_ill_posed_problems_at_kernelbenchs_tolerance(
        tmp_path):
    """Reviewed: both warned that a stricter tolerance serves the ill-posed problems, and
    neither command could be given one."""
    import gymnasium as gym

    from experiments.benchmark import benchmark
    from experiments.cli import main

    strict = gym.make("AutoProfiler-v0", dataset="kernelbench", split="test",
                      tolerance="kernelbench").unwrapped.problems
    _, episodes = benchmark("kernelbench", [0.25], seeds=1, tolerance="kernelbench")
    assert {row["problem"] for row in episodes} == set(strict)
    with pytest.warns(UserWarning, match="problems are left out"):
        _, loose = benchmark("kernelbench", [0.25], seeds=1)
    assert {row["problem"] for row in loose} < set(strict)
    assert main(["learn-tree", "--dataset", "kernelbench", "--tolerance", "kernelbench",
                 "--rounds", "1", "--out", str(tmp_path / "tree")]) == 0
    log = json.loads((tmp_path / "tree" / "log-0.25.jsonl").read_text().splitlines()[0])
    assert log["env"]["tolerance"] == {"atol": 1e-4, "rtol": 1e-4, "per_dtype": {
        "bfloat16": [0.01, 0.01], "float16": [0.01, 0.01]}}  # by value
    from agents.tree.learner import _logged_tolerance

    # the default's logs, written before the tolerance was recorded, say none: so does it
    assert {_logged_tolerance(t) for t in (None, "kernelbench-v0.1", "0.01", "1e-2")} == {None}
    assert _logged_tolerance("1e-3") == _logged_tolerance("0.001,0.001") == {
        "atol": 1e-3, "rtol": 1e-3}
    assert len(log["train_problems"]) == len(gym.make(
        "AutoProfiler-v0", dataset="kernelbench", split="train",
        tolerance="kernelbench").unwrapped.problems)


def test_a_reset_problem_not_served_says_why():
    """Reviewed: a problem of another split, an ill-posed one, one left out of the build and
    one the dataset never held all gave the same "not among this environment's problems"."""
    import warnings

    import gymnasium as gym

    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.errors import UnknownProblemError

    dataset = Dataset.load("kernelbench")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the ill-posed problems left out
        env = gym.make("AutoProfiler-v0", dataset="kernelbench", split="train")
    ill = env.unwrapped.backend.ill_posed
    other_split = next(u for u in dataset.uris("test") if u not in ill)
    cases = {
        other_split: r"it is in the test split: make the environment with split='test', or "
                     r"split=None for every split",
        next(iter(ill)): r"ill-posed at this tolerance, a constant matches at .*: a stricter "
                         r"tolerance serves it, tolerance='kernelbench'",
        next(iter(dataset.metadata["left_out"])): r"left out of this build of the dataset: ",
        "problem://kernelbench/level9/none": r"the dataset holds no such problem",
    }
    for uri, why in cases.items():
        with pytest.raises(UnknownProblemError, match=rf"is not among this environment's "
                                                      rf"problems \({why}"):
            env.reset(options={"problem": uri})
    first, second = env.unwrapped.problems[:2]  # made with a list: that list is why
    named = gym.make("AutoProfiler-v0", dataset="kernelbench", problems=[first])
    with pytest.raises(UnknownProblemError, match=r"\(not in the problems= list this "
                                                  r"environment was made with\)"):
        named.reset(options={"problem": second})


def test_recording_kernelbench_on_a_cpu_without_a_time_budget_is_warned_of(tmp_path,
                                                                            monkeypatch):
    """Reviewed: its references ran for hours on a CPU (408 s for level1/29_Softplus) with no
    word; bounded by --time-budget, it is the pipeline check it is meant as."""
    import autoprofiler_env.dataset.record.kernelbench as recorder
    from autoprofiler_env.errors import AutoProfilerWarning
    from experiments.cli import main

    root = _checkout(tmp_path / "ck")
    out = tmp_path / "rec"
    assert main(["record", "--source", str(root), "--out", str(out), "--prepare", "--commit",
                 COMMIT, "--levels", "1"]) == 0
    monkeypatch.setattr(recorder, "record_kernelbench",
                        lambda *a, **k: {"stopped_by_time_budget": False})
    command = ["record", "--source", str(root), "--out", str(out), "--device", "cpu",
               "--parts", "reference"]
    with pytest.warns(AutoProfilerWarning, match="recording KernelBench on the CPU: .*bound "
                                                 "it with --time-budget SECONDS"):
        assert main(command) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutoProfilerWarning)
        assert main([*command, "--time-budget", "60"]) == 0
