"""Optimizers: turn a problem and a profile into a candidate ModelNew program."""
