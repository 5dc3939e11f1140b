"""The LLM proposer: a language model reads the current tree and how it did, and replies edits.

:class:`LLMProposer` asks any :class:`~autoprofiler_env.optimizers.llm.ChatBackend` (an
OpenAI-compatible endpoint, a local ``transformers`` model) for up to ``n`` edits each round:

- the prompt (:func:`build_messages`): what a tree is and how it is walked, the sections with
  their costs and the header metrics each one shows, the static features, the current tree
  numbered as edits name its nodes (:func:`~agents.tree.render.export_text`, with how many
  train problems reach each node), the score, the problems the tree loses most on (what it
  collected, what the hindsight oracle collected, both speedups) and the earlier rounds;
- the reply: ``{"edits": [EDIT, ...]}``, each edit in the JSON form of
  :mod:`agents.tree.edits`. Where the backend can constrain decoding, the request carries
  :func:`reply_schema` as OpenAI's ``response_format`` (llama.cpp's server, vLLM, SGLang and
  OpenAI accept it); the reply is checked in any case (:func:`parse_reply`).

It never raises for what the model or the server does: a time-out, a failed request, a reply
that is not JSON or not ``{"edits": [...]}`` give a :class:`Proposal` with ``error`` set
(``"<kind>: <message>"``); each edit that does not read or does not give a valid tree goes to
:attr:`Proposal.unusable` with the reason, the others are kept.

>>> from autoprofiler_env.optimizers.llm import OpenAIChatBackend
>>> proposer = LLMProposer(OpenAIChatBackend("http://127.0.0.1:8080/v1", "gemma3-270m"))
>>> proposal = proposer.propose(feedback, n=4)
>>> proposal.error or [e.describe() for e in proposal.edits]
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from dataclasses import dataclass

from agents.tree.edits import Edit, edit_from_dict
from agents.tree.nodes import (
    BUDGET_VALUES,
    Branch,
    Condition,
    Tree,
    TreeFormatError,
    Vocabulary,
    walk,
)
from agents.tree.proposers.base import Feedback, ProblemFeedback, Proposal
from agents.tree.reading import observed
from agents.tree.render import export_text
from autoprofiler_env.errors import LLMError
from autoprofiler_env.optimizers.llm.backend import (
    DEFAULT_SEED,
    DEFAULT_TEMPERATURE,
    ChatBackend,
    json_schema_format,
    takes_response_format,
)
from autoprofiler_env.optimizers.llm.prompt import Message
from autoprofiler_env.optimizers.llm.reply import answer

DEFAULT_MAX_TOKENS = 1024
"""Enough for a handful of edits (one is 40-150 tokens); a longer reply is rambling."""
DEFAULT_TIMEOUT_S = 120.0
PROBLEMS_SHOWN = 15
"""How many problems the prompt lists (those with the largest regret): a small model's context
is short, and the problems the tree already serves well say little about what to change."""
FEATURES_SHOWN = 4
"""How many static features the problem table shows: those that vary most over the problems
shown, so that a split on a feature can pick a threshold between them."""
READS_SHOWN = 3
"""How many of the values the tree's conditions read the problem table shows."""
METRICS_SHOWN = 6
"""How many header metrics the catalogue names per section (the first ones of ncu's header,
plus any the tree reads): all 76 would take a third of a 3k-token prompt. The reply's schema
still accepts every one."""
HISTORY_SHOWN = 8
SCHEMA_NAME = "tree_edits"
STRUCTURED = ("json_schema", "json_object", None)
"""The ways of sending the reply's schema (:class:`LLMProposer`'s ``structured``)."""
REPLY_CHARS = 100_000
"""How much of a reply is searched for JSON (the search is bounded to stay fast)."""

SYSTEM_PROMPT = """\
You improve a profiling tree. For each GPU program the tree chooses which Nsight Compute \
(ncu) sections to collect within a budget; an optimizer then rewrites the program seeing only \
the collected sections, and the speedup it reaches is the reward. More sections are not \
always better: each costs budget, and an extra one can mislead the optimizer.

The tree is walked from node [0]; nodes are numbered in preorder, as shown in [N]:
- collect SECTION: collect it, go on to the next node. It is passed over (the walk goes on) \
when SECTION is already collected or costs more than the budget left.
- if CONDITION / else: the first subtree when CONDITION holds, else the second (also when \
its value is unknown, e.g. its section was passed over).
- stop: profiling ends.
A CONDITION is VALUE >= X, with VALUE one of:
- metric NAME: a header metric of a section, in ncu's units (pct_of_peak metrics are 0-100 \
percent; others are counts, bytes, cycles or ratios);
- finding SECTION: the summed estimated speedup (%) of that section's ncu findings;
- feature NAME: a static feature of the program (free, known before profiling), log10 scale;
- budget fraction: the episode's budget as a fraction of the full set's cost.
A metric or finding condition may only read a section collected above it on its path.

Reply with one JSON object and nothing else: {"edits": [EDIT, ...]}. An EDIT is
{"op": "rewrite", "node": N, "with": NODE}: node N and its subtree become NODE; or
{"op": "split", "node": N, "if": COND, "then": NODE}: node N becomes "if COND then NODE, \
else node N as it was".
NODE: {"collect": SECTION, "next": NODE} | {"if": COND, "then": NODE, "else": NODE} | \
{"stop": true}
COND: {"metric": NAME, "at_least": X} | {"finding": SECTION, "at_least": X} | \
{"feature": NAME, "at_least": X} | {"budget": "fraction", "at_least": X}
Each edit is applied on its own to the current tree (node numbers are the current tree's). \
Aim at the problems with the largest regret: collect there what the oracle collected, or \
stop early where profiling does not pay.
Example: {"edits": [{"op": "split", "node": 0, "if": {"feature": "log_flops", "at_least": \
9.5}, "then": {"collect": "ComputeWorkloadAnalysis", "next": {"stop": true}}}]}"""


# -- the prompt -----------------------------------------------------------------------------

def node_counts(problems: tuple[ProblemFeedback, ...] | list[ProblemFeedback]) -> dict[int, int]:
    """Node number -> how many of ``problems`` reached it (from each one's path)."""
    counts: Counter = Counter()
    for p in problems:
        counts.update(set(p.path))
    return dict(counts)


def build_messages(feedback: Feedback, n: int, *, problems_shown: int = PROBLEMS_SHOWN,
                   features_shown: int = FEATURES_SHOWN, history_shown: int = HISTORY_SHOWN,
                   metrics_shown: int | None = METRICS_SHOWN) -> list[Message]:
    """The system message (what a tree is, the reply's form: the same every round) and the
    user message (the sections, the features, the current tree, how it did, the history).
    ``metrics_shown``: the metrics named per section (None: all)."""
    vocab = feedback.vocabulary
    parts = [_catalogue(feedback, metrics_shown), "Features: " + ", ".join(vocab.features)]
    problems = feedback.problems
    parts.append(f"Current tree: score {feedback.score:.4g} (exp of the mean return, the "
                 f"geometric mean speedup; higher is better) on {len(problems)} train "
                 "problems; (k problems) = how many reach the node.\n"
                 + export_text(feedback.tree, node_counts(problems)))
    parts.append(_problem_table(feedback, problems_shown, features_shown))
    if feedback.history and history_shown > 0:
        parts.append("Earlier rounds:\n" + "\n".join(feedback.history[-history_shown:]))
    parts.append(f"Round {feedback.round}: propose at most {n} edit{'s' if n != 1 else ''} "
                 "that raise the score. Reply with the JSON object only.")
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "\n\n".join(parts)}]


def _catalogue(feedback: Feedback, metrics_shown: int | None) -> str:
    vocab = feedback.vocabulary
    shows: dict[str, list[str]] = {s: [] for s in vocab.sections}
    for metric, section in vocab.metric_owner.items():
        shows.setdefault(section, []).append(metric)
    read = {c.name for c in _conditions(feedback.tree) if c.kind == "metric"}
    lines = ["Sections (cost: median share of the full set's cost; the metrics it shows):"]
    for s in vocab.sections:
        cost = feedback.section_costs.get(s)
        cost_text = f"{cost:.3g}" if isinstance(cost, (int, float)) else "?"
        names = shows[s]
        if metrics_shown is not None and len(names) > metrics_shown:
            names = [m for i, m in enumerate(names) if i < metrics_shown or m in read]
        metrics = ", ".join(names) if names else "(none)"
        if len(names) < len(shows[s]):
            metrics += f" (+{len(shows[s]) - len(names)} more)"
        lines.append(f"- {s} {cost_text}: {metrics}")
    return "\n".join(lines)


def _problem_table(feedback: Feedback, shown: int, features_shown: int) -> str:
    problems = sorted(feedback.problems, key=lambda p: (-p.regret, p.problem))
    top, rest = problems[:max(shown, 0)], problems[max(shown, 0):]
    if not top:
        return "No problem feedback."
    features = _varying_features(top, feedback, features_shown)
    reads = _condition_reads(feedback.tree)
    header = ("problem | budget | tree: sections -> candidate, speedup | oracle: sections, "
              "speedup | regret")
    header += "".join(f" | {f}" for f in features)
    header += "".join(f" | {c.describe().split(' >= ')[0]}" for c in reads)
    lines = [f"The {len(top)} problems with the largest regret, ln(oracle speedup / tree "
             f"speedup), of {len(problems)}:", header]
    for p in top:
        collected = ", ".join(p.sections) or "nothing"
        if p.oracle_speedup is None:
            oracle = "? (no hindsight)"
        else:
            oracle = f"{', '.join(p.oracle_sections or ()) or 'nothing'}, " \
                     f"{p.oracle_speedup:.3g}x"
        row = (f"{p.problem} | {p.budget:.3g} | {collected} -> {p.candidate}, "
               f"{p.speedup:.3g}x | {oracle} | {p.regret:.2f}")
        row += "".join(f" | {_number(_read(p, feedback, 'feature', f), '.1f')}"
                       for f in features)
        row += "".join(f" | {_number(_read(p, feedback, c.kind, c.name))}" for c in reads)
        lines.append(row)
    if rest:
        at_oracle = sum(1 for p in rest if p.regret <= 1e-9)
        mean = sum(p.regret for p in rest) / len(rest)
        lines.append(f"The other {len(rest)}: {at_oracle} at the oracle's speedup, mean regret "
                     f"{mean:.3f}.")
    return "\n".join(lines)


def _varying_features(problems: list[ProblemFeedback], feedback: Feedback,
                      k: int) -> list[str]:
    """The ``k`` features whose values spread most over ``problems`` (none that are equal
    for all of them)."""
    spread = []
    for i, name in enumerate(feedback.vocabulary.features):
        values = [v for p in problems if (v := _read(p, feedback, "feature", name)) is not None]
        if len(values) >= 2 and max(values) - min(values) > 1e-6:
            mean = sum(values) / len(values)
            spread.append((sum((v - mean) ** 2 for v in values) / len(values), -i, name))
    return [name for *_, name in sorted(spread, reverse=True)[:max(k, 0)]]


def _conditions(tree: Tree) -> list[Condition]:
    """The tree's conditions in preorder, each value (kind, name) once."""
    seen, out = set(), []
    for _, node in walk(tree.root):
        if isinstance(node, Branch):
            key = (node.condition.kind, node.condition.name)
            if key not in seen:
                seen.add(key)
                out.append(node.condition)
    return out


def _condition_reads(tree: Tree) -> list[Condition]:
    """The tree's metric and finding conditions, up to READS_SHOWN."""
    return [c for c in _conditions(tree) if c.kind in ("metric", "finding")][:READS_SHOWN]


def _read(p: ProblemFeedback, feedback: Feedback, kind: str, name: str) -> float | None:
    """The value ``kind`` ``name`` in ``p``'s last observation, in the condition's units
    (None: unknown, not in the observation, or not finite)."""
    try:
        value = observed(p.observation or {}, kind, name, feedback.vocabulary,
                         feedback.metric_names)
    except (KeyError, IndexError, TypeError, ValueError):  # partial, or lacks the metric
        return None
    return value if value is not None and math.isfinite(value) else None


def _number(value: float | None, form: str = ".3g") -> str:
    return "?" if value is None else format(value, form)


# -- the reply's schema ---------------------------------------------------------------------

def reply_schema(vocab: Vocabulary, *, max_edits: int | None = None, min_edits: int = 0,
                 n_nodes: int | None = None, depth: int | None = None) -> dict:
    """The JSON schema of a reply, ``{"edits": [EDIT, ...]}``, with the sections, metrics and
    features of ``vocab`` as enums (so a constrained decoder cannot misspell one).

    Nodes are recursive: by default through ``$defs``/``$ref`` (llama.cpp's, vLLM's and
    SGLang's decoders and OpenAI's strict mode take recursive references). ``depth`` unrolls
    the recursion instead, for a decoder that cannot follow it: a NODE is at most ``depth``
    nodes deep, the last of them ``{"stop": true}`` (``depth=3``: e.g. collect, branch, stop).
    ``min_edits`` and ``max_edits`` bound the list (a small model under a grammar, free to
    close the list at once, often does: Gemma 3 270M replied ``{"edits": []}`` in four of six
    rounds), ``n_nodes`` the node numbers (0 to ``n_nodes - 1``).

    Every object lists all its properties as required and allows no others (OpenAI's strict
    mode asks for both); properties are in the order the prompt shows them, which is the
    order a grammar-constrained decoder writes them in.
    """
    defs: dict[str, dict] = {}

    def obj(properties: dict) -> dict:
        return {"type": "object", "properties": properties, "required": list(properties),
                "additionalProperties": False}

    number = {"type": "number"}
    defs["condition"] = {"anyOf": [
        obj({"metric": {"type": "string", "enum": list(vocab.metric_owner)}, "at_least": number}),
        obj({"finding": {"type": "string", "enum": list(vocab.sections)}, "at_least": number}),
        obj({"feature": {"type": "string", "enum": list(vocab.features)}, "at_least": number}),
        obj({"budget": {"type": "string", "enum": list(BUDGET_VALUES)}, "at_least": number}),
    ]}
    condition = {"$ref": "#/$defs/condition"}
    defs["stop"] = obj({"stop": {"type": "boolean", "enum": [True]}})

    def add_node(level: str, child: dict) -> dict:
        defs[f"node{level}"] = {"anyOf": [
            obj({"collect": {"type": "string", "enum": list(vocab.sections)}, "next": child}),
            obj({"if": condition, "then": child, "else": child}),
            {"$ref": "#/$defs/stop"}]}
        return {"$ref": f"#/$defs/node{level}"}

    if depth is None:
        node = add_node("", {"$ref": "#/$defs/node"})
    else:
        if depth < 1:
            raise ValueError(f"depth is at least 1 (a NODE one level deep), got {depth}")
        node = {"$ref": "#/$defs/stop"}
        for level in range(depth - 2, -1, -1):
            node = add_node(str(level), node)
    index: dict = {"type": "integer", "minimum": 0}
    if n_nodes is not None:
        index["maximum"] = max(n_nodes - 1, 0)
    defs["rewrite"] = obj({"op": {"type": "string", "enum": ["rewrite"]}, "node": index,
                           "with": node})
    defs["split"] = obj({"op": {"type": "string", "enum": ["split"]}, "node": index,
                         "if": condition, "then": node})
    edits: dict = {"type": "array",
                   "items": {"anyOf": [{"$ref": "#/$defs/rewrite"}, {"$ref": "#/$defs/split"}]}}
    if min_edits > 0:
        edits["minItems"] = min_edits
    if max_edits is not None:
        edits["maxItems"] = max_edits
    schema = obj({"edits": edits})
    schema["$defs"] = defs
    return schema


# -- the reply ------------------------------------------------------------------------------

@dataclass(frozen=True)
class ParsedReply:
    """What :func:`parse_reply` made of a reply: the usable edits and, for each other one,
    why it was dropped."""

    edits: list[Edit]
    unusable: list[str]


def extract_json(text: str) -> object:
    """The JSON value of a reply: the whole text, else the first fenced block (```json) that
    decodes, else the first object or array that decodes from a ``{`` or ``[`` in the text
    (prose around it is ignored). An object with ``"edits"`` is preferred over other values.
    A reasoning model's ``<think>...</think>`` is a draft, not the reply, and is not read
    (:func:`~autoprofiler_env.optimizers.llm.reply.answer`).

    Raises:
        LLMError: ``no_json``, nothing in the reply decodes.
    """
    text = answer(text)[:REPLY_CHARS]  # a reasoning model's draft is not its reply
    found: list[object] = []
    too_long: list[_LongInteger] = []

    def decode(candidate: str) -> bool:
        try:
            found.append(json.loads(candidate, parse_int=_json_int))
        except _LongInteger as e:
            too_long.append(e)
            return False
        except (ValueError, RecursionError):
            return False
        return True

    if decode(text.strip()) and _is_reply(found[-1]):
        return found[-1]
    for block in _fenced_blocks(text):
        if decode(block.strip()) and _is_reply(found[-1]):
            return found[-1]
    decoder = json.JSONDecoder(parse_int=_json_int)
    start, tries = 0, 0
    while tries < 200:  # bounded: each raw_decode may read to the end of the text
        at = min((i for i in (text.find("{", start), text.find("[", start)) if i >= 0),
                 default=-1)
        if at < 0:
            break
        tries += 1
        try:
            value, end = decoder.raw_decode(text, at)
        except (ValueError, RecursionError) as e:
            if isinstance(e, _LongInteger):
                too_long.append(e)
            start = at + 1
            continue
        found.append(value)
        if _is_reply(value):
            return value
        start = end
    if too_long:  # the reply's JSON, unread for it: not an inner object that did decode
        raise LLMError("no_json", too_long[0].explain(text))
    for value in sorted(found, key=lambda v: not isinstance(v, (dict, list))):
        return value  # not a reply: parse_reply says what it is
    preview = " ".join(text.split())[:200]
    raise LLMError("no_json", f"the reply holds no JSON object: {preview!r}")


def _is_reply(value: object) -> bool:
    return isinstance(value, dict) and "edits" in value


def _fenced_blocks(text: str) -> list[str]:
    """The contents of ``` fences (a language tag on the opening line is dropped), found by
    plain searches (no regular expression to backtrack on a long reply). Any ``` closes a
    block, unlike the LLM optimizer's reader of code (:mod:`~autoprofiler_env.optimizers.llm.
    reply`), which closes one only at a line of its own: a JSON reply's fence often closes on
    the JSON's last line."""
    blocks, start = [], 0
    while True:
        open_at = text.find("```", start)
        if open_at < 0:
            return blocks
        body = open_at + 3
        close = text.find("```", body)
        content = text[body:] if close < 0 else text[body:close]
        first, newline, rest = content.partition("\n")
        if newline and (not first.strip() or first.strip().isalpha()):
            content = rest
        blocks.append(content)
        if close < 0:
            return blocks
        start = close + 3


class _LongInteger(ValueError):
    """A JSON integer with more digits than Python converts from text
    (``sys.get_int_max_str_digits()``, 4300 by default): the whole JSON value holding it does
    not decode. Told apart from other undecodable text so that the reply is refused for it,
    not read as whatever inner object did decode (a ``{"stop": true}``)."""

    def __init__(self, digits: str) -> None:
        self.digits = digits.lstrip("-")
        super().__init__(f"an integer of {len(self.digits)} digits")

    def explain(self, text: str) -> str:
        """What is wrong, naming the key that holds the integer where the text shows it."""
        match = re.search(r'"([^"\\]{1,40})"\s*:\s*-?' + self.digits[:40], text)
        where = f'"{match.group(1)}"' if match else "a number"
        return (f"the reply's {where} is an integer of {len(self.digits)} digits, too long to "
                "read: a node number is one of the tree's (as the prompt numbers them), a "
                "threshold a number of ordinary size")


def _json_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # only the limit on digits makes int() refuse JSON's digits
        raise _LongInteger(text) from None


def parse_reply(text: str, feedback: Feedback, n: int) -> ParsedReply:
    """The edits of a reply, each read (:func:`~agents.tree.edits.edit_from_dict`) and applied
    to the current tree (so that the learner is offered only edits that give a valid tree);
    the reasons of the others, numbered from 1 as the reply lists them. Beyond ``n`` edits,
    an edit that changes nothing, or one equal to an earlier one, is dropped too.

    Raises:
        LLMError: ``no_json`` (nothing decodes), ``schema`` (JSON, but no list of edits).
    """
    data = extract_json(text)
    if isinstance(data, dict) and "edits" in data:
        items = data["edits"]
    elif isinstance(data, dict) and "op" in data:  # one bare edit
        items = [data]
    else:
        items = data
    if not isinstance(items, list):
        shown = json.dumps(data)[:200] if not isinstance(data, str) else repr(data[:200])
        raise LLMError("schema", 'the reply is JSON but not {"edits": [EDIT, ...]}: got '
                       f"{shown}")
    edits: list[Edit] = []
    unusable: list[str] = []
    seen: dict[Edit, int] = {}
    for i, item in enumerate(items, start=1):
        if len(edits) >= n:
            unusable.append(f"edit {i}: beyond the {n} asked")
            continue
        try:
            edit = edit_from_dict(item)
            edited = edit.apply(feedback.tree, feedback.vocabulary)
        except TreeFormatError as e:
            unusable.append(f"edit {i}: {e}")
            continue
        if edit in seen:
            unusable.append(f"edit {i}: the same as edit {seen[edit]}")
        elif edited.root == feedback.tree.root:
            unusable.append(f"edit {i}: changes nothing ({edit.describe()})")
        else:
            seen[edit] = i
            edits.append(edit)
    return ParsedReply(edits, unusable)


# -- the proposer ---------------------------------------------------------------------------

class LLMProposer:
    """Edits proposed by a language model (the :class:`~agents.tree.proposers.base.Proposer`
    protocol): one request per round, its reply checked.

    Args:
        backend: the model (:class:`~autoprofiler_env.optimizers.llm.OpenAIChatBackend`,
            :class:`~autoprofiler_env.optimizers.llm.TransformersBackend`, or any
            :class:`~autoprofiler_env.optimizers.llm.ChatBackend`).
        max_tokens, temperature, seed, timeout_s: the decoding settings of every request
            (deterministic by default: greedy with a fixed seed).
        name: names the proposer in the learner's log; default ``llm:<model_name>``.
        structured: how :func:`reply_schema` is sent as ``response_format``, to a backend
            that takes it (:func:`~autoprofiler_env.optimizers.llm.backend.takes_response_format`):
            ``"json_schema"``, OpenAI's form (OpenAI, vLLM, SGLang, llama.cpp's own
            ``llama-server``); ``"json_object"``, ``{"type": "json_object", "schema": ...}``,
            the only form llama-cpp-python's server takes (it answers the other with HTTP
            500); None, no ``response_format``, for a server that refuses the field.
        schema_depth: unroll the schema's recursion to this depth (see :func:`reply_schema`),
            for a constrained decoder that cannot follow recursive references, or a small
            model that nests without end under the recursive one (Gemma 3 270M did once in
            six rounds; 4 stopped it).
        fold_system: send the system prompt at the start of the user message instead, for a
            model whose chat format has no system turn (llama-cpp-python's ``gemma`` format
            drops a system message without a word).
        problems_shown, features_shown, history_shown, metrics_shown: how much of the
            feedback and of the catalogue the prompt shows (:func:`build_messages`).
    """

    def __init__(self, backend: ChatBackend, *, max_tokens: int = DEFAULT_MAX_TOKENS,
                 temperature: float = DEFAULT_TEMPERATURE, seed: int = DEFAULT_SEED,
                 timeout_s: float = DEFAULT_TIMEOUT_S, name: str | None = None,
                 structured: str | None = "json_schema", schema_depth: int | None = None,
                 fold_system: bool = False,
                 problems_shown: int = PROBLEMS_SHOWN, features_shown: int = FEATURES_SHOWN,
                 history_shown: int = HISTORY_SHOWN,
                 metrics_shown: int | None = METRICS_SHOWN) -> None:
        self.backend = backend
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.timeout_s = timeout_s
        self.name = name or f"llm:{backend.model_name}"
        if structured not in STRUCTURED:
            raise ValueError(f"structured is one of {', '.join(map(repr, STRUCTURED))}, not "
                             f"{structured!r}")
        self.structured = structured
        self.schema_depth = schema_depth
        self.fold_system = fold_system
        self.problems_shown = problems_shown
        self.features_shown = features_shown
        self.history_shown = history_shown
        self.metrics_shown = metrics_shown
        self.last_reply: str | None = None  # the raw text of the last reply, for a log

    def __repr__(self) -> str:
        return f"LLMProposer({self.backend!r}, name={self.name!r})"

    @property
    def settings(self) -> dict:
        """What changes the replies, besides :attr:`name`: the model and its backend, the
        decoding settings, the response_format and the prompt's settings. The learner writes
        them in the log and resumes a log only with the same. Not the time-out, the API key
        or the endpoint's URL (the same model served at another address answers the same;
        :attr:`endpoint` says where it was)."""
        return {"model": self.backend.model_name, "backend": type(self.backend).__name__,
                "seed": self.seed, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "structured": self.structured,
                "schema_depth": self.schema_depth, "fold_system": self.fold_system,
                "problems_shown": self.problems_shown, "features_shown": self.features_shown,
                "history_shown": self.history_shown, "metrics_shown": self.metrics_shown}

    @property
    def endpoint(self) -> str | None:
        """The backend's URL without any user or password or query value in it (None: a
        local model), for a run's record."""
        from autoprofiler_env.optimizers.llm.openai import redacted_url

        url = getattr(self.backend, "url", None)
        return redacted_url(url) if isinstance(url, str) else None

    def response_format(self, feedback: Feedback, n: int) -> dict | None:
        """What the request sends as ``response_format`` (None: nothing, the backend cannot
        constrain its reply or ``structured`` is off)."""
        if self.structured is None or not takes_response_format(self.backend):
            return None
        schema = reply_schema(feedback.vocabulary, max_edits=n, min_edits=1,
                              n_nodes=feedback.tree.size(), depth=self.schema_depth)
        if self.structured == "json_object":
            return {"type": "json_object", "schema": schema}
        return json_schema_format(SCHEMA_NAME, schema)

    def messages(self, feedback: Feedback, n: int) -> list[Message]:
        """What the request sends: :func:`build_messages` with this proposer's settings."""
        messages = build_messages(feedback, n, problems_shown=self.problems_shown,
                                  features_shown=self.features_shown,
                                  history_shown=self.history_shown,
                                  metrics_shown=self.metrics_shown)
        if self.fold_system:
            system, user = messages
            return [{"role": "user", "content": system["content"] + "\n\n" + user["content"]}]
        return messages

    def propose(self, feedback: Feedback, n: int) -> Proposal:
        """Up to ``n`` edits from one request; never raises for what the model or the server
        does (:attr:`Proposal.error`, :attr:`Proposal.unusable` say what went wrong). The
        request's seed is ``seed + feedback.round``: a sampled reply differs from round to
        round and a run is reproducible where the server honours seeds."""
        if n < 1:
            return Proposal(edits=[])
        messages = self.messages(feedback, n)
        extra = {}
        response_format = self.response_format(feedback, n)
        if response_format is not None:
            extra["response_format"] = response_format
        self.last_reply = None
        started = time.perf_counter()
        try:
            reply = self.backend.complete(messages, max_tokens=self.max_tokens,
                                          temperature=self.temperature,
                                          seed=self.seed + feedback.round,
                                          timeout_s=self.timeout_s, **extra)
        except LLMError as e:
            error = str(e)
            if e.kind == "http" and response_format is not None and any(
                    word in error for word in ("HTTP 400", "HTTP 422", "response_format")):
                error += (f" (if the server does not take a {self.structured!r} "
                          "response_format: --llm-structured none on the learn-tree "
                          "command line, LLMProposer(..., structured=None) in Python; or "
                          "json_object, --llm-structured json_object or "
                          "structured='json_object', for llama-cpp-python's server)")
            return Proposal(edits=[], seconds=time.perf_counter() - started,
                            tokens=self._usage(), error=error,
                            unreached=e.unreached,
                            refused=e.refused)
        seconds = time.perf_counter() - started
        self.last_reply = reply
        try:
            parsed = parse_reply(reply, feedback, n)
        except LLMError as e:
            return Proposal(edits=[], seconds=seconds, tokens=self._usage(), error=str(e))
        return Proposal(edits=parsed.edits, unusable=parsed.unusable, seconds=seconds,
                        tokens=self._usage())

    def _usage(self) -> dict | None:
        info = getattr(self.backend, "last_info", None)
        usage = info.get("usage") if isinstance(info, dict) else None
        return dict(usage) if isinstance(usage, dict) else None
