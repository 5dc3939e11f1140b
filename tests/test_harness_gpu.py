"""The harness on a GPU: CUDA-event timing, and faults that only a GPU can have."""

import time

import pytest

from autoprofiler_env.harness import ErrorKind, Evaluator, HarnessConfig
from autoprofiler_env.problems import load_file, load_problem
from tests.conftest import DATA, candidate

pytestmark = pytest.mark.gpu


def test_cuda_timing_and_peak_memory():
    problem = load_problem("problem://autoprofiler/v1/level1/relu_16384x16384")
    with Evaluator(HarnessConfig(device="cuda"), timeout_s=120) as ev:
        result = ev.evaluate(problem, candidate("relu_correct"))
        assert result.correct, result.error_message
        assert result.candidate.method == "cuda_events"
        # the same kernel twice: the timings agree within 20%
        assert 0.8 < result.speedup < 1.25
        run = ev.reference(problem)
        assert run.peak_memory_bytes >= 2 * 16384 * 16384 * 4


def test_a_device_named_by_its_index_judges_as_cuda_does():
    """device="cuda:0": the reference worker's first call, torch's peak memory reset of the
    index, raised "Invalid device argument" (CUDA not yet initialised in that process), and
    every problem was refused as a reference that failed (an H100, 2026-12-06)."""
    problem = load_problem("problem://autoprofiler/v1/level1/relu_16384x16384")
    with Evaluator(HarnessConfig(device="cuda:0"), timeout_s=120) as ev:
        result = ev.evaluate(problem, candidate("relu_correct"))
        assert result.correct, result.error_message
        assert ev.reference(problem).peak_memory_bytes >= 2 * 16384 * 16384 * 4


def test_a_smaller_problem_after_a_larger_one_gets_its_own_peak():
    """The reference worker lets go of the last problem before it measures the next one's
    peak: after a 2 GB ReLU, a 32 KB one peaks at least at its input and output (before
    2026-12-03 it read as nothing, measured above what the worker still held)."""
    big = load_problem("problem://autoprofiler/v1/level1/relu_16384x16384")
    small = load_file(DATA / "problems" / "relu_small.py")
    with Evaluator(HarnessConfig(device="cuda"), timeout_s=120) as ev:
        assert ev.reference(big).peak_memory_bytes >= 2 * 16384 * 16384 * 4
        assert ev.reference(small).peak_memory_bytes >= 2 * 64 * 128 * 4


def test_the_judges_processes_return_the_memory_their_allocators_cache():
    """After a candidate of 1 GiB outputs, the judge's process caches at most
    ``RETURN_SLACK_BYTES`` beyond what it uses (its kept outputs), and the GPU holds little
    more than that beside it: the reference's worker returned its inputs' and outputs'
    blocks, the candidate's process is gone. Kept, KernelBench's 8.6 GB outputs held 93 GiB
    in the judge's and the reference's processes, and honest candidates ran out of memory
    beside them (2026-12-04)."""
    import torch

    from autoprofiler_env.harness.worker import RETURN_SLACK_BYTES

    problem = load_problem("problem://autoprofiler/v1/level1/relu_16384x16384")
    free_before, _ = torch.cuda.mem_get_info()  # this process's context made first
    with Evaluator(HarnessConfig(device="cuda"), timeout_s=120) as ev:
        assert ev.evaluate(problem, candidate("relu_correct")).correct
        cached = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
        assert cached <= RETURN_SLACK_BYTES, cached
        bound = torch.cuda.memory_reserved() + RETURN_SLACK_BYTES + (1 << 30)  # its context
        deadline = time.monotonic() + 10  # the candidate's process: killed, its memory freed
        while (used := free_before - torch.cuda.mem_get_info()[0]) > bound \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        assert used <= bound, (used / 2**30, bound / 2**30)


@pytest.mark.parametrize("name, kind", [("cuda_illegal_address", ErrorKind.CUDA),
                                        ("cuda_hangs", ErrorKind.TIMEOUT)])
def test_gpu_faults_lose_only_the_worker(name, kind):
    relu = load_file(DATA / "problems" / "relu_small.py")
    with Evaluator(HarnessConfig(device="cuda"), timeout_s=30) as ev:
        result = ev.evaluate(relu, candidate(name))
        assert result.error_kind is kind, result.error_message
        assert ev.evaluate(relu, candidate("relu_correct")).correct


CHEATS = DATA / "candidates" / "cheats"
RUNTIME_ONLY = HarnessConfig(device="cuda", static_check="off")


def test_work_left_on_a_side_stream_is_caught():
    problem = load_problem("problem://autoprofiler/v1/level1/relu_16384x16384")
    with Evaluator(RUNTIME_ONLY, timeout_s=120) as ev:
        result = ev.evaluate(problem, (CHEATS / "side_stream.py").read_text())
    assert not result.correct
    assert result.error_kind is ErrorKind.ASYNC_WORK, result.error_message


def test_patched_cuda_events_are_refused_and_an_honest_clock_agrees_with_the_judges():
    """CUDA events that report a thousandth of the time: the judge's clock disagreed
    (timing_mismatch) until the input guard watched torch.cuda.Event, which sees it first
    (2026-12-07, an H100: docs/data/gpu_tests/gpu_tests_h100_2026-12-07.txt)."""
    problem = load_problem("problem://autoprofiler/v1/level1/matmul_4096x4096x4096")
    honest_source = problem.source + "\n\nclass ModelNew(Model):\n    pass\n"
    with Evaluator(RUNTIME_ONLY, timeout_s=120) as ev:
        honest = ev.evaluate(problem, honest_source)
        cheat = ev.evaluate(problem, (CHEATS / "cuda_event_patch.py").read_text())
    assert honest.correct and honest.timing_unexplained < 0.2, honest.timing_unexplained
    assert cheat.error_kind is ErrorKind.SANDBOX, (cheat.error_message, cheat.speedup)
    assert "torch.cuda.Event.elapsed_time" in cheat.error_message


def test_outputs_cross_to_the_device_in_pieces_and_compare_as_on_the_host(monkeypatch):
    import multiprocessing as mp
    import threading

    import torch

    from autoprofiler_env.harness import wire
    from autoprofiler_env.harness.correctness import compare

    monkeypatch.setattr(wire, "STAGE_BYTES", 1 << 16)  # many pieces, both buffers reused
    torch.manual_seed(0)
    reference = [torch.randn(1 << 20), torch.randn(3, dtype=torch.float64), 7]
    candidate = [reference[0] * (1 + 1e-3 * torch.randn(1 << 20)), reference[1] + 1e-9, 7]
    candidate[0][5] = reference[0][5] + 1.0  # one value out of tolerance
    on_gpu = [t.cuda() if isinstance(t, torch.Tensor) else t for t in candidate]
    a, b = mp.Pipe()
    thread = threading.Thread(target=wire.send, args=(b, {}, on_gpu[:2]))  # device -> socket
    thread.start()
    _, landed = wire.recv(a, device="cuda", deadline=time.monotonic() + 60)  # -> device
    thread.join()
    assert all(t.is_cuda for t in landed)
    assert all(torch.equal(x.cpu(), y) for x, y in zip(landed, candidate[:2], strict=True))
    tolerance = lambda dtype: (1e-2, 1e-2)  # noqa: E731
    on_host = compare(reference, candidate, tolerance)
    on_device = compare([t.cuda() if isinstance(t, torch.Tensor) else t for t in reference],
                        [*landed, 7], tolerance)
    assert on_device == on_host and on_host.mismatch is not None


def test_threads_receiving_at_once_keep_their_own_outputs(monkeypatch):
    """The recorder's warm workers are threads of one process: each one's pieces cross the
    host in its own buffers."""
    import multiprocessing as mp
    import threading

    import torch

    from autoprofiler_env.harness import wire

    monkeypatch.setattr(wire, "STAGE_BYTES", 1 << 16)
    sent = [torch.full((1 << 18,), float(k), device="cuda") + torch.randn(1 << 18,
                                                                            device="cuda")
            for k in range(4)]
    landed: dict = {}

    def pair(k):
        a, b = mp.Pipe()
        sender = threading.Thread(target=wire.send, args=(b, {}, [sent[k]]))
        sender.start()
        landed[k] = wire.recv(a, device="cuda", deadline=time.monotonic() + 60)[1][0]
        sender.join()

    threads = [threading.Thread(target=pair, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(torch.equal(landed[k], sent[k]) for k in range(4))


def test_a_recorders_batch_is_compiled_at_once_and_timed_one_at_a_time(tmp_path):
    """The recorder's held batch on a GPU: compiled candidates judged in the processes that
    compiled them (phase ``queue``), with the verdicts and speedups that judging each alone
    gives (within the timing noise of a second measurement)."""
    from autoprofiler_env.dataset.record import record_candidates

    problem = load_problem("linear_gelu_layernorm_4096x4096")
    config = HarnessConfig(device="cuda")
    plan = {problem.uri: ["compile", "tf32", "max_autotune", "compile+tf32"]}
    held = record_candidates([problem], tmp_path / "held.jsonl", config, warm_workers=3,
                             timeout_s=300, plan=plan)
    alone = record_candidates([problem], tmp_path / "alone.jsonl", config, warm_workers=1,
                              timeout_s=300, plan=plan)
    assert [r["transformation"] for r in held] == plan[problem.uri]
    for h, a in zip(held, alone):
        assert h["correct"] and a["correct"], (h["error_message"], a["error_message"])
        assert ("queue" in h["phases_s"]) == (h["transformation"] != "tf32")
        assert 0.8 < h["speedup"] / a["speedup"] < 1.25, (h, a)


@pytest.mark.parametrize("name", ["conv2d_batchnorm_relu_32x64x112x112",
                                  "softmax_16384x4096", "matmul_4096x4096x4096"])
def test_no_honest_transformation_is_refused_by_the_output_or_input_checks(name):
    """Every rewrite of the catalogue that applies, judged on the GPU: none returns a tensor
    subclass, changes its output's nesting or changes what makes the judge's inputs
    (torch.compile, CUDA graphs, Triton, autocast, cuDNN's settings), so none gets the
    ``structure`` or ``sandbox`` verdict those checks give (docs/harness.md)."""
    from autoprofiler_env.features import static_features
    from autoprofiler_env.optimizers.transforms import applicable

    problem = load_problem(name)
    features = static_features(problem)
    with Evaluator(HarnessConfig(device="cuda", size="smoke"), timeout_s=300) as ev:
        for t in applicable(problem, features):
            result = ev.evaluate(problem, t.rewrite(problem, features))
            assert result.error_kind not in (ErrorKind.STRUCTURE, ErrorKind.SANDBOX), (
                t.name, result.error_message)
