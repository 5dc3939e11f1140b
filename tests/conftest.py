from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


def candidate(name: str) -> str:
    return (DATA / "candidates" / f"{name}.py").read_text()


@pytest.fixture(scope="session")
def study_dataset(tmp_path_factory) -> Path:
    """A dataset for the environment's tests: the 12 problems profiled on the H200 (every
    action section, real recorded evidence and costs) with TEST outcomes: every applicable
    transformation gets a made-up, deterministic speedup (some incorrect), because the real
    outcomes are recorded on the GPU by `autoprofiler record`. Never shipped or reported."""
    import hashlib

    from autoprofiler_env.dataset.build import build
    from autoprofiler_env.features import static_features
    from autoprofiler_env.jsonlines import read_jsonl
    from autoprofiler_env.optimizers import applicable
    from autoprofiler_env.problems import load_problem
    from experiments.profile_study import STUDY_PROBLEMS

    root = Path(__file__).parents[1] / "docs" / "data"
    rows = []
    for uri in (load_problem(name).uri for name in STUDY_PROBLEMS):
        problem = load_problem(uri)
        for t in applicable(problem, static_features(problem), "cuda"):
            h = int(hashlib.sha256(f"{uri} {t.name}".encode()).hexdigest()[:8], 16)
            correct = h % 7 != 0
            rows.append({"uri": uri, "transformation": t.name, "correct": correct,
                         "error_kind": None if correct else "mismatch",
                         "candidate_ms": 1.0, "speedup": 0.5 + (h % 1000) / 250
                         if correct else None})
    run_dirs = sorted(p.parent for p in (root / "profile_study_h200").rglob("run.json"))
    content = build(run_dirs, read_jsonl(root / "reference_h200.jsonl"), rows,
                    {"note": "TEST outcomes, not measured"})
    path = tmp_path_factory.mktemp("study_dataset") / "study.json.gz"
    content.save(path)
    return path
