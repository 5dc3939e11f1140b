"""Baseline profiling policies: fixed configurations, a roofline rule tree, random, and the
hindsight oracle. Each has stable-baselines3's ``predict`` signature."""

from baselines.agents import (
    CUDAFORGE_LIKE,
    FIXED_PREFIXES,
    Agent,
    FixedSections,
    HindsightOracle,
    NoProfile,
    OracleUseError,
    RandomAgent,
    RooflineTree,
    all_agents,
    baseline,
    is_fixed,
)

__all__ = ["CUDAFORGE_LIKE", "FIXED_PREFIXES", "Agent", "FixedSections", "HindsightOracle",
           "NoProfile", "OracleUseError", "RandomAgent", "RooflineTree", "all_agents",
           "baseline", "is_fixed"]
