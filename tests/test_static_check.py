"""The static check: what it finds, what it lets through (every candidate of the catalogue)."""

import pytest

from autoprofiler_env.harness import check_source
from autoprofiler_env.harness.static_check import REJECT, WARN
from autoprofiler_env.optimizers import TRANSFORMATIONS
from autoprofiler_env.optimizers.transforms import identity_source
from autoprofiler_env.problems import load_problem


def rules(source: str) -> set[str]:
    return {f.rule for f in check_source(source)}


@pytest.mark.parametrize("source, rule", [
    ("import torch\ntorch.relu = abs\n", "patch"),
    ("import torch as t\nt.cuda.Event.elapsed_time = None\n", "patch"),
    ("import time\nsetattr(time, 'perf_counter', lambda: 0)\n", "patch"),
    ("from torch import nn\nnn.Module.forward = None\n", "patch"),
    ("import torch\n_T = torch.Tensor\n_T.to = lambda self, *a: self\n", "patch"),  # an alias
    ("import torch\ngetattr(torch, 'Tensor').to = None\n", "patch"),
    ("import torch\ntype.__setattr__(torch.Tensor, 'to', None)\n", "patch"),
    ("import torch\nvars(torch.Tensor)['to'] = None\n", "patch"),
    ("import torch\nvars(torch.Tensor).update(to=None)\n", "patch"),
    ("t = __import__('time')\nt.perf_counter = None\n", "patch"),  # bound by __import__
    ("import os\nos.environ['HOME'] = '/x'\n", "environment"),  # not a build variable
    ("import autoprofiler_env.harness.wire\n", "introspection"),
    ("from autoprofiler_env.harness import worker\n", "introspection"),
    ("import importlib\nw = importlib.import_module('autoprofiler_env.harness.' + 'wire')\n",
     "introspection"),
    ("w = __import__(f'autoprofiler_env.harness.{name}')\n", "introspection"),
    ("import torch\nT = getattr(torch, 'Tensor')\nT.to = None\n", "patch"),  # alias by getattr
    ("import json\njson._default_encoder = None\n", "patch"),
    ("import sys\nsys.settrace(None)\n", "introspection"),
    ("from sys import setprofile\n", "introspection"),
    ("import sys\nsys.modules['x'] = 1\n", "introspection"),
    ("import gc\n", "introspection"),
    ("import ctypes\n", "introspection"),
    ("def f():\n    return f.__globals__\n", "introspection"),
    ("import os\nk = os.environ['OPENAI_API_KEY']\n", "environment"),
    ("from os import getenv\n", "environment"),
    ("import urllib.request\n", "network"),
    ("open('/tmp/x', 'w').write('y')\n", "filesystem"),
    ("open('/tmp/x', mode='a')\n", "filesystem"),
    ("import os\nos.remove('x')\n", "filesystem"),
    ("import pathlib\npathlib.Path('x').write_text('y')\n", "filesystem"),
    ("import subprocess\n", "concurrency"),
    ("import os\nos.system('ls')\n", "concurrency"),
    ("from concurrent.futures import ThreadPoolExecutor\n", "concurrency"),
    ("eval('1')\n", "dynamic_code"),
    ("import torch\ns = torch.cuda.Stream()\n", "stream"),
    ("try:\n    x = 1\nexcept Exception:\n    pass\n", "fallback"),
])
def test_each_rule_finds_its_construct(source, rule):
    assert rule in rules(source)
    finding = next(f for f in check_source(source) if f.rule == rule)
    assert finding.rejects == (rule in REJECT) and finding.line >= 1


@pytest.mark.parametrize("source", [
    "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n",
    "import torch\ntorch._inductor.config.max_autotune = True\n",
    "import torch\ntorch.set_float32_matmul_precision('high')\n",
    "x = 'a'.replace('a', 'b')\nopen('data.txt')\nopen('f', 'rb')\n",
    "# torch.relu = None in a comment, and in a string:\ns = 'import socket'\n",
    "class ModelNew:\n    def __init__(self):\n        self.time = 1\n",
    "import torch\ncfg = torch._inductor.config\ncfg.max_autotune = True\n",
    "import torch\nx = torch.randn(3)\nx.label = 'a tensor of its own'\n",
    "import torch\ngetattr(torch.backends, 'cudnn').benchmark = True\n",
    "import torch\ngetattr(torch, 'backends').cudnn.benchmark = True\n",
    "import importlib\ntriton = importlib.import_module('triton')\n",
    "class M:\n    def f(self):\n        self.lin.__dict__['w'] = 1\n",  # a module of its own
    # a local variable named as a module is not the module
    "import torch\ndef f(x):\n    time = torch.empty_like(x)\n    time[:] = x\n    return time\n",
    "json = {}\njson['a'] = 1\n",
    "import types\ncfg = types.SimpleNamespace()\nvars(cfg)['k'] = 1\n",  # its own namespace
    # a build's settings (load_inline's), by their literal names
    "import os\nos.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\n"
    "os.environ.setdefault('MAX_JOBS', '4')\n",
    "import torch\ntorch._functorch.config.donated_buffer = False\n",
    # nn.Module code that sets its own attributes by name
    "class M:\n    def __init__(self):\n        setattr(self, 'a', 1)\n"
    "        object.__setattr__(self, 'b', 2)\n        self.__dict__['c'] = 3\n"
    "        vars(self)['d'] = 4\n",
])
def test_legitimate_code_is_not_rejected(source):
    assert not [f for f in check_source(source) if f.rejects]


def test_unparsable_source_has_no_findings():
    assert check_source("def (:\n") == []


@pytest.mark.parametrize("name", ["relu_16384x16384", "conv2d_3x3_16x64x128x128",
                                  "linear_tiny_pointwise_chain_64x256"])
def test_no_candidate_of_the_catalogue_is_rejected(name):
    from autoprofiler_env.features import static_features

    problem = load_problem(name)
    features = static_features(problem, size="smoke")
    sources = [identity_source(problem)]
    for t in TRANSFORMATIONS.values():
        if t.applies(problem, features):
            try:
                sources.append(t.rewrite(problem, features))
            except Exception as e:  # a Triton rewrite that does not match this problem
                assert "match" in str(e).lower() or "apply" in str(e).lower(), e
    assert len(sources) >= 2
    for source in sources:
        rejecting = [str(f) for f in check_source(source) if f.rejects]
        assert rejecting == [], rejecting
        assert {f.rule for f in check_source(source)} <= set(WARN)
