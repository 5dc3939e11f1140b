"""The profiler on a CPU: the section catalogue, parsing of real ncu output recorded on the
H200 (docs/data/profile_study_h200), rendering, and every failure the runner must name."""

import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoprofiler_env.errors import (
    NcuNotFoundError,
    NcuPermissionError,
    NcuUnsupportedError,
    ProblemError,
    ProfilingError,
    ReportReadError,
    UnknownSectionError,
)
from autoprofiler_env.problems import load_problem
from autoprofiler_env.profiler import (
    ACTION_SECTIONS,
    NcuRun,
    Profile,
    load_catalogue,
    profiles_from_run,
    render_markdown,
)
from autoprofiler_env.profiler.parse import parse_passes, parse_raw
from autoprofiler_env.profiler.records import Finding
from autoprofiler_env.profiler.render import CHART_METRICS
from autoprofiler_env.profiler.runner import (
    check_log,
    find_ncu,
    range_timeout_s,
    run_ncu,
    timed_out,
)
from tests.conftest import DATA

STUDY = Path(__file__).parents[1] / "docs" / "data" / "profile_study_h200"
NCU_DATA = DATA / "ncu"


def _run(name: str) -> NcuRun:
    return NcuRun.load(STUDY / name)


# -- the catalogue ------------------------------------------------------------------------------

def test_catalogue_has_ncu_2025_3_1_sections_and_sets():
    c = load_catalogue()
    assert c.ncu_version == "2025.3.1" and len(c.sections) == 24
    assert set(ACTION_SECTIONS) <= set(c.sections) and len(ACTION_SECTIONS) >= 15
    assert c.sets["basic"] == ("LaunchStats", "Occupancy", "SpeedOfLight", "WorkloadDistribution")
    assert len(c.sets["detailed"]) == 9 and len(c.sets["full"]) == 21
    assert c.set_passes == {"basic": 10, "detailed": 20, "full": 38}
    for s in ACTION_SECTIONS:
        assert c.section(s).passes and c.section(s).metrics, s
    assert c.section("SpeedOfLight").passes == 10
    assert ("Duration", "gpu__time_duration.sum") in c.section("SpeedOfLight").header


def test_unknown_section_names_the_valid_ones():
    with pytest.raises(UnknownSectionError, match="SpeedOfLight"):
        load_catalogue().validate(["SpeedOfLight", "SpeedOfDark"])


# -- parsing recorded runs ----------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(p.name for p in STUDY.iterdir() if p.is_dir()))
def test_every_recorded_run_parses_into_a_profile_per_problem(name):
    run = _run(name)
    profiles, failures = profiles_from_run(run)
    assert not failures and len(profiles) == len(run.problems) >= 1
    catalogue = load_catalogue()
    for p in profiles:
        assert p.sections == run.sections and p.cost.n_kernels == len(p.kernels) >= 1
        assert all(k.duration_ns and k.duration_ns > 0 for k in p.kernels)
        assert p.cost.replay_s > 0 and p.cost.gpu_replay_s > 0
        for f in (f for k in p.kernels for f in k.findings):
            assert f.section in catalogue.sections and f.kind in ("OPT", "WRN", "INF", "ERR")


def test_the_same_program_has_the_same_kernels_whatever_is_collected():
    counts = {}
    for name in ("section-SpeedOfLight", "section-WarpStateStats", "set-basic"):
        profiles, _ = profiles_from_run(_run(name))
        counts[name] = {p.problem_uri.rsplit("/", 1)[1]: p.cost.n_kernels for p in profiles}
    assert counts["section-SpeedOfLight"] == counts["section-WarpStateStats"] == counts["set-basic"]
    assert counts["set-basic"]["matmul_4096x4096x4096"] == 1
    assert counts["set-basic"]["mlp_tiny_8layer_64x256"] == 32  # 8 x (GEMM, bias, relu, add)


@pytest.mark.parametrize("name, passes", [
    ("section-SpeedOfLight", 10), ("section-WarpStateStats", 9), ("section-LaunchStats", 1),
    ("subset-SpeedOfLight+WarpStateStats", 17), ("set-basic", 10)])
def test_replay_passes_per_kernel(name, passes):
    profiles, _ = profiles_from_run(_run(name))
    assert {p.cost.passes for p in profiles} == {passes}
    for p in profiles:
        assert p.cost.kernel_passes == passes * p.cost.n_kernels


def test_replay_passes_of_a_run_capped_with_launch_count():
    """ncu numbers a capped run's kernels ``- 3 (4/65):``: their passes are read all the same
    (the live backend's runs of one problem are capped; the 65th launch is the primer)."""
    capped = next((Path(__file__).parents[1] / "docs" / "data" / "recording_h200" / "sets"
                   / "full").glob("*-capped-*"))
    [profile], _ = profiles_from_run(NcuRun.load(capped))
    assert len(profile.kernels) == 64 and all(k.passes in (37, 38) for k in profile.kernels)
    assert profile.cost.passes == 38 and profile.cost.gpu_replay_s > 0


def test_replay_passes_are_read_across_lines_that_ncu_prints_inside_a_kernels_progress():
    """A slow launch makes ncu print a warning in the middle of the kernel's progress, whose
    ``....100% - 38 passes`` then ends a later line; a kernel whose replay ncu stopped
    (``0%....50%==PROF== Trying to shutdown``, then `` - 24 passes``) has none."""
    log = ('==PROF== Profiling "vectorized_elementwise_kernel" - 7: 0%....50%....100% - 38 passes\n'
           '==PROF== Profiling "max_pool_forward_nchw" - 8: 0%\n'
           "==WARNING== Launching the workload is taking more time than expected. If this "
           "continues to hang, terminate the profile and re-try by profiling the range of all "
           "related launches using '--replay-mode range'.\n"
           "....50%....100% - 38 passes\n"
           '==PROF== Profiling "gemm" - 9 (10/65): 0%....50%....100% - 37 passes\n'
           '==PROF== Profiling "elemWiseRNNcell" - 10: 0%....50%==PROF== Trying to shutdown '
           "target application\n - 24 passes\n"
           '==ERROR== Failed to profile "elemWiseRNNcell" in process 9539\n')
    assert parse_passes(log) == {7: 38, 8: 38, 9: 37}


def test_a_kernel_whose_progress_a_warning_interrupted_keeps_its_passes_in_the_cost():
    """The KernelBench recording's 41_Max_Pooling_1D has one kernel, interrupted so: its full
    set's cost was 0 passes (and 0 s of GPU replay) before its passes were read."""
    run = NcuRun.load(Path(__file__).parents[1] / "docs" / "data" / "recording_kernelbench_h200"
                      / "sets" / "full" / "20261203-022346-000-1db9308be0")
    by = {p.problem_uri.rsplit("/", 1)[1]: p for p in profiles_from_run(run)[0]}
    pool = by["41_Max_Pooling_1D"]
    assert [k.passes for k in pool.kernels] == [38]
    assert pool.cost.passes == pool.cost.kernel_passes == 38 and pool.cost.gpu_replay_s > 0
    assert all(k.passes in (37, 38) for p in by.values() for k in p.kernels)


def test_matmul_is_compute_bound_and_relu_memory_bound():
    profiles, _ = profiles_from_run(_run("section-SpeedOfLight"))
    by = {p.problem_uri.rsplit("/", 1)[1]: p for p in profiles}
    sm = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
    mem = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
    assert by["matmul_4096x4096x4096"].metric(sm) > 80 > by["relu_16384x16384"].metric(sm)
    assert by["relu_16384x16384"].metric(mem) > 80
    # duration-weighted: the aggregate lies between the kernels' values
    multi = by["conv2d_batchnorm_relu_32x64x112x112"]
    values = [k.metrics[sm] for k in multi.kernels]
    assert min(values) <= multi.metric(sm) <= max(values)
    assert multi.metric("no__such_metric") is None


def _with_first_estimate(run: NcuRun, text: str) -> NcuRun:
    """``run`` with its details page's first estimated speedup read as ``text``."""
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(run.details_csv)))
    first = next(r for r in rows if (r.get("Estimated Speedup") or "").strip())
    first["Estimated Speedup"] = text
    page = io.StringIO()
    writer = csv.DictWriter(page, fieldnames=list(rows[0]), quoting=csv.QUOTE_ALL)
    writer.writeheader()
    writer.writerows(rows)
    return dataclasses.replace(run, details_csv=page.getvalue())


@pytest.mark.parametrize("text", ["nan", "inf", "-5", "N/A"])
def test_an_estimate_that_is_not_a_finite_speedup_is_no_estimate(text):
    """A dataset holds a finding's speedup as a finite number >= 0 or none (its load refuses
    others): what ncu prints otherwise is read as no estimate, not a NaN that the build would
    write and the load then refuse, nor a ValueError for the whole run."""
    run = _run("section-WarpStateStats")
    before = [f.speedup_pct for p in profiles_from_run(run)[0] for k in p.kernels
              for f in k.findings]
    after = [f.speedup_pct for p in profiles_from_run(_with_first_estimate(run, text))[0]
             for k in p.kernels for f in k.findings]
    changed = [(b, a) for b, a in zip(before, after) if b != a]
    assert len(before) == len(after) and len(changed) == 1 and changed[0][1] is None


def test_a_details_row_without_a_kernel_id_is_a_report_read_error():
    run = _run("section-WarpStateStats")
    lines = run.details_csv.splitlines()
    broken = dataclasses.replace(run, details_csv="\n".join(
        [lines[0], lines[1].replace('"0",', '"x",', 1), *lines[2:]]))
    with pytest.raises(ReportReadError, match="a details-page row's ID is 'x', not a kernel's"):
        profiles_from_run(broken)


def test_findings_are_ranked_by_time_weighted_speedup():
    profiles, _ = profiles_from_run(_run("section-WarpStateStats"))
    for p in profiles:
        weights = [r.weighted for r in p.findings()]
        assert weights == sorted(weights, reverse=True)
    relu = next(p for p in profiles if "relu_16384" in p.problem_uri)
    top, weight, _, _ = relu.findings()[0]
    assert (top.section, top.rule, top.kind, top.speedup_type) == ("WarpStateStats",
                                                                   "CPIStall", "OPT", "local")
    assert weight == pytest.approx(top.speedup_pct)  # one kernel: all the time


def _recorded_profile(uri: str) -> Profile:
    """``uri``'s profile in KernelBench's recorded runs of the full set."""
    runs = Path(__file__).parents[1] / "docs" / "data" / "recording_kernelbench_h200" / "sets"
    for path in sorted((runs / "full").rglob("run.json")):
        if uri in path.read_text():
            found = {p.problem_uri: p for p in profiles_from_run(NcuRun.load(path.parent))[0]}
            if uri in found:
                return found[uri]
    raise AssertionError(f"{uri} is in no recorded run")


def test_a_profile_says_how_much_of_the_forward_it_holds():
    """The driver's operator counts and ncu's launch cap reach the profile (and its dict, its
    rendering): KernelBench's level3/31_VisionAttention was profiled on its first 24 of 39
    operators, the suite's LSTM alone under ncu's cap of 64 kernels, GELU whole."""
    cut = _recorded_profile("problem://kernelbench/level3/31_VisionAttention")
    assert (cut.ops, cut.ops_profiled, cut.kernels_capped) == (39, 24, False)
    assert cut.profiled_share == pytest.approx(24 / 39)
    whole = _recorded_profile("problem://kernelbench/level1/26_GELU_")
    assert (whole.ops, whole.ops_profiled, whole.profiled_share) == (1, 1, 1.0)
    capped = next((Path(__file__).parents[1] / "docs" / "data" / "recording_h200" / "sets"
                   / "full").glob("*-capped-*"))
    [lstm], _ = profiles_from_run(NcuRun.load(capped))
    assert lstm.kernels_capped and lstm.profiled_share is None
    assert Profile.from_dict(cut.to_dict()) == cut
    older = {k: v for k, v in cut.to_dict().items()
             if k not in ("ops", "ops_profiled", "kernels_capped")}
    assert Profile.from_dict(older).profiled_share == 1.0  # a file built before the counts
    assert "forward's first 24 of 39 operators were profiled" in render_markdown(cut)
    assert "first 64 kernels were profiled (ncu's launch cap)" in render_markdown(lstm)
    assert "were profiled" not in render_markdown(whole)


def test_profile_round_trips_through_a_dict():
    profiles, _ = profiles_from_run(_run("subset-SpeedOfLight+WarpStateStats"))
    for p in profiles:
        assert Profile.from_dict(p.to_dict()) == p


def test_render_is_deterministic_and_shows_sections_and_findings():
    profiles, _ = profiles_from_run(_run("subset-SpeedOfLight+WarpStateStats"))
    p = next(q for q in profiles if "triplet" in q.problem_uri)
    text = render_markdown(p)
    assert text == render_markdown(Profile.from_dict(p.to_dict()))
    assert "## GPU Speed Of Light Throughput" in text and "## Warp State Statistics" in text
    assert "**OPT CPIStall** (est. speedup 73%, local" in text
    assert text.index("## GPU Speed Of Light") < text.index("## Warp State")
    empty = dataclasses.replace(p, sections=(), kernels=())
    assert render_markdown(empty) == "No profile was collected for this program.\n"


def test_a_chart_section_shows_its_own_metrics_where_ncu_prints_none():
    """The roofline's section is a chart: ncu prints no values for it, so a profile of it
    alone rendered its header and nothing (3 passes for an empty section in an LLM's prompt):
    its own metrics are shown by name, with their units, the launch's left to the table."""
    profiles, _ = profiles_from_run(_run("section-SpeedOfLight_RooflineChart"))
    p = next(q for q in profiles if "matmul_4096" in q.problem_uri)
    text = render_markdown(p)
    body = text[text.index("## GPU Speed Of Light Roofline Chart"):].splitlines()[1]
    assert body.startswith("- kernel 1: sm__sass_thread_inst_executed_op_ffma_pred_on.sum."
                           "peak_sustained 1.69e+04 inst/cycle; ")
    assert "dram__bytes.sum.per_second" in body and "launch__" not in body
    speed = render_markdown(next(q for q in profiles_from_run(_run("suite-SpeedOfLight"))[0]
                                 if "matmul_4096" in q.problem_uri))
    assert "sm__" not in speed  # a section ncu prints values for: those alone, as before
    # the hierarchical tensor roofline's 268 metrics: the non-zero ones, at most 24, said so
    tensor, _ = profiles_from_run(_run("section-SpeedOfLight_HierarchicalTensorRooflineChart"))
    line = next(x for x in render_markdown(tensor[0]).splitlines() if x.startswith("- kernel 1"))
    assert line.count("; ") == CHART_METRICS - 1 and " 0 " not in line
    assert re.search(r" \(and \d+ more of its metrics, zero or past the first 24\)$", line)
    # the memory tables (30 passes) rendered a bare header too
    tables, _ = profiles_from_run(_run("section-MemoryWorkloadAnalysis_Tables"))
    text = render_markdown(next(q for q in tables if "matmul_4096" in q.problem_uri))
    assert text[text.index("## Memory Workload Analysis Tables"):].splitlines()[1].startswith(
        "- kernel 1: ")
    # a section that is not a chart: what ncu printed, never its metrics by name
    sampled, _ = profiles_from_run(_run("section-PmSampling"))
    assert all("profiler__" not in render_markdown(q) for q in sampled)
    assert "- kernel 1: Maximum Buffer Size" in render_markdown(sampled[0])


def test_each_finding_names_its_kernel_and_one_outside_the_table_its_share():
    """A rule fires per kernel: the rendering says which (the suite's tiny MLP, 32 kernels of
    about 6% each: its CPIStall finding stands for an elementwise kernel outside the three
    rows); a rule without estimates is the longest kernel's where it fires there, not the
    first launched one's."""
    profiles, _ = profiles_from_run(_run("subset-SpeedOfLight+WarpStateStats"))
    by = {p.problem_uri.rsplit("/", 1)[-1]: p for p in profiles}
    mlp = render_markdown(by["mlp_tiny_8layer_64x256"])
    assert ("**OPT CPIStall** (est. speedup 71%, local, on `vectorized_elementwise_kernel`, 2% "
            "of the time; 25.1% weighted by the kernels' time)") in mlp
    assert "**WRN CPIStall** (on kernel 1)" in mlp
    softmax = render_markdown(by["softmax_16384x4096"])
    assert softmax.splitlines()[2] == "1 kernel, 211.7 us of GPU time in total. It:"
    assert "**OPT SOLBottleneck** (on kernel 1)" in softmax
    gemm = by["linear_gelu_layernorm_4096x4096"]  # SOLBottleneck fires on two of its kernels
    found = {(r.finding.section, r.finding.rule, r.finding.kind): r.finding
             for r in gemm.findings()}
    sol = found[("SpeedOfLight", "SOLBottleneck", "OPT")]
    owners = [(k, s) for k, s in zip(gemm.kernels, gemm.shares())
              if any(f.rule == "SOLBottleneck" and f.kind == "OPT" for f in k.findings)]
    assert len(owners) > 1
    longest = max(owners, key=lambda ks: ks[1])[0]
    assert any(f is sol for f in longest.findings)


def test_a_finding_shared_by_two_kernels_is_said_of_the_one_that_stands_for_it():
    """A dataset's load shares identical findings between kernels (one object): the rendering
    names the kernel findings() chose, not the last one holding the object (it found the
    kernel by the finding's identity)."""
    profiles, _ = profiles_from_run(_run("subset-SpeedOfLight+WarpStateStats"))
    profile = next(p for p in profiles if len(p.kernels) > 2)
    finding = Finding("SpeedOfLight", "SOLBottleneck", "OPT", "shared", "global", 50.0)
    long, short = (dataclasses.replace(k, duration_ns=d, findings=(finding,))
                   for k, d in zip(profile.kernels, (9e6, 1e3)))
    others = tuple(dataclasses.replace(k, duration_ns=1e3, findings=())
                   for k in profile.kernels[2:])
    shared = dataclasses.replace(profile, kernels=(long, short, *others),
                                 sections=("SpeedOfLight",))
    top = shared.findings()[0]
    assert top.finding is finding and top.kernel is long and top.share > 0.99
    assert "**OPT SOLBottleneck** (est. speedup 50%, global, on kernel 1;" in render_markdown(
        shared)


# -- failures -----------------------------------------------------------------------------------

@pytest.mark.parametrize("fixture, error", [
    ("err_unknown_section.txt", UnknownSectionError),
    ("err_permission.txt", NcuPermissionError),
    ("err_library_not_loaded.txt", NcuUnsupportedError),
])
def test_ncu_failure_outputs_become_typed_errors(fixture, error):
    with pytest.raises(error):
        check_log((NCU_DATA / fixture).read_text())


def test_a_healthy_log_raises_nothing():
    check_log(_run("section-SpeedOfLight").log)


def test_missing_ncu(monkeypatch):
    monkeypatch.setenv("NCU", "/no/such/ncu")
    with pytest.raises(NcuNotFoundError, match="NCU=/path/to/ncu"):
        find_ncu()


def test_a_truncated_raw_page_is_a_read_error():
    text = _run("section-SpeedOfLight").raw_csv
    with pytest.raises(ReportReadError, match="cut off"):
        parse_raw(text[: len(text) // 2])
    with pytest.raises(ReportReadError, match="no header"):
        parse_raw("not,a,report\n1,2,3\n")


def test_a_crash_keeps_the_problems_before_it():
    """The program dies inside problem 3: problems 0-2 keep their profiles, 3 is named as the
    culprit, the rest are not reached (profile_problems then retries them)."""
    run = _run("section-LaunchStats")
    cut = [r for r in run.status if r["event"] == "started"
           or (r["event"] == "begin" and r["index"] <= 3)
           or (r["event"] == "problem" and r["index"] < 3)]
    crashed = dataclasses.replace(run, status=cut,
                                  log=run.log + (NCU_DATA / "err_target_crash.txt").read_text())
    profiles, failures = profiles_from_run(crashed)
    assert [p.problem_uri for p in profiles] == [p["uri"] for p in run.problems[:3]]
    assert failures[0].problem_uri == run.problems[3]["uri"]
    assert "hung or crashed" in failures[0].error
    assert all("not reached" in f.error for f in failures[1:]) and len(failures) == 9


def _fake_ncu(tmp_path: Path, body: str) -> str:
    script = tmp_path / "ncu"
    script.write_text("#!/usr/bin/env bash\n"
                      'if [ "$1" = "--version" ]; then echo "Version 2025.3.1.0"; exit 0; fi\n'
                      + body)
    script.chmod(0o755)
    return str(script)


def test_a_report_ncu_cannot_read_is_a_read_error(tmp_path):
    fake = _fake_ncu(tmp_path, f'if [ "$1" = "--import" ]; then '
                               f'cat "{NCU_DATA}/err_truncated_report.txt"; exit 1; fi\n'
                               'for a in "$@"; do prev=$out; out=$a; '
                               '[ "$prev" = "-o" ] && touch "$a.ncu-rep"; done\n')
    with pytest.raises(ReportReadError, match="incompatibility"):
        run_ncu([load_problem("relu_16384x16384")], ["SpeedOfLight"], ncu=fake,
                workdir=tmp_path / "work")


def test_a_saved_log_holds_no_path_of_the_machine(tmp_path, monkeypatch):
    """A warning of the profiled program names its file (a KernelBench checkout's under the
    working directory: docs/data/recording_kernelbench_h200 shipped one so)."""
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    fake = _fake_ncu(tmp_path, 'echo "$PWD/.kernelbench/level3/28_ViT.py:33: UserWarning: x"\n'
                               'echo "$HOME/.cache/torch: y"\n'
                               'for a in "$@"; do prev=$out; out=$a; '
                               '[ "$prev" = "-o" ] && echo "report $(realpath -m "$a")"; done\n')
    # a relative work folder: ncu names the report's absolute path
    run = run_ncu([load_problem("relu_16384x16384")], ["SpeedOfLight"], ncu=fake,
                  workdir=Path("work"))
    assert "./.kernelbench/level3/28_ViT.py:33: UserWarning" in run.log
    assert "~/.cache/torch: y" in run.log and "report <workdir>/" in run.log
    assert str(tmp_path) not in run.log, run.log


@pytest.mark.parametrize("cwd, home, text, saved", [
    ("/tmp", "/u/me", "/var/tmp/x /tmpfiles/y /tmp/z /tmp", "/var/tmp/x /tmpfiles/y ./z ."),
    ("/srv/ci", "/opt/me", "/data/opt/me/x /opt/mefs/y /opt/me/.cache /opt/me: /mnt/srv/ci/x",
     "/data/opt/me/x /opt/mefs/y ~/.cache ~: /mnt/srv/ci/x"),
    ("/opt", "/opt/me", "/opt/me/.cache /opt/you/x", "~/.cache ./you/x"),
    ("/srv/ci", "/u/me", "/srv/ci~bak/x /srv/ci+1/y /opt/c++/srv/ci/x '/srv/ci/a.py':3",
     "/srv/ci~bak/x /srv/ci+1/y /opt/c++/srv/ci/x './a.py':3"),
    ("/opt/me/proj", "/opt/me", "/opt/me/proj/a.py /opt/me/b", "./a.py ~/b"),
    ("/", "/", "/usr/bin/python3", "/usr/bin/python3"),
    (None, None, "/srv/ci/x", "/srv/ci/x"),  # no working directory (removed), no home
])
def test_a_log_loses_the_machines_folders_whole_paths_only(monkeypatch, cwd, home, text,
                                                          saved):
    from autoprofiler_env.profiler import runner

    def folder(value):
        def get():
            if value is None:
                raise FileNotFoundError("removed")
            return Path(value)
        return staticmethod(get)

    monkeypatch.setattr(runner.Path, "cwd", folder(cwd))
    monkeypatch.setattr(runner.Path, "home", folder(home))
    work = "/var/folders/ncu-x1"
    assert runner.without_machine_paths(f"{text} -o {work}/report", Path(work)) == \
        f"{saved} -o <workdir>/report"


def test_a_hanging_program_is_killed_and_named(tmp_path):
    fake = _fake_ncu(tmp_path, "sleep 600\n")
    started = time.perf_counter()
    run = run_ncu([load_problem("relu_16384x16384")], ["SpeedOfLight"], ncu=fake,
                  problem_timeout_s=1.5, workdir=tmp_path / "work")
    assert time.perf_counter() - started < 30
    assert run.returncode in (-signal.SIGINT, -signal.SIGKILL) and not run.raw_csv
    assert timed_out(run.status) and run.status[-1]["problem_timeout_s"] == 1.5


@pytest.mark.parametrize("body, says", [
    ("exit 1\n", "ncu or the profiled program exited with code 1 before the first problem "
                 "began; it printed nothing (check ncu alone: `ncu --version`)"),
    ("echo '==ERROR== unrecognised option' >&2; exit 1\n",
     "exited with code 1 before the first problem began; its last output: '==ERROR== "
     "unrecognised option'"),
    ("sleep 600\n", "ncu or the profiled program was stopped by signal"),
])
def test_an_ncu_that_fails_before_the_program_starts_is_named_in_one_line(tmp_path, body,
                                                                         says):
    from autoprofiler_env.errors import ProfiledProgramError
    from autoprofiler_env.profiler import profile_problems

    with pytest.raises(ProfiledProgramError) as e:
        profile_problems([load_problem("relu_16384x16384")], ["SpeedOfLight"],
                         ncu=_fake_ncu(tmp_path, body), problem_timeout_s=1.5,
                         workdir=tmp_path / "work")
    assert says in str(e.value).splitlines()[0]


def test_a_hang_is_stopped_at_once_when_the_caller_was_started_with_sigint_ignored(tmp_path):
    """A background job of a script (``cmd &``) starts with SIGINT ignored, and a child
    inherits that: ncu would ignore the runner's SIGINT and wait out the 30 s grace before
    its SIGKILL, at every stop (2026-12-04: CI started with ``&`` failed four tests so)."""
    fake = _fake_ncu(tmp_path, "sleep 600\n")
    code = ("import time\nfrom autoprofiler_env.problems import load_problem\n"
            "from autoprofiler_env.profiler.runner import run_ncu\n"
            "started = time.perf_counter()\n"
            f"run = run_ncu([load_problem('relu_16384x16384')], ['SpeedOfLight'], ncu={fake!r},"
            f" problem_timeout_s=1.0, workdir={str(tmp_path / 'work')!r})\n"
            "print(round(time.perf_counter() - started, 1), run.status[-1]['event'])\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[1],
                          capture_output=True, text=True, timeout=120, check=False,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert done.returncode == 0, done.stderr
    seconds, event = done.stdout.split()
    assert event == "timeout" and float(seconds) < 20, done.stdout  # not 1 s + the 30 s grace


def _fake_ncu_writing(tmp_path: Path, lines: list[dict]) -> str:
    """A fake ncu whose program writes ``lines`` to the driver's status file, then hangs."""
    import json

    echo = "".join(f"echo '{json.dumps(line)}' >> \"$status\"\n" for line in lines)
    return _fake_ncu(tmp_path, 'for a in "$@"; do spec=$a; done\n'  # no status file at first
                     'status="$(dirname "$spec")/status.jsonl"\nsleep 1\n' + echo
                     + "sleep 600\n")


@pytest.mark.parametrize("bounded", [True, False])
def test_a_profiled_call_is_stopped_by_the_limit_its_operators_set(tmp_path, bounded):
    """The driver's ``range`` line says how many operators the profiled call holds; with
    ``range_timeout_s`` the call may take that long (at most ``problem_timeout_s``), which a
    few operators launching hundreds of kernels outlast. Without it, the line changes
    nothing."""
    relu = load_problem("relu_16384x16384")
    fake = _fake_ncu_writing(tmp_path, [
        {"event": "begin", "index": 0, "uri": relu.uri},
        {"event": "range", "index": 0, "ops": 3, "ops_profiled": 2}])
    started = time.perf_counter()
    run = run_ncu([relu], ["SpeedOfLight"], ncu=fake, problem_timeout_s=4.0,
                  range_timeout_s=(lambda ops: 0.5 * ops) if bounded else None,
                  workdir=tmp_path / "work")
    assert timed_out(run.status) and run.status[-2]["event"] == "range"
    assert run.status[-1]["problem_timeout_s"] == (1.0 if bounded else 4.0)
    assert time.perf_counter() - started < 30
    run = run_ncu([relu], ["SpeedOfLight"], ncu=fake, problem_timeout_s=2.0,
                  range_timeout_s=lambda ops: 100.0, workdir=tmp_path / "work")
    assert run.status[-1]["problem_timeout_s"] == 2.0  # never above the problem's own limit


def test_the_operator_limit_covers_every_problem_recorded_uncapped():
    """``range_timeout_s`` against the H200's saved runs with operator counts (both datasets,
    the full set and the fidelity study's sets): each problem that finished without the
    kernel cap took under 75% of its limit; those that needed the cap (cuDNN's FFT transposed
    convolution, the LSTMs) took more than it, capped."""
    import json

    share = {}
    for path in (Path(__file__).parents[1] / "docs" / "data").rglob("run.json"):
        meta = json.loads(path.read_text())
        capped = "--launch-count" in meta["command"]
        for r in meta["status"]:
            if r.get("event") == "problem" and r.get("ok") and "ops_profiled" in r:
                share[r["uri"], capped] = max(share.get((r["uri"], capped), 0),
                                              r["profiled_s"] / range_timeout_s(r["ops_profiled"]))
    capped = {u for (u, c) in share if c}
    others = {u: s for (u, c), s in share.items() if u not in capped}
    assert len(others) > 100 and max(others.values()) < 0.75
    assert len(capped) >= 4 and min(share[u, True] for u in capped) > 1


def test_the_kernel_cap_is_ncus_launch_count_for_a_run_of_one_problem(tmp_path):
    args = tmp_path / "args"
    fake = _fake_ncu(tmp_path, f'echo "$@" > "{args}"\n')
    relu, softmax = load_problem("relu_16384x16384"), load_problem("softmax_16384x4096")
    with pytest.raises(ProfilingError, match="one problem"):
        run_ncu([relu, softmax], ["SpeedOfLight"], ncu=fake, max_kernels=64)
    run = run_ncu([relu], ["SpeedOfLight"], ncu=fake, max_kernels=64, workdir=tmp_path / "w")
    assert "--launch-count 65" in args.read_text()  # 64 and the primer's kernel
    assert run.command[run.command.index("--launch-count") + 1] == "65"
    run_ncu([relu], ["SpeedOfLight"], ncu=fake, workdir=tmp_path / "w")
    assert "--launch-count" not in args.read_text()


def test_a_candidates_model_new_is_profiled_on_the_problems_inputs(tmp_path):
    """``profile --candidate``: the driver's spec names the candidate, and the driver builds
    its ModelNew where the problem's Model would be, with the reference's seeds (the same
    weights) and the problem's inputs (built here on the CPU, as the driver builds them on the
    GPU)."""
    import json

    import torch

    from autoprofiler_env.profiler.driver import build

    problem = tmp_path / "linear_relu.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self, n):\n        super().__init__()\n"
        "        self.fc = nn.Linear(n, 4)\n\n    def forward(self, x):\n"
        "        return torch.relu(self.fc(x))\n\n\n"
        "def get_inputs():\n    return [torch.randn(3, 8)]\n\n\n"
        "def get_init_inputs():\n    return [8]\n")
    candidate = tmp_path / "mine.py"
    candidate.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self, n):\n        super().__init__()\n"
        "        self.fc = nn.Linear(n, 4)\n\n    def forward(self, x):\n"
        "        return torch.clamp_min(self.fc(x), 0.0)\n")
    spec_copy = tmp_path / "spec.json"
    fake = _fake_ncu(tmp_path, f'for a in "$@"; do spec=$a; done\ncp "$spec" "{spec_copy}"\n')
    mine = load_problem(str(problem)).with_candidate(candidate)
    assert mine.uri.endswith("linear_relu#ModelNew")
    run_ncu([mine], ["SpeedOfLight"], ncu=fake, workdir=tmp_path / "w")
    [entry] = json.loads(spec_copy.read_text())["problems"]
    assert entry == {"uri": mine.uri, "path": str(problem), "candidate": str(candidate)}
    model, inputs = build(entry, device="cpu")
    reference, same_inputs = build({"uri": "r", "path": str(problem)}, device="cpu")
    assert type(model).__name__ == "ModelNew" and type(reference).__name__ == "Model"
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                 reference.state_dict().values()))
    assert torch.equal(inputs[0], same_inputs[0])
    assert torch.equal(model(*inputs), reference(*inputs))
    (tmp_path / "none.py").write_text("x = 1\n")
    with pytest.raises(ProblemError, match="defines no ModelNew"):
        build({"uri": "c", "path": str(problem), "candidate": str(tmp_path / "none.py")},
              device="cpu")


def test_the_primers_kernel_belongs_to_no_problem_and_marks_the_run_primed():
    from autoprofiler_env.profiler.driver import PRIMER_INDEX
    from autoprofiler_env.profiler.runner import first_unprimed, primed

    run = _run("section-SpeedOfLight")
    header, units, first, *rest = run.raw_csv.splitlines()
    primer = first.replace('"0",', '"999",', 1).replace(":ap_0:", f":ap_{PRIMER_INDEX}:")
    with_primer = dataclasses.replace(
        run, raw_csv="\n".join([header, units, primer, first, *rest]),
        status=[run.status[0], {"event": "primer", "s": 1.2}, *run.status[1:]])
    before, after = profiles_from_run(run)[0], profiles_from_run(with_primer)[0]
    assert [p.kernels for p in after] == [p.kernels for p in before]
    assert not primed(run.status) and primed(with_primer.status)
    assert first_unprimed(run.status) == run.problems[0]["uri"]
    assert first_unprimed(with_primer.status) is None


def test_a_problem_that_times_out_in_a_batch_is_profiled_again_alone_and_capped(monkeypatch):
    """profile_problems: the problem in flight at a timeout gets a run of its own with the
    kernel cap (and the caller's operator cap); the problems after it are profiled in the next
    batched run. A run of one problem takes the caller's kernel cap (None: none, as a live
    profile of a problem recorded uncapped)."""
    import autoprofiler_env.profiler as profiler

    study = _run("section-LaunchStats")
    calls, devices = [], []
    late = []  # the names whose run times out after its last problem ended (ncu's report)

    def fake_run_ncu(problems, sections, **kwargs):
        calls.append(([p.name for p in problems], kwargs.get("max_kernels"),
                      kwargs.get("max_ops")))
        devices.append(kwargs["device"])
        # a batched run's profiled calls are bounded by their operators: a timeout is retried
        assert (kwargs["range_timeout_s"] is range_timeout_s) == (len(problems) > 1)
        status = [{"event": "started"}]
        for i, p in enumerate(problems):
            status.append({"event": "begin", "index": i, "uri": p.uri})
            if p.name == "lstm_sequence_64x128x512" and kwargs.get("max_kernels") is None:
                status.append({"event": "timeout", "problem_timeout_s": 300.0})
                break
            status.append({"event": "problem", "index": i, "uri": p.uri, "ok": True,
                           "profiled_s": 1.0})
        if [p.name for p in problems] == late:
            status += [{"event": "finished"}, {"event": "timeout", "problem_timeout_s": 300.0}]
        # each problem "profiles" as the study's first kernel, under its own range and id
        header, units, first = study.raw_csv.splitlines()[:3]
        assert first.startswith('"0",') and ":ap_0:" in first
        rows = [first.replace('"0",', f'"{i}",', 1).replace(":ap_0:", f":ap_{i}:")
                for i in range(len(problems))]
        return dataclasses.replace(study, problems=[{"uri": p.uri} for p in problems],
                                   status=status, raw_csv="\n".join([header, units, *rows]),
                                   details_csv="")

    monkeypatch.setattr(profiler, "run_ncu", fake_run_ncu)
    names = ["relu_16384x16384", "lstm_sequence_64x128x512", "softmax_16384x4096"]
    profiles, failures = profiler.profile_problems([load_problem(n) for n in names],
                                                   ["LaunchStats"])
    assert calls == [(names, None, 64), (["lstm_sequence_64x128x512"], 64, 64),
                     (["softmax_16384x4096"], 64, 64)]
    assert [p.problem_uri.rsplit("/", 1)[1] for p in profiles] == names and not failures
    calls.clear()
    profiles, failures = profiler.profile_problems([load_problem(n) for n in names],
                                                   ["LaunchStats"], max_ops=24, max_kernels=None,
                                                   device="cuda:1")
    assert calls == [(names, None, 24), (["lstm_sequence_64x128x512"], 64, 24),
                     (["softmax_16384x4096"], None, 24)]
    assert len(profiles) == 3 and not failures
    assert devices[-3:] == ["cuda:1"] * 3  # a review: the retry alone profiled "cuda"
    # a timeout after the last problem ended (ncu writing a large batch's report) has no
    # problem to blame: the profiles are kept (a review: it raised a TypeError)
    late[:] = ["relu_16384x16384", "softmax_16384x4096"]
    calls.clear()
    profiles, failures = profiler.profile_problems([load_problem(n) for n in late],
                                                   ["LaunchStats"])
    assert calls == [(late, None, 64)] and len(profiles) == 2 and not failures


def test_terminating_the_caller_kills_ncu(tmp_path):
    """A SIGTERM to the process running ncu (as `timeout` sends) leaves no ncu behind."""
    marker = tmp_path / "ncu_pid"
    fake = _fake_ncu(tmp_path, f'echo $$ > "{marker}"; sleep 600\n')
    code = ("from autoprofiler_env.problems import load_problem\n"
            "from autoprofiler_env.profiler.runner import run_ncu\n"
            f"run_ncu([load_problem('relu_16384x16384')], ['SpeedOfLight'], ncu={fake!r})\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).parents[1])
    for _ in range(200):
        if marker.exists() and marker.read_text().strip():
            break
        time.sleep(0.1)
    pid = int(marker.read_text())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    for _ in range(100):  # killed at once; reaped by init, which a loaded machine (CI's, beside
        try:              # other work) took over 0.5 s to do
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_measured_metrics_per_section_explain_every_single_section_run():
    c = load_catalogue()
    always = set(c.always_collected)
    assert "gpu__time_duration.sum" in always
    assert "sm__throughput.avg.pct_of_peak_sustained_elapsed" in c.section("SpeedOfLight").collected
    for name in ("section-SpeedOfLight", "section-WarpStateStats", "section-Occupancy"):
        run = _run(name)
        section = c.section(run.sections[0])
        assert not set(section.collected) & always
        profiles, _ = profiles_from_run(run)
        got = {m for p in profiles for k in p.kernels for m in k.metrics}
        assert got <= always | set(section.collected)


# -- the driver's operator cap ------------------------------------------------------------------

@pytest.mark.parametrize("max_ops, expected", [(None, (7, 7)), (3, (7, 3)), (100, (7, 7))])
def test_the_nvtx_range_closes_after_max_ops(monkeypatch, max_ops, expected):
    import torch

    from autoprofiler_env.profiler import driver

    events = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_push",
                        lambda name: events.append(("push", name)))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: events.append(("pop", None)))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)

    class Chain(torch.nn.Module):  # 7 operators: relu, then (mul, add) three times
        def forward(self, x):
            x = torch.relu(x)
            for _ in range(3):
                events.append(("op", None))
                x = x * 2 + 1
            return x

    ops = driver._ranged_call(Chain(), [torch.ones(4)], "ap_0", max_ops)
    assert ops == expected
    pushes = len(events)
    assert driver._ranged_call(Chain(), [torch.ones(4)], None, max_ops) == expected  # counts
    assert not [e for e in events[pushes:] if e[0] != "op"]  # in no range: its range line
    assert events[0] == ("push", "ap_0") and [e for e in events if e[0] == "pop"] == [("pop", None)]
    if max_ops == 3:  # closed after relu and the first mul and add: before the second step
        assert events.index(("pop", None)) < [i for i, e in enumerate(events) if e[0] == "op"][2]


def test_ncu_profiles_the_gpu_it_is_given(tmp_path, monkeypatch):
    """``device="cuda:N"`` judged a candidate on GPU N while ncu profiled the default GPU (its
    driver builds on ``cuda``): the profiled program now sees GPU N alone, counted among the
    GPUs this process sees, as torch counts them."""
    from autoprofiler_env.profiler.runner import visible_devices

    seen = tmp_path / "seen.txt"
    fake = _fake_ncu(tmp_path, f'echo "${{CUDA_VISIBLE_DEVICES-unset}}" > "{seen}"; exit 1\n')
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for device, visible in (("cuda", "unset"), ("cuda:1", "1")):
        run = run_ncu([load_problem("relu_16384x16384")], ["SpeedOfLight"], ncu=fake,
                      workdir=tmp_path / device.replace(":", "-"), device=device)
        assert run.returncode == 1 and seen.read_text().strip() == visible
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert visible_devices("cuda:1") == {"CUDA_VISIBLE_DEVICES": "5"}
    assert visible_devices("cuda") == {}
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES='4,5' shows 2 GPU"):
        visible_devices("cuda:2")
    with pytest.raises(ValueError, match="'cpu': ncu profiles a CUDA GPU"):
        visible_devices("cpu")
    from autoprofiler_env.errors import ProfilingError
    from autoprofiler_env.profiler import profile_problems

    for device in ("cpu", "cudax", "cuda:a"):  # refused before ncu is looked for
        with pytest.raises(ProfilingError, match=rf"relu_16384x16384: collecting SpeedOfLight "
                                                 rf"runs ncu on a CUDA GPU, and the device "
                                                 rf"given is '{device}'"):
            profile_problems([load_problem("relu_16384x16384")], ["SpeedOfLight"],
                             ncu=fake, device=device)
