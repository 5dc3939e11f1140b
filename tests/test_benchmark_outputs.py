"""The benchmark's outputs: written atomically (an interrupted write leaves the earlier file
and no temporary one), and a picture in which every curve can be told apart and named."""

import io
import os
import struct
from pathlib import Path

import pytest
from matplotlib.colors import to_rgba

from experiments import benchmark as bench
from experiments.benchmark import COLUMNS, agent_styles, figure, plot, write_csv


@pytest.fixture(scope="module")
def summary(study_dataset):
    """A real summary: every agent of baselines/ at three budgets (12-problem dataset)."""
    rows, _ = bench.benchmark(str(study_dataset), [0.1, 0.25, 0.5], seeds=1, split="train")
    return rows


def _rows(n: int) -> list[dict]:
    return [{"agent": f"a{i}", "budget": 0.5, "episodes": 3, "geomean_speedup": 1.0 + i,
             "fast_1": 0.5, "mean_cost_s": float(i), "regret": 0.1, "fits_budget": 1.0}
            for i in range(n)]


def _agent_lines(ax):
    return [line for line in ax.get_lines() if not line.get_label().startswith("_")]


# -- atomic writes ---------------------------------------------------------------------------

def test_csv_is_the_same_as_a_plain_write(tmp_path):
    import csv

    rows = _rows(3)
    write_csv(rows, tmp_path / "out" / "b.csv", COLUMNS)   # makes the folder too
    with (tmp_path / "plain.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    assert (tmp_path / "out" / "b.csv").read_bytes() == (tmp_path / "plain.csv").read_bytes()


def test_a_csv_write_failing_midway_keeps_the_earlier_file(tmp_path):
    path = tmp_path / "benchmark.csv"
    write_csv(_rows(2), path, COLUMNS)
    good = path.read_bytes()
    bad = _rows(50)
    bad[30]["unexpected"] = 1          # DictWriter raises on this row, after 30 rows written
    with pytest.raises(ValueError):
        write_csv(bad, path, COLUMNS)
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["benchmark.csv"]


def test_a_csv_write_interrupted_on_disk_keeps_the_earlier_file(tmp_path, monkeypatch):
    """Interrupted (Ctrl-C) after the new bytes went into the temporary file, before the
    rename: the earlier file is intact and the temporary file is gone."""
    path = tmp_path / "episodes.csv"
    write_csv(_rows(2), path)
    good = path.read_bytes()
    seen = []

    def interrupted(fd):
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_csv(_rows(40), path)
    monkeypatch.undo()
    assert len(seen) == 1 and len(seen[0]) == 2      # the temporary file did exist midway
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episodes.csv"]


def test_a_png_write_failing_midway_keeps_the_earlier_picture(tmp_path, monkeypatch, summary):
    path = tmp_path / "benchmark.png"
    assert plot(summary, path) == path
    good = path.read_bytes()

    def broken_savefig(self, fname, *args, **kwargs):
        half = b"\x89PNG\r\n\x1a\n half a picture"
        if hasattr(fname, "write"):
            fname.write(half)
        else:                          # a path: what a direct savefig would have left
            Path(fname).write_bytes(half)
        raise KeyboardInterrupt

    monkeypatch.setattr("matplotlib.figure.Figure.savefig", broken_savefig)
    with pytest.raises(KeyboardInterrupt):
        plot(summary, path)
    monkeypatch.undo()
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["benchmark.png"]

    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        plot(summary, path)
    monkeypatch.undo()
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["benchmark.png"]


# -- the picture -----------------------------------------------------------------------------

def test_the_png_is_written_at_a_readable_resolution(tmp_path, summary):
    path = plot(summary, tmp_path / "sub" / "benchmark.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])     # the IHDR chunk
    assert width >= 1800 and height >= 1000


def test_the_legend_names_every_agent_and_every_curve(summary):
    fig = figure(summary)
    ax = fig.axes[0]
    agents = {r["agent"] for r in summary}
    assert len(agents) >= 23
    legend = ax.get_legend()
    names = [t.get_text() for t in legend.get_texts()]
    assert sorted(names) == sorted(agents)             # one entry per agent, none twice
    lines = _agent_lines(ax)
    assert sorted(line.get_label() for line in lines) == sorted(agents)
    assert names[:2] == ["oracle", "no-profile"]
    # outside the axes, to their right
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1


def test_no_two_curves_share_colour_and_marker(summary):
    lines = _agent_lines(figure(summary).axes[0])
    pairs = [(to_rgba(line.get_color()), line.get_marker()) for line in lines]
    assert all(marker not in (None, "None", "") for _, marker in pairs)
    assert len(set(pairs)) == len(pairs)


def test_agent_styles_stay_distinct_for_many_agents():
    names = ["oracle", "no-profile", "random", "roofline-tree", "curated:x"]
    names += [f"set:{i}" for i in range(5)] + [f"section:S{i}" for i in range(50)]
    styles = agent_styles(names)
    pairs = {(to_rgba(s["color"]), s["marker"]) for s in styles.values()}
    assert len(pairs) == len(names)
    # and none of the others takes a red that reads as the shipped tree's crimson
    tree = agent_styles(["autoprofiler-tree", *names])
    crimson = to_rgba(tree.pop("autoprofiler-tree")["color"])
    assert all(sum(abs(a - b) for a, b in zip(to_rgba(s["color"]), crimson)) > 0.3
               for s in tree.values())


def test_no_two_agents_share_a_colour_while_the_palette_lasts():
    """Reviewed: compare_algorithms drew RecurrentPPO in MaskablePPO's blue and QR-DQN in the
    hindsight configuration's cyan, told apart by their markers alone."""
    names = ["oracle", "no-profile", "maskable-ppo", "ppo", "a2c", "dqn", "qrdqn",
             "recurrent-ppo", "trpo", "fixed (chosen on train)", "fixed (best in hindsight)",
             "set:full", "curated:cudaforge-like"]
    colours = [to_rgba(s["color"]) for s in agent_styles(names).values()]
    assert len(set(colours)) == len(names)
    many = agent_styles([f"agent-{i}" for i in range(150)])  # past the pairs: they repeat
    assert len({(s["color"], s["marker"]) for s in many.values()}) == 70


def test_an_agent_every_figure_names_keeps_its_colour_and_marker_whatever_else_is_drawn():
    """Reviewed: colours were dealt by sorted place among the agents drawn, so MaskablePPO
    was orange in the benchmark's figure and navy in the experiment's."""
    named = ["maskable-ppo", "fixed (chosen on train)", "fixed (best in hindsight)",
             "roofline-tree", "set:full"]
    few = agent_styles(named)
    many = agent_styles([*named, "random", "curated:x", "set:a", "oracle", "no-profile",
                         *(f"section:S{i}" for i in range(15))])
    for name in named:
        assert (few[name]["color"], few[name]["marker"]) == (many[name]["color"],
                                                               many[name]["marker"])
    pairs = [(to_rgba(s["color"]), s["marker"]) for s in many.values()]
    assert len(set(pairs)) == len(pairs)


def test_the_oracle_and_no_profile_stand_out(summary):
    lines = {line.get_label(): line for line in _agent_lines(figure(summary).axes[0])}
    emphasised = [lines.pop("oracle"), lines.pop("no-profile")]
    tree = lines.pop("autoprofiler-tree", None)
    for line in emphasised + [tree] * (tree is not None):
        assert line.get_linewidth() > max(other.get_linewidth() for other in lines.values())
        assert line.get_markersize() > max(other.get_markersize() for other in lines.values())
        assert line.get_zorder() > max(other.get_zorder() for other in lines.values())
    if tree is not None:  # the shipped tree stands out, below the ceiling and the floor
        assert all(tree.get_zorder() < line.get_zorder() for line in emphasised)


def test_points_are_labelled_with_their_budgets(summary):
    ax = figure(summary).axes[0]
    oracle = sorted((r for r in summary if r["agent"] == "oracle"), key=lambda r: r["budget"])
    texts = [t for t in ax.texts if to_rgba(t.get_color()) == to_rgba("black")]
    written = {b for t in texts for b in t.get_text().split(", ")}
    assert {f"{r['budget'] * 100:g}%" for r in oracle} <= written
    # the oracle's labels sit at its points
    at = {(round(t.xy[0], 9), round(t.xy[1], 9)) for t in texts}
    assert at == {(round(r["mean_cost_s"], 9), round(r["geomean_speedup"], 9)) for r in oracle}
    # every budget is also named in the title, and no-profile's level is written out
    title = ax.get_title()
    assert all(f"{b * 100:g}%" in title for b in (0.1, 0.25, 0.5))
    assert any(t.get_text().startswith("no-profile: ") for t in ax.texts)


def test_figure_survives_a_summary_without_the_emphasised_agents():
    fig = figure(_rows(4))
    assert len(_agent_lines(fig.axes[0])) == 4
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    assert buffer.getvalue()[:4] == b"\x89PNG"
