import torch
class ModelNew(nn.Module)
    pass
