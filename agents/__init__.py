"""Learned profiling agents: the AutoProfiler tree and its learner, and RL policies.

Not built yet; the baselines they are measured against are in :mod:`baselines`.
"""
