"""The ``llm`` part: an LLM optimizer's outcomes per (problem, section set, repeat), shown the
profiles a dataset replays (``llm.jsonl``)."""

from __future__ import annotations

import copy
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from autoprofiler_env.dataset.record.machine import _past
from autoprofiler_env.errors import UNREACHED_KINDS, LLMError, warn
from autoprofiler_env.harness import Evaluator, HarnessConfig
from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
from autoprofiler_env.problems import Problem
from autoprofiler_env.profiler.catalogue import load_catalogue


def record_llm(problems: list[Problem], dataset, optimizer, section_sets: list[tuple[str, ...]],
               out: Path, config: HarnessConfig, repeats: int = 1,
               deadline: float | None = None) -> list[dict]:
    """Outcomes of an LLM optimizer per (problem, section set), ``repeats`` times each (the
    seed changes per repeat), with the profiles the dataset replays. A key already in ``out``
    is skipped. A reply the harness cannot run (no code, code cut off, a local model's
    time-out, a prompt longer than the model's context) is recorded as an incorrect outcome
    with its LLM error kind. A request that got no reply from the model (the endpoint down,
    failing, refusing or too slow: :attr:`~autoprofiler_env.errors.LLMError.unreached`) is
    not an outcome of the model's and is not recorded: running the command again asks it
    again. A request the endpoint refused (``refused``: a bad key, a model it does not
    serve, a redirect) stops the call at once, and failures on :data:`UNREACHED_STOP`
    problems in a row (an endpoint that is down fails every request) stop it too, each
    with a warning saying why (:class:`Unanswered`). (On several GPUs, with the requests in
    flight at once: :mod:`.fanout`.)"""
    done = {key(r) for r in read_jsonl(out) if not unanswered(r)}
    unanswered_ = Unanswered()
    with Evaluator(config) as evaluator, JsonlAppender(out) as log:
        for problem, sections, repeat in asks(problems, dataset, optimizer, section_sets,
                                              repeats, done):
            if _past(deadline) or unanswered_.stop:
                break  # what it holds so far is returned, as a finished call's
            try:
                reply = ask(problem, dataset, optimizer, sections, repeat)
            except LLMError as e:
                if not e.unreached:
                    raise
                unanswered_.failed(problem.uri, e)
                continue
            unanswered_.answered()
            log.write(judge(reply, problem, evaluator))
    unanswered_.warn()
    return [r for r in read_jsonl(out) if not unanswered(r)]  # an older recorder's left out


UNREACHED_STOP = 3
"""Problems in a row whose requests got no reply from the model after which a recording stops
(an endpoint that is down fails every request that follows; one prompt it never answers in
time, asked for several repeats, is one problem, and does not stop it)."""


def unanswered(row: dict) -> bool:
    """Whether an outcome or reply row (an older recorder's) is of a request that got no
    reply: not the model's outcome, asked again (an older recorder wrote such requests as
    outcomes and replies, of a kind of :data:`~autoprofiler_env.errors.UNREACHED_KINDS`,
    which never comes from the harness)."""
    kind = row.get("error_kind") or (row.get("error") or "").split(":")[0]
    return kind in UNREACHED_KINDS


class Unanswered:
    """The requests of one call that got no reply: when to stop asking (the endpoint refused
    a request, which it refuses every time, or :data:`UNREACHED_STOP` problems failed in a
    row), and the warning that says how many and why. Not thread-safe: a caller with
    requests in flight holds its own lock."""

    def __init__(self) -> None:
        self.errors: list[LLMError] = []
        self._in_a_row: set[str] = set()
        self.refused: LLMError | None = None

    def failed(self, uri: str, error: LLMError) -> None:
        self.errors.append(error)
        self._in_a_row.add(uri)
        if error.refused and self.refused is None:
            self.refused = error

    def answered(self) -> None:
        self._in_a_row.clear()

    @property
    def stop(self) -> bool:
        return self.refused is not None or len(self._in_a_row) >= UNREACHED_STOP

    def warn(self) -> None:
        """Says how many requests got no reply (none recorded), the last one's error (or
        the refusal), why the call stopped, and that running it again asks them again."""
        if not self.errors:
            return
        why = (f"; stopped: the endpoint refused a request ({self.refused}), as it will "
               "every one: fix the key, model or URL" if self.refused is not None else
               f"; stopped after {UNREACHED_STOP} problems in a row" if self.stop else "")
        warn(f"{len(self.errors)} LLM request(s) got no reply from the model and are not "
             f"recorded (the last: {self.errors[-1]}){why}; run the same command again, "
             "which asks them again")


def key(row: dict) -> tuple:
    """What identifies an LLM outcome (and its reply): problem, model, section set, repeat."""
    return row["uri"], row["model"], row["sections"], row["repeat"]


def asks(problems: list[Problem], dataset, optimizer, section_sets, repeats: int,
         done: set[tuple] = frozenset()) -> list[tuple[Problem, tuple[str, ...], int]]:
    """The (problem, section set, repeat) not in ``done`` (:func:`key`), in order."""
    return [(problem, sections, repeat) for problem in problems for sections in section_sets
            for repeat in range(repeats)
            if (problem.uri, optimizer.producer, "+".join(dataset.canonical(sections)),
                repeat) not in done]


def ask(problem: Problem, dataset, optimizer, sections: tuple[str, ...], repeat: int) -> dict:
    """One request: the reply's record (its key, seed, ``source`` or ``error``, and the
    request's evidence without the raw reply). Leaves ``optimizer`` as it was, so that
    requests can be in flight at once (each asks through a copy of the optimizer and of its
    backend, seeded ``optimizer.seed + repeat``).

    Raises:
        LLMError: no reply came from the model (``unreached``): nothing to record."""
    asking = copy.copy(optimizer)
    asking.backend = copy.copy(optimizer.backend)  # its last_info is the request's own
    asking.seed = optimizer.seed + repeat
    profile = dataset.profile(problem.uri, sections) if sections else None
    candidate = asking.optimize(problem, profile)
    return {"uri": problem.uri, "model": asking.producer,
            "sections": "+".join(dataset.canonical(sections)), "repeat": repeat,
            "seed": asking.seed, "source": candidate.source, "error": candidate.error,
            "evidence": {k: v for k, v in candidate.evidence.items() if k != "reply"}}


def judge(reply: dict, problem: Problem, evaluator: Evaluator | None) -> dict:
    """The outcome row of a reply (:func:`ask`): the harness's verdict on its source, or an
    incorrect outcome of the LLM error kind where it has none (no evaluator needed)."""
    row = {k: reply[k] for k in ("uri", "model", "sections", "repeat", "seed")}
    if reply["error"]:
        row.update(correct=False, error_kind=reply["error"].split(":")[0], candidate_ms=None,
                   speedup=None)
    else:
        result = evaluator.evaluate(problem, reply["source"])
        row.update(correct=result.correct, error_kind=result.error_name,
                   candidate_ms=result.candidate_ms, speedup=result.speedup)
    return row


def judge_all(problem: Problem, replies: list[dict], config: HarnessConfig) -> list[dict]:
    """The outcome rows of a problem's replies, judged in one evaluator (started only where
    a reply has a source)."""
    with ExitStack() as stack:
        evaluator = (stack.enter_context(Evaluator(config))
                     if any(not r["error"] for r in replies) else None)
        return [judge(r, problem, evaluator) for r in replies]


@dataclass(frozen=True)
class LLMPart:
    """What the ``llm`` part records: ``optimizer``'s outcomes (an :class:`~autoprofiler_env.
    optimizers.llm.LLMOptimizer`) with the profiles ``dataset`` replays for each of
    ``section_sets``, ``repeats`` times each."""

    optimizer: object
    dataset: object
    section_sets: tuple[tuple[str, ...], ...]
    repeats: int = 1
    uris: frozenset[str] | None = None  # the dataset's problems: the others are skipped

    def shown(self, problems: list[Problem]) -> list[Problem]:
        """The problems the dataset has profiles of (all where ``uris`` is None)."""
        return [p for p in problems if self.uris is None or p.uri in self.uris]

    def summarize(self, summary: dict, problems: list[Problem], out: Path) -> None:
        """Adds to a recording's summary ``llm_left``, the requests of this call not recorded
        in ``out``'s ``llm.jsonl`` (no reply from the model, or the time budget ran out: the
        same command asks them), and ``llm_not_in_dataset`` where problems were skipped."""
        done = {key(r) for r in read_jsonl(Path(out) / "llm.jsonl") if not unanswered(r)}
        summary["llm_left"] = len(asks(self.shown(problems), self.dataset, self.optimizer,
                                       self.section_sets, self.repeats, done))
        missing = len(problems) - len(self.shown(problems))
        if missing:
            summary["llm_not_in_dataset"] = missing


def require(parts, llm: LLMPart | None) -> None:
    """Raises ValueError where ``parts`` holds ``llm`` and no :class:`LLMPart` is given."""
    if "llm" in parts and llm is None:
        raise ValueError("the llm part needs an LLMPart: the optimizer, the dataset whose "
                         "profiles it is shown, and the section sets")


def parse_section_sets(text: str, sections: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """``"none;SpeedOfLight;SpeedOfLight+WarpStateStats;basic;full"`` -> section sets: ``none``
    is no profile; ``basic``, ``detailed`` and ``full`` are ncu's sets (their sections among
    ``sections``, the dataset's); anything else is sections joined by ``+``."""
    catalogue = load_catalogue()
    out = []
    for item in (t.strip() for t in text.split(";")):
        if item in ("", "none"):
            out.append(())
        elif item in catalogue.sets:
            out.append(tuple(s for s in sections if s in catalogue.sets[item]))
        else:
            names = tuple(x.strip() for x in item.split("+"))
            unknown = [x for x in names if x not in sections]
            if unknown:
                raise ValueError(f"unknown sections {unknown} in {item!r}: the dataset has "
                                 f"{', '.join(sections)}, and the sets none, "
                                 f"{', '.join(catalogue.sets)}")
            out.append(names)
    return tuple(dict.fromkeys(out))
