"""What an optimizer returns: a candidate program and where it came from."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Candidate:
    """A ``ModelNew`` program for a problem (KernelBench's convention), with its provenance.

    Attributes:
        problem_uri: the problem it is for.
        source: the Python source defining ``class ModelNew``; empty when ``error`` is set.
        producer: what made it: a transformation's name (``"compile"``), or ``"llm:<model>"``.
        reason: why this one, in a sentence: the rule and the evidence it used, or the prior.
        evidence: the pieces of the profile the choice rested on (metric or finding -> value).
        error: set when no program could be produced (an LLM reply without code, say); the
            harness then judges the candidate incorrect without running anything.
    """

    problem_uri: str
    source: str
    producer: str
    reason: str = ""
    evidence: dict[str, object] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Candidate:
        return cls(**d)
