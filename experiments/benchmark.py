"""The benchmark: every agent on the test split of a dataset, at several budgets.

    autoprofiler benchmark [--dataset FILE] [--budgets 0.1,0.25,0.5,1.0] [--seeds N]
                           [--policy SPEC ...] [--out runs/benchmark] [--wandb]

Every baseline, the AutoProfiler tree the project ships for the optimizer
(``autoprofiler-tree``, :func:`agents.tree.shipped_tree`), the MaskablePPO policy it ships
(``maskable-ppo``, :func:`agents.rl.shipped_model`), and each policy given with
``--policy`` (a baseline's name, a tree file, a saved stable-baselines3 model or a policy
of your own, ``py:MODULE:ATTR``: :mod:`experiments.policies`; named as that module says, and
by the spec as given where two specs would share a name, as ``tree:a/tree.json`` and
``tree:b/tree.json`` would share ``tree:tree``), runs every problem of the
split once per budget through the one evaluation
(:func:`autoprofiler_env.evaluation.rollout`; a stochastic policy once per seed). Per agent
and budget: the geometric-mean speedup (the project's one score,
:mod:`autoprofiler_env.scoring`: an incorrect candidate counts as eager, 1.0x, the program
one would ship), fast_1 (the share of problems with a correct candidate
faster than eager), the mean profiling cost (seconds of ncu replay), the regret to the
hindsight oracle (mean of ln(oracle speedup) - ln(agent speedup)), and for fixed
configurations the share of problems where they fit the budget (``fits_budget``; empty, None,
for the other agents, to which it does not apply). Saves ``benchmark.csv``,
``episodes.csv``, ``benchmark.png`` (speedup against cost, a curve per agent) and
``benchmark.json``, each rendered whole and then written atomically
(:func:`autoprofiler_env.atomic.write_atomic`): an interrupted run leaves the earlier files as
they were. ``benchmark.json`` (and with ``--wandb``, :func:`log_wandb`, the run's config) names
the dataset (and its sha256), the settings, the sha256 of each file a learned or given policy
was read from (``policy_files``: :func:`policy_files`) and the versions.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import statistics
from pathlib import Path

from tqdm import tqdm

from autoprofiler_env.atomic import write_atomic, write_png
from autoprofiler_env.errors import AutoProfilerError, PolicyError, warn
from autoprofiler_env.numeric import budgets_once
from autoprofiler_env.scoring import geomean, shipped_speedup

COLUMNS = ("agent", "budget", "episodes", "geomean_speedup", "fast_1", "mean_cost_s",
           "regret", "fits_budget")


def episode_row(entry, record, budget: float, seed: int) -> dict:
    """One episode as a row of ``episodes.csv``."""
    return {"agent": entry.name, "problem": record.problem,
            "sections": "+".join(record.sections), "cost_s": record.cost,
            "candidate": record.candidate, "correct": record.correct,
            "speedup": shipped_speedup(record.correct, record.speedup),
            "reward": record.reward, "fits_budget": entry.fits_budget(record.sections),
            "budget": budget, "seed": seed, "invalid_action": record.invalid_action}


def benchmark(dataset: str | None, budgets: list[float], seeds: int = 3,
              split: str = "test", policies: list = (),
              optimizer: str | None = None,
              tolerance: str | float | None = None,
              llm_missing: str | None = None) -> tuple[list[dict], list[dict]]:
    """(summary rows, episode rows) of every baseline and every policy of ``policies`` at
    every budget, each episode through :func:`autoprofiler_env.evaluation.rollout`
    (deterministic, every problem of the split once; a stochastic policy once per seed,
    seeded with it: :func:`experiments.policies.is_stochastic`); ``optimizer``: the
    environment's (None: its default); ``tolerance``: the environment's (None: its default,
    atol = rtol = 1e-2; ``"kernelbench"`` serves the KernelBench problems ill-posed there);
    ``llm_missing``: the environment's, for an LLM optimizer's dataset (None: its default,
    ``"raise"``).

    ``policies``: spec strings (:func:`experiments.policies.load`: a baseline's name,
    ``sb3:FILE``, ``tree:FILE``, ``py:MODULE:ATTR``, ...), policy objects (anything with
    SB3's ``predict``), classes or functions called with the benchmark's environment that
    return one, or ``(name, any of those)`` pairs (:func:`experiments.policies.as_entry`)."""
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401  (registers the ids)
    from agents.rl import shipped_model
    from agents.tree import shipped_tree
    from autoprofiler_env.evaluation import masked_note, rollout
    from baselines import all_agents
    from experiments.policies import (
        SHIPPED_RL,
        SHIPPED_TREE,
        Entry,
        as_entry,
        learned_elsewhere,
        load,
    )

    budgets_once(budgets)  # each would be run and reported again, under one heading
    env = gym.make("AutoProfiler-v0", **env_kwargs(dataset, split, optimizer, tolerance,
                                                   llm_missing))
    entries = [Entry(a.name, a) for a in all_agents(env)]
    for shipped, name in ((shipped_tree, SHIPPED_TREE), (shipped_model, SHIPPED_RL)):
        if shipped(env.unwrapped.optimizer) is not None:
            try:
                entries.append(load(name, env))
            except AutoProfilerError as e:  # one that cannot act here: an error if asked for
                if name in policies:
                    raise
                warn(f"{e} ({name} is left out of this benchmark)")
    shown = {e.name for e in entries}  # a baseline named with --policy is already here:
    given, merged = [], set()  # merged into it once; a spec given twice is named twice below
    for item in policies:
        if isinstance(item, str) and item in shown and item not in merged:
            merged.add(item)
            continue
        given.append((item, as_entry(item, env)))
    short = [e.name for e in entries] + [e.name for _, e in given]
    for item, entry in given:  # two specs of one short name (tree:a/tree.json and
        # tree:b/tree.json are both tree:tree) are named by the specs as given
        if isinstance(item, str) and short.count(entry.name) > 1 and entry.name != item:
            entry.name = item
    entries += [e for _, e in given]
    names = [e.name for e in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PolicyError(f"policies named twice: {', '.join(twice)} (give each --policy "
                         "once; name a policy object with a (name, policy) pair)")
    for one in entries:
        for message in learned_elsewhere(one, env, dataset):
            warn(message)
    summary, episodes = [], []
    for budget in budgets:
        oracle_speedup, rows = {}, {}
        # closed (its line cleared) by an error too: the command's error then has a line
        with tqdm(entries, desc=f"budget {budget:g}", unit="agent", leave=False) as bar:
            for entry in bar:
                runs = []
                for seed in range(seeds if entry.stochastic else 1):
                    entry.seed(seed)
                    try:
                        done = rollout(env, entry.policy, budget=budget)
                    except ValueError as e:  # an action the environment refused: whose
                        raise ValueError(f"{entry.name}: {e}") from None
                    runs += [episode_row(entry, r, budget, seed) for r in done]
                if entry.name == "oracle":
                    oracle_speedup = {r["problem"]: r["speedup"] for r in runs}
                rows[entry.name] = runs
                episodes += runs
        for entry in entries:
            runs = rows[entry.name]
            summary.append({
                "agent": entry.name, "budget": budget, "episodes": len(runs),
                "geomean_speedup": geomean(r["speedup"] for r in runs),
                "fast_1": statistics.fmean(r["correct"] and r["speedup"] > 1.0 for r in runs),
                "mean_cost_s": statistics.fmean(r["cost_s"] for r in runs),
                "regret": statistics.fmean(math.log(oracle_speedup[r["problem"]])
                                           - math.log(r["speedup"]) for r in runs),
                "fits_budget": _share_fitting(runs),
            })
    for entry in entries:
        mine = [e["invalid_action"] for e in episodes if e["agent"] == entry.name]
        note = masked_note(entry.name, sum(mine), len(mine))
        if note:
            warn(note)
    return summary, episodes


def env_kwargs(dataset: str | None = None, split: str = "test", optimizer: str | None = None,
               tolerance: float | None = None, llm_missing: str | None = None) -> dict:
    """The benchmark's environment's make kwargs (a None: the environment's default)."""
    return ({"split": split} | ({"dataset": dataset} if dataset else {})
            | ({"optimizer": optimizer} if optimizer else {})
            | ({"tolerance": tolerance} if tolerance is not None else {})
            | ({"llm_missing": llm_missing} if llm_missing is not None else {}))


def policy_files(names, **kwargs) -> dict[str, dict[str, str]]:
    """``{name: {path: sha256}}`` of the files each of ``names`` (spec strings, as
    :func:`benchmark` takes them, or the shipped agents' names) is read from in the
    benchmark's environment (``kwargs``: :func:`env_kwargs`'), those that read none (a
    baseline's name) left out: what a logged benchmark keeps to say which model or tree it
    ran (:func:`experiments.policies.checksums`, as an experiment's run file keeps them)."""
    import gymnasium as gym

    import autoprofiler_env  # noqa: F401  (registers the ids)
    from experiments.policies import checksums

    env = gym.make("AutoProfiler-v0", **env_kwargs(**kwargs))
    try:
        found = {name: checksums(name, env) for name in names if isinstance(name, str)}
    finally:
        env.close()
    return {name: files for name, files in found.items() if files}


def _share_fitting(runs: list[dict]) -> float | None:
    """The share of ``runs`` whose fixed configuration fit the budget; None for an agent that
    is not a fixed configuration (its episodes' ``fits_budget`` is None)."""
    fits = [r["fits_budget"] for r in runs]
    if any(f is None for f in fits):
        return None
    return statistics.fmean(bool(f) for f in fits)


def best_fixed_row(rows: list[dict]) -> dict:
    """The fixed configuration's row (:func:`baselines.is_fixed`) with the best
    ``geomean_speedup`` among ``rows`` (the benchmark's summary rows at one budget); on a tie,
    the configuration that fits the budget on more problems (``fits_budget``: a cut one is not
    quite the configuration it is named after), then the first."""
    from baselines import is_fixed

    fixed = [r for r in rows if is_fixed(r["agent"])]
    return max(fixed, key=lambda r: (round(r["geomean_speedup"], 9), r["fits_budget"]))


def write_csv(rows: list[dict], path: Path, columns=None, extrasaction: str = "raise") -> None:
    """Writes the rows as CSV, atomically: the whole file is rendered first, then replaces
    ``path`` in one rename, so an interrupted run leaves the earlier file as it was.
    ``columns``: the header (default: the first row's keys); ``extrasaction``:
    :class:`csv.DictWriter`'s, what a key outside ``columns`` does (``"raise"``, or
    ``"ignore"`` to leave it out)."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=list(columns or rows[0]),
                            extrasaction=extrasaction)
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(Path(path), buffer.getvalue().encode("utf-8"))


# The picture: one curve per agent, each with its own (colour, marker) pair. The oracle (the
# ceiling) and no-profile (the floor to beat) are drawn in black and grey, above the rest,
# the shipped AutoProfiler tree in crimson; the agents every figure names (:data:`_NAMED`:
# MaskablePPO, the experiment's fixed configurations, the shipped baselines) keep one pair in
# every figure of the project (the benchmark's, an experiment's, the data report's); the
# others take colours of tab10 (its grey left out, which is no-profile's, and its red, which
# read as the tree's crimson, given for a dark blue of tab20b), tab20b's olive and plum, and
# markers whose cycle lengths are coprime, skipping the named agents' pairs, so no two of 77
# agents share a pair, and no two share a colour while the palette's 11 colours last.
ORACLE, NO_PROFILE, TREE = "oracle", "no-profile", "autoprofiler-tree"
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#393b79", "#9467bd", "#8c564b", "#e377c2",
            "#bcbd22", "#17becf", "#637939", "#7b4173")
_MARKERS = ("o", "^", "D", "v", "P", "<", ">")
_NAMED = {  # name -> (colour, marker): the same in every figure
    "maskable-ppo": ("#1f77b4", "o"),
    "fixed (chosen on train)": ("#2ca02c", "D"),
    "fixed (best in hindsight)": ("#17becf", "v"),
    "roofline-tree": ("#ff7f0e", "^"),
    "curated:cudaforge-like": ("#9467bd", "P"),
    "set:full": ("#8c564b", "<"),
    "random": ("#bcbd22", ">"),
}
_EMPHASISED = {
    ORACLE: {"color": "black", "marker": "*", "markersize": 15, "linewidth": 2.8,
             "linestyle": "-", "zorder": 10},
    NO_PROFILE: {"color": "#7f7f7f", "marker": "s", "markersize": 11, "linewidth": 2.8,
                 "linestyle": "-", "zorder": 9, "markeredgecolor": "black"},
    TREE: {"color": "crimson", "marker": "X", "markersize": 10, "linewidth": 2.4,
           "linestyle": "-", "zorder": 8, "markeredgecolor": "black"},
}


def _family(name: str) -> int:
    """Legend order: the oracle, no-profile, the other policies, ncu's sets, single
    sections."""
    if name == ORACLE:
        return 0
    if name == NO_PROFILE:
        return 1
    if name.startswith("section:"):
        return 4
    if name.startswith("set:"):
        return 3
    return 2


def agent_styles(names) -> dict[str, dict]:
    """Line2D keyword arguments per agent: a (colour, marker) pair no other agent has, the
    same for an agent of :data:`_NAMED` (or emphasised) in every figure."""
    names = sorted(names, key=lambda n: (_family(n), n))
    drawn = {_EMPHASISED[n]["color"] if n in _EMPHASISED else _NAMED[n][0]
             for n in names if n in _EMPHASISED or n in _NAMED}
    styles, pairs = {}, _unnamed_pairs(drawn)
    for name in names:
        if name in _EMPHASISED:
            styles[name] = dict(_EMPHASISED[name])
            continue
        family = _family(name)
        colour, marker = _NAMED[name] if name in _NAMED else next(pairs)
        style = {"color": colour, "marker": marker}
        if family == 4:       # single sections: thin, hollow markers (many overlap)
            style |= {"linestyle": "-", "linewidth": 1.0, "markersize": 7, "alpha": 0.85,
                      "markerfacecolor": "white", "markeredgewidth": 1.4, "zorder": 3}
        elif family == 3:     # ncu's sets: dashed
            style |= {"linestyle": "--", "linewidth": 1.8, "markersize": 8, "zorder": 5}
        else:                 # the other policies
            style |= {"linestyle": "-", "linewidth": 2.0, "markersize": 8, "zorder": 6}
        if name == "fixed (best in hindsight)":  # often the train-chosen one: shows through
            style["linestyle"] = "--"
        styles[name] = style
    return styles


def _unnamed_pairs(drawn: set[str] = frozenset()):
    """The (colour, marker) pairs of the agents :data:`_NAMED` does not name, in order: the
    palette's and the markers' cycles side by side, the named agents' pairs skipped, and,
    while the palette has any, a colour that no curve of the figure has yet first (``drawn``:
    the named agents' colours; compare_algorithms drew RecurrentPPO in MaskablePPO's blue,
    told apart by the marker alone)."""
    cycle = [(_PALETTE[i % len(_PALETTE)], _MARKERS[i % len(_MARKERS)])
             for i in range(len(_PALETTE) * len(_MARKERS))]
    unnamed = [pair for pair in cycle if pair not in set(_NAMED.values())]
    free, drawn = list(unnamed), set(drawn)
    while True:
        pair = next((p for p in free if p[0] not in drawn), free[0])
        free.remove(pair)
        drawn.add(pair[0])
        yield pair
        free = free or list(unnamed)  # past 70 agents the pairs repeat


def _percent(budget: float) -> str:
    return f"{budget * 100:g}%"


def figure(summary: list[dict], gpu: str | None = None):
    """The benchmark's picture as a matplotlib Figure: x the mean profiling cost, y the
    geometric-mean speedup, one curve per agent through its budgets (in budget order), a
    legend naming every curve, the budgets written beside the points of every agent but the
    single sections, and no-profile's level drawn across."""
    from matplotlib import patheffects
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    budgets = sorted({r["budget"] for r in summary})
    styles = agent_styles({r["agent"] for r in summary})
    fig = Figure(figsize=(14, 8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    halo = [patheffects.withStroke(linewidth=3, foreground="white")]
    floor = {(round(r["mean_cost_s"], 6), round(r["geomean_speedup"], 6))
             for r in summary if r["agent"] == NO_PROFILE}
    labels = {}   # rounded point -> (agent, its budgets there, the point); first one wins
    for name, style in styles.items():
        rows = sorted((r for r in summary if r["agent"] == name), key=lambda r: r["budget"])
        xs = [r["mean_cost_s"] for r in rows]
        ys = [r["geomean_speedup"] for r in rows]
        ax.plot(xs, ys, label=name, **style)
        if _family(name) == 4:
            continue      # single sections: too many to label; their budgets are in the CSV
        here: dict[tuple, tuple] = {}   # budgets that land on one point share its label
        for x, y, r in zip(xs, ys, rows):
            here.setdefault((round(x, 6), round(y, 6)), ((x, y), []))[1].append(r["budget"])
        for point, (xy, at) in here.items():
            if point not in floor:    # no-profile's point: its note says who sits there
                labels.setdefault(point, (name, at, xy))
    ax.set_xlabel(f"mean profiling cost per problem (s of ncu replay, as recorded on "
                  f"{gpu_name(gpu)})", fontsize=11)
    ax.set_ylabel("geometric-mean speedup over eager (incorrect counts as 1.0x)", fontsize=11)
    fig.suptitle("Profiling policies: speedup against profiling cost", fontsize=13)
    ax.set_title("each curve is an agent; its points are the budgets "
                 f"{', '.join(_percent(b) for b in budgets)} of ncu's full-set cost, in that "
                 "order\n(written beside the points of all but the single sections)",
                 fontsize=9.5, color="#333333")
    ax.grid(alpha=0.3)
    ax.margins(x=0.03, y=0.07)
    ax.tick_params(labelsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8.5,
              ncols=1, title="agent", title_fontsize=9, markerscale=0.9, handlelength=3)
    _Labeller(fig, ax, halo).place(summary, labels, styles)
    return fig


class _Labeller:
    """Puts text where it stays inside the axes and clear of the markers, the curves and the
    text already placed: each piece of text tries a few spots and keeps the least crowded."""

    def __init__(self, fig, ax, halo):
        import numpy as np

        fig.draw_without_rendering()      # settles the layout, so display positions hold
        self.ax, self.halo, self.renderer = ax, halo, fig.canvas.get_renderer()
        self.frame = ax.get_window_extent(self.renderer)
        pad = 6 * fig.dpi / 72            # a marker's half-width, about
        markers, samples = [], []
        for line in ax.get_lines():
            xy = ax.transData.transform(line.get_xydata())
            if line.get_marker() not in (None, "None", ""):
                markers += [(x - pad, y - pad, x + pad, y + pad) for x, y in xy]
            for (x0, y0), (x1, y1) in itertools.pairwise(xy):
                n = max(2, int(math.hypot(x1 - x0, y1 - y0) / 3))
                samples.append(np.column_stack([np.linspace(x0, x1, n),
                                                np.linspace(y0, y1, n)]))
        self.markers = markers
        self.samples = np.concatenate(samples) if samples else np.empty((0, 2))
        self.placed = []

    @staticmethod
    def _overlap(a, b) -> float:
        w = min(a[2], b[2]) - max(a[0], b[0])
        h = min(a[3], b[3]) - max(a[1], b[1])
        return w * h if w > 0 and h > 0 else 0.0

    def _score(self, box) -> tuple:
        f = self.frame
        outside = not (f.x0 <= box[0] and box[2] <= f.x1 and f.y0 <= box[1] and box[3] <= f.y1)
        s = self.samples
        crossed = int(((s[:, 0] >= box[0]) & (s[:, 0] <= box[2])
                       & (s[:, 1] >= box[1]) & (s[:, 1] <= box[3])).sum())
        crowd = sum(self._overlap(box, o) for o in self.markers + self.placed)
        return outside, crowd + 20.0 * crossed

    def put(self, text: str, xy, spots, **kwargs):
        """``spots``: (xy or None for ``xy``, offset in points, ha, va) to try in order."""
        best = None
        for at, offset, ha, va in spots:
            t = self.ax.annotate(text, xy if at is None else at, xytext=offset,
                                 textcoords="offset points", ha=ha, va=va,
                                 path_effects=self.halo, zorder=12, **kwargs)
            t.set_in_layout(False)
            box = t.get_window_extent(self.renderer).extents
            score = self._score(box)
            if best is None or score < best[0]:
                if best is not None:
                    best[1].remove()
                best = (score, t, box)
            else:
                t.remove()
            if score == (False, 0.0):
                break
        self.placed.append(best[2])
        return best[1]

    def place(self, summary, labels: dict, styles: dict) -> None:
        around = [((6, 6), "left", "bottom"), ((6, -6), "left", "top"),
                  ((-6, 6), "right", "bottom"), ((-6, -6), "right", "top"),
                  ((0, 10), "center", "bottom"), ((0, -10), "center", "top"),
                  ((14, 0), "left", "center"), ((-14, 0), "right", "center")]
        order = sorted(labels.items(), key=lambda kv: (_family(kv[1][0]), kv[1][0], kv[0]))
        for _, (name, at, xy) in order:
            self.put(", ".join(_percent(b) for b in at), xy, [(None, *s) for s in around],
                     fontsize=8.5, color=styles[name]["color"],
                     fontweight="bold" if name in _EMPHASISED else "normal")
        level = [r["geomean_speedup"] for r in summary if r["agent"] == NO_PROFILE]
        if not level:
            return
        where = "at every budget" if len(set(level)) == 1 else "on average over the budgets"
        level = statistics.fmean(level)
        grey = _EMPHASISED[NO_PROFILE]["color"]
        self.ax.axhline(level, color=grey, linewidth=1, linestyle=":", zorder=1,
                        label="_no-profile level")
        x0, x1 = self.ax.get_xlim()
        spots = [((x0 + f * (x1 - x0), level), (-6, dy), "right", va)
                 for f in (0.98, 0.85, 0.7, 0.55, 0.4)
                 for dy, va in ((-5, "top"), (5, "bottom"))]
        self.put(f"no-profile: {level:.2f}x {where} (the grey square; an agent\n"
                 "that collected nothing at a budget sits on it). Below this line,\n"
                 "the profile collected made the optimizer's candidates worse than none.",
                 None, spots, fontsize=8.5, color=grey, multialignment="left")


def plot(summary: list[dict], path: Path, gpu: str | None = None) -> Path:
    """Speedup against profiling cost, one curve per agent (:func:`figure`), saved as a PNG
    atomically (rendered to bytes first); returns ``path``."""
    write_png(figure(summary, gpu), path, dpi=150)
    return path


def gpu_name(gpu: str | None) -> str:
    """The GPU the costs were recorded on, for a figure's axis (the dataset's metadata
    ``gpu``, "NVIDIA H200" -> "the H200"; None: "its GPU")."""
    return f"the {gpu.removeprefix('NVIDIA ')}" if gpu else "its GPU"


def dataset_gpu(dataset: str | None) -> str | None:
    """The ``gpu`` of the dataset that ``dataset`` names (None: the default)."""
    from autoprofiler_env.dataset import Dataset

    return Dataset.load(dataset).metadata.get("gpu")


def print_table(summary: list[dict]) -> None:
    """One block per budget, the agents best first."""
    width = max(len(r["agent"]) for r in summary)
    for budget in sorted({r["budget"] for r in summary}):
        rows = sorted((r for r in summary if r["budget"] == budget),
                      key=lambda r: (-r["geomean_speedup"], r["agent"]))
        print(f"\nbudget {budget:.0%} of the full set's cost ({rows[0]['episodes']} episodes "
              "per deterministic agent)")
        print(f"{'agent':{width}s} {'geomean':>8s} {'fast_1':>7s} {'cost s':>7s} "
              f"{'regret':>7s} {'fits':>5s}")
        for r in rows:
            fits = f"{r['fits_budget']:5.2f}" if r["fits_budget"] is not None else ""
            print(f"{r['agent']:{width}s} {r['geomean_speedup']:8.3f} {r['fast_1']:7.2f} "
                  f"{r['mean_cost_s']:7.2f} {r['regret']:7.3f} {fits:>5s}".rstrip())


def log_wandb(config: dict, summary: list[dict], episodes: list[dict], plot_path: Path) -> None:
    """Logs to wandb (:mod:`experiments.tracking` says where): the tables, the plot, and
    each agent's scores in the summary under ``<split>/budget=<b>/<agent>/<column>`` (the
    geometric-mean speedup, the share of fast programs, the mean cost and the regret), as an
    experiment's run keys its leaderboard (:func:`wandb_key`: the agent as the table names
    it, without ``/``)."""
    import wandb

    from experiments.tracking import wandb_run

    run = wandb_run("benchmark", config, name=f"benchmark-{config.get('split', 'test')}")
    run.log({"episodes": wandb.Table(columns=list(episodes[0]),
                                     data=[list(r.values()) for r in episodes]),
             "summary": wandb.Table(columns=list(COLUMNS),
                                    data=[[r[c] for c in COLUMNS] for r in summary])})
    if plot_path.exists():
        run.log({"speedup_vs_cost": wandb.Image(str(plot_path))})
    split = config.get("split", "test")
    for r in summary:
        key = f"{split}/budget={r['budget']:g}/{wandb_key(r['agent'])}"
        for column in ("geomean_speedup", "fast_1", "mean_cost_s", "regret"):
            if r.get(column) is not None:
                run.summary[f"{key}/{column}"] = r[column]
    run.finish()


def wandb_key(name: str) -> str:
    """``name`` as one segment of a wandb key: wandb splits keys on ``/`` (a policy named
    by its spec, ``sb3:runs/a``, would become folders), so each ``/`` is a ``_``."""
    return name.replace("/", "_")
