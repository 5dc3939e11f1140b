"""The tree as a policy: a walk from the root on each observation, with SB3's ``predict``.

The walk is a pure function of the observation, so the policy keeps no state and serves a
vector env's batch as well as one environment:

- at a :class:`~agents.tree.nodes.Collect`, the section is the action, unless it is already
  collected or the action mask forbids it (it does not fit the remaining budget): then the
  node is passed over and the walk goes on to its ``next``;
- at a :class:`~agents.tree.nodes.Branch`, the condition is read from the observation
  (:mod:`agents.tree.reading`: ``metrics`` and ``metrics_known``, ``findings``, ``features``,
  ``budget_total``) and the walk goes on to ``then`` or, when it does not hold or is
  unknown, to ``otherwise``;
- at a :class:`~agents.tree.nodes.Stop`, the action is STOP.

Walking again after a section is collected retraces the same path: a Collect taken is now
collected, one passed over for its cost still does not fit (the remaining budget only
shrinks), and the values a branch reads come only from sections collected above it, which
the next steps do not change (``check`` makes sure of that). So the path of an episode is the
path of its last walk, and :meth:`TreePolicy.path` gives it; :meth:`TreePolicy.routes`, every
path an episode can take from an observation on, before the sections' values are measured, and
:meth:`TreePolicy.explain_route`, why one of them goes its way.

>>> policy = TreePolicy(load("tree.json"), env)
>>> obs, info = env.reset()
>>> action, _ = policy.predict(obs)  # the valid actions: the observation's action_mask
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agents.tree.nodes import (
    Branch,
    Collect,
    Stop,
    Tree,
    TreeFormatError,
    check,
    load,
    vocabulary,
    walk,
)
from agents.tree.reading import locate, observed, raw, threshold
from agents.tree.render import plain

_SINGULAR = {"passes": "pass", "sections": "section", "seconds": "second"}


def amount(value: float, unit: str) -> str:
    """``value`` in the budget's ``unit`` for a person, the unit singular where the number
    shows as 1: ``3 passes``, ``1 pass``, ``0.5 sections``."""
    text = f"{value:g}"
    return f"{text} {_SINGULAR.get(unit, unit) if text == '1' else unit}"


@dataclass(frozen=True)
class Route:
    """One way the walk can go from an observation to a stop (:meth:`TreePolicy.routes`).

    Attributes:
        nodes: the numbers of the nodes it visits (:meth:`TreePolicy.path` on the episode's
            last observation).
        actions: the sections it collects, in order.
        measured: each branch on a value of a section collected on the way, (its number,
            whether its condition holds); "no" includes the value being unknown.
    """

    nodes: tuple[int, ...]
    actions: tuple[int, ...]
    measured: tuple[tuple[int, bool], ...]


class TreePolicy:
    """``tree`` as a policy of ``env`` (a :class:`~autoprofiler_env.envs.ProfilingEnv`, or a
    wrapper of one: it reads ``sections`` and ``metric_names``).

    Raises:
        TreeFormatError: the tree names a section or metric the environment does not have.
    """

    stochastic = False

    def __init__(self, tree: Tree | str | Path, env, name: str = "autoprofiler-tree") -> None:
        if tree is None:  # shipped_tree(optimizer) where none ships
            raise TreeFormatError("no tree given (shipped_tree returns None for an optimizer "
                                  "without a shipped tree): learn one with `autoprofiler "
                                  "learn-tree` and give its file")
        base = env.unwrapped
        self.sections = tuple(base.sections)
        self.metric_names = tuple(base.metric_names)
        vocab = vocabulary(self.sections)
        if not isinstance(tree, Tree):
            tree = load(tree, vocab)
        else:
            check(tree.root, vocab)
        unknown = [m for m in vocab.metric_owner if m not in self.metric_names]
        if unknown:  # an environment whose observation lacks some key metrics
            used = [n.condition.name for _, n in walk(tree.root)
                    if isinstance(n, Branch) and n.condition.name in unknown]
            if used:
                raise TreeFormatError(f"the tree reads {used[0]}, which this environment's "
                                      "observation does not hold")
        self.tree, self.name = tree, name
        self._vocab = vocab
        self.stop = len(self.sections)
        self._program = self._compile(tree.root, vocab)
        self._nodes = tree.nodes()  # by number, as the walk numbers them

    # the tree compiled to tuples: (0, number, action, next) for a Collect, (1, number, where,
    # threshold, then, otherwise) for a Branch (agents.tree.reading), (2, number) for Stop;
    # the numbers in preorder, as walk numbers the nodes
    def _compile(self, root, vocab):
        counter = iter(range(1 << 30))

        def build(node):
            number = next(counter)
            if isinstance(node, Collect):
                return (0, number, self.sections.index(node.section), build(node.next))
            if isinstance(node, Branch):
                c = node.condition
                where = locate(c.kind, c.name, vocab, self.metric_names)
                then = build(node.then)
                return (1, number, where, threshold(c), then, build(node.otherwise))
            if isinstance(node, Stop):
                return (2, number)
            raise TreeFormatError(f"not a node: {node!r}")

        return build(root)

    def _walk(self, obs: dict, mask: np.ndarray) -> tuple[int, list[int]]:
        node, path = self._program, []
        collected = obs["collected"]
        while True:
            path.append(node[1])
            op = node[0]
            if op == 0:
                a = node[2]
                if not collected[a] and mask[a]:
                    return a, path
                node = node[3]
            elif op == 1:
                value = raw(obs, node[2])
                node = node[4] if value is not None and value >= node[3] else node[5]
            else:
                return self.stop, path

    def routes(self, observation: dict, costs, left: float) -> list[Route]:
        """Every way the walk can go on from ``observation`` to a stop, each section it
        reaches collected where it fits (``costs``: each section's, ``left``: the budget left,
        in the budget's unit, compared as the environment's action mask compares them). A
        branch on a value ``observation`` holds (a feature, the budget, a collected section's)
        goes one way; one on a section collected on the way goes either way, its value to be
        measured (a side that contradicts that value's sides above it is left out); one on a
        section not collected takes ``else``. Each route's ``nodes`` is what :meth:`path`
        gives on its episode's last observation."""
        from autoprofiler_env.envs.profiling_env import COST_SLACK  # the env's: ~1 s to import

        nodes = self._nodes
        collected = np.asarray(observation["collected"], dtype=bool)
        out: list[Route] = []

        def go(node, route: Route, spent: float, bounds: dict) -> None:
            route = Route(route.nodes + (node[1],), route.actions, route.measured)
            op = node[0]
            if op == 0:
                a = node[2]
                fits = costs[a] <= left - spent + COST_SLACK
                if not collected[a] and a not in route.actions and fits:
                    route = Route(route.nodes, route.actions + (a,), route.measured)
                    spent += float(costs[a])
                go(node[3], route, spent, bounds)
            elif op == 1:
                source = self._vocab.source(nodes[node[1]].condition)
                if source is None or self.sections.index(source) not in route.actions:
                    value = raw(observation, node[2])  # known now, or never on this route
                    go(node[4] if value is not None and value >= node[3] else node[5], route,
                       spent, bounds)
                    return
                low, high = bounds.get(node[2], (-np.inf, np.inf))  # the value is in [low, high)
                for holds, child, side in ((True, node[4], (max(low, node[3]), high)),
                                           (False, node[5], (low, min(high, node[3])))):
                    if side[0] < side[1]:
                        go(child, Route(route.nodes, route.actions,
                                        route.measured + ((node[1], holds),)),
                           spent, {**bounds, node[2]: side})
            else:
                out.append(route)

        go(self._program, Route((), (), ()), 0.0, {})
        return out

    def path(self, observation: dict, action_mask: np.ndarray | None = None) -> list[int]:
        """The numbers of the nodes the walk visits on ``observation`` (an episode's last
        observation gives the episode's whole path)."""
        mask = observation["action_mask"] if action_mask is None else action_mask
        return self._walk(observation, np.asarray(mask, dtype=bool))[1]

    def explain(self, observation: dict, action_mask: np.ndarray | None = None) -> list[str]:
        """Why the walk on ``observation`` takes its action: one line per node it visits,
        numbered as :func:`~agents.tree.render.export_text` numbers them: a branch's
        condition, the value it read (in the condition's units; unknown where its section is
        not collected; a ``log_`` feature's threshold and value also in plain numbers) and the
        side taken (:meth:`branch_line`); a collect node's section, and whether it is the
        action or why the walk passes over it; stop. On an episode's last observation it
        explains the episode's whole path (:meth:`path`)::

            [0] if budget >= 0.25 of the full set: 0.3, yes
            [21] if log_arithmetic_intensity >= 2.2 (arithmetic_intensity >= 157): 1.72 (51.5), no
            [39] collect Occupancy: collected
            [40] collect SpeedOfLight_RooflineChart: does not fit the budget left
            [43] stop: the action
        """
        mask = np.asarray(observation["action_mask"] if action_mask is None else action_mask,
                          dtype=bool).reshape(-1)
        action, path = self._walk(observation, mask)
        nodes = self._nodes
        lines = []
        for number in path:
            node = nodes[number]
            if isinstance(node, Branch):
                lines.append(self.branch_line(number, observation))
            elif isinstance(node, Collect):
                index = self.sections.index(node.section)
                why = ("the action" if index == action and number == path[-1] else
                       "collected" if observation["collected"][index] else
                       "does not fit the budget left")
                lines.append(f"[{number}] collect {node.section}: {why}")
            else:
                lines.append(f"[{number}] stop: the action")
        return lines

    def explain_route(self, observation: dict, route: Route, costs, left: float, unit: str,
                      start: int = 0) -> list[str]:
        """Why ``route`` (one of :meth:`routes` on ``observation``, ``costs`` and ``left``)
        goes its way from its ``start``-th node on: a line per branch (:meth:`branch_line`;
        one on a section collected on the route reads "measured", its side the route's) and
        per Collect passed over, with what the section costs and what is left then (in
        ``unit``, the budget's); the Collects the route takes, and its stop, have none::

            [44] if launch__occupancy_limit_shared_mem >= 10.6: measured, no (or unknown)
            [47] if log_input_bytes >= 7.405 (input_bytes >= 2.54e+07): 9.03 (1.07e+09), yes
            [48] collect SpeedOfLight: does not fit the budget left (10 passes, 7.4 left)
        """
        nodes = self._nodes
        measured = dict(route.measured)
        taken: set[int] = set()
        spent, lines = 0.0, []
        for i, number in enumerate(route.nodes):
            node = nodes[number]
            if isinstance(node, Collect):
                index = self.sections.index(node.section)
                cost = float(costs[index])
                # routes takes a section at its first Collect on the way that it fits at (the
                # budget left only shrinks, so never at a later one) and passes over a Collect
                # of a section collected already (in the observation, or on the route above:
                # check refuses a second Collect of a section on one path, but the reason is
                # derived here, not assumed) or one that does not fit what is left
                if index in route.actions and index not in taken:
                    taken.add(index)
                    spent += cost
                elif i < start:
                    continue
                elif observation["collected"][index] or index in taken:
                    lines.append(f"[{number}] collect {node.section}: collected")
                else:
                    lines.append(f"[{number}] collect {node.section}: does not fit the budget "
                                 f"left ({amount(cost, unit)}, {left - spent:.3g} left)")
            elif isinstance(node, Branch) and i >= start:
                lines.append(self.branch_line(number, observation, measured.get(number)))
        return lines

    def branch_line(self, number: int, observation: dict, measured: bool | None = None) -> str:
        """The line :meth:`explain` and :meth:`explain_route` give the branch ``number``: its
        condition, a ``log_`` feature's threshold also in plain numbers
        (:func:`~agents.tree.render.plain`), then the value ``observation`` holds (also in
        plain numbers; unknown where its section is not collected) and the side it takes, or,
        where ``measured`` is given, that the value is measured and the side (True: yes)."""
        c = self._nodes[number].condition
        at_least = plain(c.kind, c.name, c.at_least, threshold=True)
        shown = c.describe() + (f" ({c.name[4:]} >= {at_least:.3g})"
                                if at_least is not None else "")
        if measured is not None:
            return f"[{number}] if {shown}: measured, {'yes' if measured else 'no (or unknown)'}"
        value = observed(observation, c.kind, c.name, self._vocab, self.metric_names)
        holds = value is not None and raw(observation, locate(
            c.kind, c.name, self._vocab, self.metric_names)) >= threshold(c)
        read = ("unknown (its section is not collected)" if value is None else
                f"{value:.3g}" + (f" ({plain(c.kind, c.name, value):.3g})"
                                  if at_least is not None else ""))
        return f"[{number}] if {shown}: {read}, {'yes' if holds else 'no'}"

    def predict(self, observation, state=None, episode_start=None, deterministic=True,
                action_masks=None):
        """SB3's signature; a batch of observations (a vector env's) gives a batch of
        actions. The valid actions are ``action_masks`` when given, else the observation's
        ``action_mask``."""
        masks = observation["action_mask"] if action_masks is None else action_masks
        masks = np.asarray(masks, dtype=bool)
        if np.ndim(observation["collected"]) == 1:
            return np.array(self._walk(observation, masks.reshape(-1))[0]), state
        n = len(observation["collected"])
        masks = masks.reshape(n, -1)
        actions = [self._walk({k: v[i] for k, v in observation.items()}, masks[i])[0]
                   for i in range(n)]
        return np.array(actions), state
