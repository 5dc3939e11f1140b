"""The first reference optimizer (``"reference-v1"``) on profiles recorded on the H200: which
evidence leads to which choice, and that collecting more sections can change it."""

from pathlib import Path

import pytest

from autoprofiler_env.optimizers.reference_v1 import ReferenceOptimizerV1, proposals
from autoprofiler_env.problems import load_file, load_problem
from autoprofiler_env.profiler import NcuRun, profiles_from_run

STUDY = Path(__file__).parents[1] / "docs" / "data" / "profile_study_h200"


def _profile(run: str, problem: str):
    profiles, _ = profiles_from_run(NcuRun.load(STUDY / run))
    return next(p for p in profiles if p.problem_uri.endswith("/" + problem))


@pytest.fixture(scope="module")
def opt():
    return ReferenceOptimizerV1(device="cuda")


def test_no_profile_applies_the_documented_prior(opt, tmp_path):
    assert opt.choose(load_problem("softmax_16384x4096"), None)[0] == "compile"
    assert opt.choose(load_problem("matmul_4096x4096x4096"), None)[0] == "tf32"
    flip = tmp_path / "flip.py"
    flip.write_text((Path(__file__).parent / "data" / "problems" / "relu_small.py").read_text()
                    .replace("torch.relu(x)", "x.flip(0)"))
    name, reason, _ = opt.choose(load_file(flip), None)
    assert name == "identity" and reason.startswith("prior")
    candidate = opt.optimize(load_file(flip), None)
    assert "class ModelNew(Model)" in candidate.source and candidate.producer == "identity"


def test_compute_bound_gemm_gets_tensor_cores(opt):
    name, reason, evidence = opt.choose(load_problem("matmul_4096x4096x4096"),
                                        _profile("section-SpeedOfLight", "matmul_4096x4096x4096"))
    assert name == "tf32" and reason.startswith("rule 3")
    assert evidence["sm__throughput.avg.pct_of_peak_sustained_elapsed"] > 80


def test_adding_sections_changes_the_choice(opt):
    """SpeedOfLight alone says "compute-bound GEMM: tf32"; the basic set adds Occupancy and
    LaunchStats, whose occupancy findings estimate a larger speedup: max_autotune wins."""
    problem = load_problem("matmul_4096x4096x4096")
    alone = opt.choose(problem, _profile("section-SpeedOfLight", problem.name))
    basic = opt.choose(problem, _profile("set-basic", problem.name))
    assert alone[0] == "tf32" and basic[0] == "max_autotune"
    assert basic[1].startswith("rule 7")


def test_launch_bound_network_gets_a_cuda_graph_unless_a_finding_misleads(opt):
    """32 kernels of 3.7 us: the kernel durations (in every profile) say launch-bound. With
    LaunchStats, ncu's LaunchConfiguration finding ("grid too small to fill the device") adds
    a larger estimated speedup that points at the launch configuration instead."""
    problem = load_problem("mlp_tiny_8layer_64x256")
    name, _, evidence = opt.choose(problem, _profile("section-SpeedOfLight", problem.name))
    assert name == "cuda_graph" and evidence["n_kernels"] == 32
    misled, reason, _ = opt.choose(problem, _profile("section-LaunchStats", problem.name))
    assert misled == "max_autotune" and "LaunchConfiguration" in reason


def test_memory_bound_chain_is_fused(opt):
    problem = load_problem("triplet_margin_loss_65536x1024")
    name, reason, _ = opt.choose(problem, _profile("section-SpeedOfLight", problem.name))
    assert name == "compile" and reason.startswith("rule 2")


def test_choice_is_deterministic_and_respects_the_device(opt):
    problem = load_problem("mlp_tiny_8layer_64x256")
    profile = _profile("section-SpeedOfLight", problem.name)
    assert opt.optimize(problem, profile) == opt.optimize(problem, profile)
    # cuda_graph needs a GPU: on a CPU the same evidence falls through to what does apply
    assert ReferenceOptimizerV1(device="cpu").choose(problem, profile)[0] != "cuda_graph"


def test_an_empty_profile_proposes_nothing():
    profile = _profile("section-LaunchStats", "relu_16384x16384")
    empty = type(profile)(profile.problem_uri, (), (), profile.cost)
    assert proposals(empty) == []


def test_the_rules_read_only_their_evidence_metrics():
    """The replay merges only EVIDENCE_METRICS before choosing: on every shipped problem and
    random section sets, the rules propose exactly what they do on the whole profile."""
    import random

    from autoprofiler_env.dataset import Dataset
    from autoprofiler_env.dataset.replay import DEFAULT_DATASET
    from autoprofiler_env.optimizers.reference_v1 import CHOICES, EVIDENCE_METRICS, PRIOR

    dataset = Dataset.load(DEFAULT_DATASET)
    rng = random.Random(0)
    keep = frozenset(EVIDENCE_METRICS)
    fired = 0
    for uri in dataset.uris():
        for _ in range(8):
            sections = rng.sample(dataset.sections, rng.randint(1, 6))
            whole = dataset.profile(uri, sections)
            kept = dataset.profile(uri, sections, keep)
            assert all(set(k.metrics) <= keep for k in kept.kernels)
            assert proposals(kept) == proposals(whole), (uri, sections)
            fired += bool(proposals(whole))
            # the oracle's search stops at the best of CHOICES: nothing else is ever chosen
            assert {p.transformation for p in proposals(whole)} <= CHOICES
    assert fired > 300, fired  # most of the 768 profiles make some rule fire
    assert set(PRIOR) <= CHOICES and "identity" in CHOICES
