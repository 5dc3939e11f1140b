"""A problem that imports a module that does not exist."""
import torch.nn as nn
import not_a_real_module  # noqa: F401


class Model(nn.Module):
    pass


def get_inputs():
    return []


def get_init_inputs():
    return []
