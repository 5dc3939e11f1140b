"""Learned profiling agents: RL policies (:mod:`agents.rl`) and, to come, the AutoProfiler
tree and its learner. The baselines they are measured against are in :mod:`baselines`."""
