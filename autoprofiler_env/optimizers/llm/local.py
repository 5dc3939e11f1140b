"""The local backend: :class:`TransformersBackend` runs a ``transformers`` causal LM from
disk (a directory or a GGUF file), never downloading one."""

from __future__ import annotations

import time
from pathlib import Path

from autoprofiler_env.errors import LLMError, OptimizationError
from autoprofiler_env.optimizers.llm.backend import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_SEED,
    DEFAULT_TEMPERATURE,
    DEFAULT_TIMEOUT_S,
)
from autoprofiler_env.optimizers.llm.prompt import Message


def _transformers():
    try:
        import transformers
    except ImportError as e:
        raise OptimizationError(
            "TransformersBackend needs the transformers package, which autoprofiler-env "
            "requires: pip install 'transformers>=4.45'") from e
    return transformers


class TransformersBackend:
    """A local ``transformers`` causal LM, never downloaded: loaded with
    ``local_files_only=True`` from a directory or from a GGUF file (``gguf_file``, or a
    ``model_path`` ending in ``.gguf``; GGUF needs the ``gguf`` and ``accelerate`` packages,
    and is de-quantized to fp32).

    The prompt goes through the tokenizer's chat template when it has one, or
    ``chat_template`` (a Jinja template) when given; a system message the template refuses is
    folded into the first user message. Without a template: plain "role: text" turns.
    Temperature 0 decodes greedily; sampling seeds, per request, the generators it draws from
    (the CPU's and the model's GPU's) and gives them back as they were: torch's random state
    (a policy's, in the same process) is left as it was. One request at a time: requests in
    flight at once from threads would interleave those restores. ``timeout_s`` bounds
    generation (``max_time``): a generation cut by it is an ``LLMError("timeout")``, which
    asking again would repeat (not ``unreached``: no server that may come back, as an
    endpoint's timeout may). A prompt the model's context cannot hold is an
    ``LLMError("context")``; a reply is cut to what the context leaves (``max_tokens`` at
    most).

    Raises:
        OptimizationError: transformers is missing, ``model_path`` is not a local path, or
            transformers cannot load a model from it, or a tokenizer (the message says what
            it found).
    """

    def __init__(self, model_path: str | Path, *, gguf_file: str | None = None,
                 model_name: str | None = None, chat_template: str | None = None,
                 device: str = "cpu", torch_dtype: str | None = None) -> None:
        transformers = _transformers()
        path = Path(model_path).expanduser()
        if not path.exists():
            raise OptimizationError(
                f"{model_path} is not a local path: TransformersBackend loads models from "
                "disk only and never downloads")
        if path.is_file() and path.suffix == ".gguf":
            path, gguf_file = path.parent, path.name
        kwargs: dict = {"local_files_only": True}
        if gguf_file:
            kwargs["gguf_file"] = gguf_file
        self.model_path = path
        self.gguf_file = gguf_file
        self.model_name = model_name or (Path(gguf_file).stem if gguf_file else path.name)
        self.device = device
        model_kwargs = dict(kwargs)
        if torch_dtype is not None:
            model_kwargs["torch_dtype"] = torch_dtype
        try:  # what transformers raises for a folder it cannot read a model from
            try:
                self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(path),
                                                                            **kwargs)
            except TypeError as e:  # 4.52-4.57's GPT2Tokenizer, where its files are missing
                raise ValueError(str(e)) from e
            model = transformers.AutoModelForCausalLM.from_pretrained(str(path), **model_kwargs)
        except ImportError as e:  # a package transformers needs for this model (gguf, ...)
            raise OptimizationError(
                f"{model_path}: transformers needs a package this machine lacks to load it "
                f"({e}): install it (pip install ...)") from e
        except (OSError, ValueError, KeyError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise OptimizationError(
                f"{model_path}: transformers cannot load a causal LM from it "
                f"({type(e).__name__}: {first[:300]}): a folder as `save_pretrained` writes "
                "one (config.json, the weights: model.safetensors or pytorch_model.bin, and "
                "the tokenizer's files), or a .gguf file") from e
        if not getattr(self.tokenizer, "vocab_size", 1):  # an empty one, where files lack
            raise OptimizationError(
                f"{model_path}: no tokenizer there (transformers found no vocabulary): save "
                "the model's tokenizer beside it (tokenizer.save_pretrained(folder): "
                "tokenizer.json, or vocab.json and merges.txt, ...)")
        self.model = model.to(device)
        if chat_template is not None:  # e.g. for a GGUF file that carries none
            self.tokenizer.chat_template = chat_template
        self.model.eval()
        self.last_info: dict = {}

    def __repr__(self) -> str:
        return f"TransformersBackend({str(self.model_path)!r}, gguf_file={self.gguf_file!r})"

    def prompt_ids(self, messages: list[Message]):
        """The token ids of the prompt (a tensor of shape (1, n)), ready for ``generate``."""
        import torch

        ids = self._template_ids(messages)
        if not isinstance(ids, torch.Tensor):  # some versions give a BatchEncoding
            ids = ids["input_ids"]
        return ids

    def _template_ids(self, messages: list[Message]):
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            try:
                return tok.apply_chat_template(messages, add_generation_prompt=True,
                                               return_tensors="pt", return_dict=False)
            except Exception:  # a template that refuses a system message (jinja raises)
                system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
                rest = [dict(m) for m in messages if m["role"] != "system"]
                if system and rest and rest[0]["role"] == "user":
                    rest[0]["content"] = system + "\n\n" + rest[0]["content"]
                return tok.apply_chat_template(rest, add_generation_prompt=True,
                                               return_tensors="pt", return_dict=False)
        text = "\n\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\n\nassistant:"
        return tok(text, return_tensors="pt").input_ids

    def complete(self, messages: list[Message], *, max_tokens: int = DEFAULT_MAX_TOKENS,
                 temperature: float = DEFAULT_TEMPERATURE, seed: int = DEFAULT_SEED,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
        import torch

        ids = self.prompt_ids(messages).to(self.device)
        context = self.context_tokens()
        if context is not None:
            if ids.shape[-1] >= context:
                raise LLMError("context", f"the prompt's {ids.shape[-1]} tokens fill "
                               f"{self.model_name}'s context of {context}: a shorter profile, "
                               "or a model with a longer context")
            max_tokens = min(max_tokens, context - int(ids.shape[-1]))
        sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {
            "do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        started = time.perf_counter()
        device = self.model.device
        cuda = device.type == "cuda"
        # the request's own random state: the generators sampling draws from (the CPU's, and
        # the model's GPU's) are seeded inside a fork and given back as they were; no other
        # device's is touched (torch.manual_seed would seed every GPU's, an RL policy's too)
        with torch.no_grad(), torch.random.fork_rng(devices=[device] if cuda else [],
                                                    device_type="cuda"):
            torch.default_generator.manual_seed(seed)
            if cuda:
                with torch.cuda.device(device):
                    torch.cuda.manual_seed(seed)  # this device's generator alone
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids),
                                      max_new_tokens=max_tokens, max_time=timeout_s,
                                      pad_token_id=pad, **sampling)
        elapsed = time.perf_counter() - started
        new = out[0, ids.shape[-1]:]
        n_new = int(new.shape[-1])
        finished = n_new > 0 and int(new[-1]) in self._eos_ids()
        self.last_info = {
            "finish_reason": "stop" if finished else "length" if n_new >= max_tokens else
            "time",
            "usage": {"prompt_tokens": int(ids.shape[-1]), "completion_tokens": n_new}}
        if not finished and n_new < max_tokens and elapsed >= timeout_s:
            raise LLMError("timeout", f"{self.model_name} did not finish within {timeout_s:g} s "
                           f"({n_new} tokens)")
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        if not text.strip():
            raise LLMError("empty", f"{self.model_name} generated no text ({n_new} tokens)")
        return text

    def context_tokens(self) -> int | None:
        """How many tokens the model's context holds (prompt and reply), where its config
        says (``max_position_embeddings``); None where it does not."""
        value = getattr(self.model.config, "max_position_embeddings", None)
        return int(value) if isinstance(value, int) and value > 0 else None

    def _eos_ids(self) -> set[int]:
        ids = set()
        for source in (self.model.generation_config, self.tokenizer):
            eos = getattr(source, "eos_token_id", None)
            if isinstance(eos, int):
                ids.add(eos)
            elif eos:
                ids.update(int(i) for i in eos)
        return ids
