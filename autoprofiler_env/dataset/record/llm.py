"""The ``llm`` part: an LLM optimizer's outcomes per (problem, section set, repeat), shown the
profiles a dataset replays (``llm.jsonl``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autoprofiler_env.dataset.record.machine import _past
from autoprofiler_env.harness import Evaluator, HarnessConfig
from autoprofiler_env.jsonlines import JsonlAppender, read_jsonl
from autoprofiler_env.problems import Problem
from autoprofiler_env.profiler.catalogue import load_catalogue


def record_llm(problems: list[Problem], dataset, optimizer, section_sets: list[tuple[str, ...]],
               out: Path, config: HarnessConfig, repeats: int = 1,
               deadline: float | None = None) -> list[dict]:
    """Outcomes of an LLM optimizer per (problem, section set), ``repeats`` times each (the
    seed changes per repeat), with the profiles the dataset replays. A key already in ``out``
    is skipped. A reply the harness cannot run (no code, a time-out) is recorded as an
    incorrect outcome with its LLM error kind."""
    done = {(r["uri"], r["sections"], r["repeat"]) for r in read_jsonl(out)}
    base_seed = optimizer.seed
    with Evaluator(config) as evaluator, JsonlAppender(out) as log:
        for problem in problems:
            for sections in section_sets:
                key = "+".join(dataset.canonical(sections))
                for repeat in range(repeats):
                    if (problem.uri, key, repeat) in done:
                        continue
                    if _past(deadline):
                        return read_jsonl(out)
                    optimizer.seed = base_seed + repeat
                    profile = dataset.profile(problem.uri, sections) if sections else None
                    candidate = optimizer.optimize(problem, profile)
                    row = {"uri": problem.uri, "model": optimizer.producer, "sections": key,
                           "repeat": repeat, "seed": optimizer.seed}
                    if candidate.error:
                        row.update(correct=False, error_kind=candidate.error.split(":")[0],
                                   candidate_ms=None, speedup=None)
                    else:
                        result = evaluator.evaluate(problem, candidate.source)
                        row.update(correct=result.correct, error_kind=result.error_name,
                                   candidate_ms=result.candidate_ms, speedup=result.speedup)
                    log.write(row)
    optimizer.seed = base_seed
    return read_jsonl(out)


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
