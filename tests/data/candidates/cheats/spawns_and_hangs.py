"""Starts a detached process (named by a marker the test fills in), then never returns."""
import subprocess
import sys
import time

import torch.nn as nn

MARKER = "__MARKER__"
subprocess.Popen([sys.executable, "-c", f"import time; time.sleep(600)  # {MARKER}"],
                 start_new_session=True)


class ModelNew(nn.Module):
    def forward(self, x):
        while True:
            time.sleep(1)
