"""The traffic warm-up `kimi_eagle3`: the batches it plans (pure), the requests its coroutine sends through a
recording stand-in of SGLang's TokenizerManager (the real one needs a live server), and the launch step's part
through SGLang's real prepare_server_args + resolve_once + publish: --warmups gains `kimi_eagle3` for an EAGLE3
launch of the tiny pair and SGLang's real `_warmup_registry` holds our coroutine; the switch, the operator's
own names and a plain launch.
"""

import asyncio
from types import SimpleNamespace

import pytest
from helpers import LLAMA_8B, llama_eagle3_argv, run_json

from sglang_kimi_eagle3.integration.hooks import traffic_warmup as T

# ---- the plan (pure) --------------------------------------------------------------------------------------


def _sizes(batches):
    return sorted({b.size for b in batches})


def test_plan_covers_tritons_int_specializations_and_the_concurrency_ladder():
    batches = [b for b in T.plan(max_running_requests=None, context_len=262144) if b.reuse != "ladder"]
    sizes = _sizes(batches)
    assert sizes == [1, 3, 4, 16, 64]
    assert 1 in sizes and any(s != 1 and s % 16 for s in sizes) and any(s % 16 == 0 for s in sizes)
    # every size at temperature 0 and 0.7, with a short and a longer prompt
    for s in sizes:
        mine = [b for b in batches if b.size == s]
        assert {b.temperature for b in mine} == {0.0, 0.7}
        assert min(b.prompt_len for b in mine) == 31 and max(b.prompt_len for b in mine) > 31
        # at the first temperature the short prompts come back: whole-prompt and partial prefix-cache hits
        assert [b.reuse for b in mine if b.temperature == 0.0 and b.prompt_len == 31] == ["fresh", "extend", "shared"]
        assert {b.reuse for b in mine if b.temperature == 0.7} == {"fresh"}
    assert max(b.prompt_len for b in batches) == 512
    assert all(b.size * b.prompt_len <= T.BATCH_TOKENS for b in batches)  # the big batches shrink the long prompt
    assert sum(b.size for b in batches) < 600  # seconds of serving, not minutes


def test_the_ladder_gives_the_fused_moe_every_config_bucket_and_token_count_mod_16():
    """Every prefill of M tokens (one request up to the chunk size, or a batch) meets a (config, M mod 16) variant
    of SGLang's fused MoE that some ladder prompt compiled first."""
    import inspect

    # the grid is the one SGLang's shipped tables are keyed by (the H200 table for 8 experts, N 2048: the
    # Kimi-width pair's), and its lookup is the nearest key, ties to the smaller
    import json
    import pathlib

    from sglang.srt.layers.moe.moe_runner.triton_utils import fused_moe_triton_config as cfg
    table = pathlib.Path(cfg.__file__).parent / "configs" / "triton_3_1_0" / "E=8,N=2048,device_name=NVIDIA_H200.json"
    assert tuple(sorted(int(k) for k in json.loads(table.read_text()))) == T.MOE_GRID
    assert "min(configs.keys(), key=lambda x: abs(x - M))" in inspect.getsource(cfg.try_get_optimal_moe_config)
    batches = T.plan(max_running_requests=None, context_len=262144)
    ladder = [b for b in batches if b.reuse == "ladder"]
    assert batches[-len(ladder):] == ladder  # after everything else
    assert all(b.size == 1 and b.temperature == 0.0 and b.new_tokens == T.LADDER_NEW_TOKENS for b in ladder)
    lengths = [b.prompt_len for b in ladder]
    assert lengths == sorted(set(lengths)) and len(lengths) == 216 and lengths[-1] == 3600
    covered = {(T.moe_bucket(n), n % 16) for n in lengths}
    assert all((T.moe_bucket(m), m % 16) in covered for m in range(1, 16385))
    assert T.moe_bucket(3) == 2 and T.moe_bucket(12) == 8 and T.moe_bucket(20000) == 4096
    assert sum(lengths) < 180_000  # prompt tokens of the whole ladder
    # a short context keeps the lengths that fit, with room for the new tokens
    short = [b.prompt_len for b in T.plan(context_len=100) if b.reuse == "ladder"]
    assert short == [*range(1, 73), *range(81, 97)]  # 57-72 fill the 64 bucket (57-80); 81-96 the 96 one (81-112)


def test_plan_is_capped_by_max_running_requests_and_the_context_length():
    small = T.plan(max_running_requests=8, context_len=262144)
    assert _sizes(small) == [1, 3, 4, 8]  # no multiple of 16 fits under 8 requests; the bound itself is warmed
    assert _sizes(T.plan(max_running_requests=20)) == [1, 3, 4, 16, 20]
    assert _sizes(T.plan(max_running_requests=48)) == [1, 3, 4, 16, 48]  # SGLang's default for the tiny pair
    assert _sizes(T.plan(max_running_requests=1000)) == [1, 3, 4, 16, 64]  # min(64, max running)
    short_ctx = T.plan(context_len=100)
    assert short_ctx and all(b.prompt_len + b.new_tokens < 100 for b in short_ctx)
    assert all(b.prompt_len + b.new_tokens < 30 for b in T.plan(context_len=30))
    assert T.plan(context_len=T.MAX_NEW_TOKENS) == []  # no room for a prompt: nothing sent


def test_plan_adds_the_first_eagerly_decoded_batch_size():
    assert 25 in _sizes(T.plan(max_running_requests=48, cuda_graph_max_bs_decode=24))
    assert _sizes(T.plan(max_running_requests=48, cuda_graph_max_bs_decode=48)) == [1, 3, 4, 16, 48]  # all captured


def test_with_ours_appends_once_and_keeps_the_operators_names():
    assert T.with_ours(None) == "kimi_eagle3"
    assert T.with_ours("voice_chat") == "voice_chat,kimi_eagle3"
    assert T.with_ours("voice_chat,kimi_eagle3") == "voice_chat,kimi_eagle3"


# ---- the coroutine, against a recording stand-in of the TokenizerManager ----------------------------------


class _Recorder:
    """What the coroutine touches of SGLang's TokenizerManager: model_config.vocab_size, server_args, context_len
    and the async generator generate_request(obj, request)."""

    def __init__(self, vocab=500, fail_at=None, **server_args):
        self.model_config = SimpleNamespace(vocab_size=vocab)
        self.server_args = SimpleNamespace(**{"max_running_requests": None, "cuda_graph_max_bs_decode": None,
                                              **server_args})
        self.context_len = 4096
        self.max_req_input_len = None
        self.sent = []
        self.fail_at = fail_at
        self.in_flight = 0
        self.most_in_flight = []  # per request: how many were in flight when it was answered

    async def generate_request(self, obj, request=None):
        assert request is None
        self.sent.append(obj)
        if len(self.sent) == self.fail_at:
            raise RuntimeError("scheduler went away")
        self.in_flight += 1
        try:
            for _ in range(1 + obj.sampling_params["max_new_tokens"] // 4):  # a decode step or a few
                await asyncio.sleep(0)
            self.most_in_flight.append(self.in_flight)
        finally:
            self.in_flight -= 1
        yield [{"text": ""}] * len(obj.input_ids)


class _Log:
    def __init__(self):
        self.lines = []

    def info(self, msg, *args):
        self.lines.append(("info", msg % args))

    def warning(self, msg, *args):
        self.lines.append(("warning", msg % args))


@pytest.fixture
def log(monkeypatch):
    out = _Log()
    monkeypatch.setattr(T, "logger", lambda: out)
    return out


def test_the_coroutine_sends_each_planned_batch_as_one_request_and_logs_applied(log):
    from sglang.srt.managers.io_struct import GenerateReqInput

    tm = _Recorder(vocab=500, max_running_requests=16)
    asyncio.run(T.kimi_eagle3("null", tm))
    planned = T.plan(max_running_requests=16, context_len=4096)
    loop = {c: T.loop_requests(c, 500, 4095) for c in T.loop_levels(16)}
    assert len(tm.sent) == len(planned) + sum(len(r) for c in loop.values() for r in c)
    fresh: dict = {}
    for req, b in zip(tm.sent, planned):
        assert isinstance(req, GenerateReqInput)
        want = b.prompt_len + (b.reuse == "extend")  # extend: the fresh prompt and one new id
        assert len(req.input_ids) == b.size and {len(p) for p in req.input_ids} == {want}
        if b.reuse == "fresh" and b.prompt_len == T.SHORT:
            fresh[b.size] = req.input_ids
        elif b.reuse == "extend":  # the whole fresh prompt again: a radix-cache hit, one token to extend
            assert [p[:-1] for p in req.input_ids] == fresh[b.size]
        elif b.reuse == "shared":  # its first ids, then new ones: a partial hit
            assert [p[:T.SHARED_PREFIX] for p in req.input_ids] == [p[:T.SHARED_PREFIX] for p in fresh[b.size]]
            assert all(p[T.SHARED_PREFIX:] != f[T.SHARED_PREFIX:] for p, f in zip(req.input_ids, fresh[b.size]))
        assert all(10 <= i < 500 for p in req.input_ids for i in p)
        sp = req.sampling_params
        assert sp["temperature"] == b.temperature and sp["top_p"] == 1.0 and sp["ignore_eos"] is True
        assert sp["max_new_tokens"] == (T.LADDER_NEW_TOKENS if b.reuse == "ladder" else T.MAX_NEW_TOKENS)
    assert {r.sampling_params["temperature"] for r in tm.sent} == {0.0, 0.7}
    assert _sizes(planned) == [1, 3, 4, 16]
    assert {b.reuse for b in planned} == {"fresh", "extend", "shared", "ladder"}
    # deterministic ids, and no two fresh prompts alike (their prefix-cache hits are the planned ones only)
    again = _Recorder(vocab=500, max_running_requests=16)
    asyncio.run(T.kimi_eagle3("null", again))
    assert [r.input_ids for r in again.sent] == [r.input_ids for r in tm.sent]
    flat = [tuple(p) for r, b in zip(tm.sent, planned) if b.reuse in ("fresh", "ladder") for p in r.input_ids]
    assert len(set(flat)) == len(flat)
    # then the closed loop: single requests (flat id lists), each client's in order, several clients in flight
    looped = tm.sent[len(planned):]
    assert all(isinstance(r.input_ids[0], int) for r in looped)
    want = [r for c in loop.values() for client in c for r in client]
    assert sorted(map(tuple, (r.input_ids for r in looped))) == sorted(tuple(r["input_ids"]) for r in want)
    assert max(tm.most_in_flight[len(planned):]) > 1 and max(tm.most_in_flight[:len(planned)]) == 1
    level, line = log.lines[0]
    assert level == "info" and line.startswith("traffic warm-up (applied): ")
    n = sum(b.size for b in planned) + len(want)
    assert f"{len(planned)} batches, {n} requests in " in line and " s " in line
    assert "closed loop at c 2,4,8,16)" in line


def test_the_closed_loop_mixes_fresh_and_prefix_hit_prompts_lengths_and_temperatures():
    assert T.loop_levels() == [2, 4, 8, 16, 32, 64]
    assert T.loop_levels(48) == [2, 4, 8, 16, 32, 48] and T.loop_levels(20) == [2, 4, 8, 16, 20]
    assert T.loop_levels(1) == []  # one request at a time: nothing runs beside another
    level = T.loop_requests(16, 163840)
    assert len(level) == 16 and all(len(client) == T.LOOP_REQUESTS for client in level)
    for client in level:
        first, second, third = client
        assert second["input_ids"][:len(first["input_ids"])] == first["input_ids"]  # a prefix hit
        assert T.LOOP_TAIL[0] <= len(second["input_ids"]) - len(first["input_ids"]) <= T.LOOP_TAIL[1]
        assert third["input_ids"][:8] != second["input_ids"][:8]  # fresh again
        assert T.LOOP_PROMPT[0] <= len(first["input_ids"]) <= T.LOOP_PROMPT[1]
    flat = [r for client in level for r in client]
    assert {r["temperature"] for r in flat} == {0.0, 0.7}
    assert len({r["max_new_tokens"] for r in flat}) > 8  # clients finish one by one: the batch shrinks step by step
    assert len({len(r["input_ids"]) for r in flat}) > 16
    assert T.loop_requests(16, 163840) == level  # seeded
    # a short context: every request fits with its new tokens
    for client in T.loop_requests(8, 500, room=60):
        assert all(len(r["input_ids"]) + r["max_new_tokens"] <= 60 and r["input_ids"] for r in client)


def test_an_error_inside_generate_request_is_logged_not_raised(log):
    tm = _Recorder(fail_at=2)
    asyncio.run(T.kimi_eagle3("null", tm))  # must not raise into SGLang's lifespan
    assert len(tm.sent) == 2
    (level, line), = log.lines
    assert level == "warning" and line.startswith("traffic warm-up (failed): RuntimeError: scheduler went away")
    assert "after 1 batches" in line


def test_disaggregation_is_skipped_with_a_reason(log):
    tm = _Recorder()
    asyncio.run(T.kimi_eagle3("prefill", tm))
    assert tm.sent == [] and "disaggregation mode prefill" in log.lines[0][1]


# ---- the launch step, through SGLang's real resolution ----------------------------------------------------

CODE = r'''
import json, os, warnings
warnings.filterwarnings("ignore")
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang.srt.server_args import prepare_server_args
from sglang.srt.arg_groups.overrides import resolution_result
from sglang.srt.entrypoints.warmup import _warmup_registry
from sglang.srt.runtime_context import override_platform, publish, get_serving
from sglang_kimi_eagle3.status import hookstatus
from sglang_kimi_eagle3.integration.hooks import traffic_warmup as T
from sglang_kimi_eagle3.commands.check import platform_facts

out = {}
for name, argv, env in CASES:  # the launches that must not register come first: the registry is per process
    os.environ.update(env)
    sa = prepare_server_args(argv)
    with override_platform(**platform_facts(90)):
        sa.resolve_once()
    main_row = hookstatus.get("traffic_warmup")
    publish(sa, role="scheduler")
    T.confirm_in_scheduler()
    row = hookstatus.get("traffic_warmup")
    out[name] = {"warmups": resolution_result(sa, "warmups"), "published": get_serving().warmups,
                 "registered": _warmup_registry.get("kimi_eagle3") is T.kimi_eagle3,
                 "ours_declared": any(src.startswith("sglang-kimi-eagle3.traffic") for src, _ in sa._resolved_overrides),
                 "main": [main_row.state, main_row.detail], "scheduler": [row.state, row.detail]}
    if name == "on":  # SGLang's own caller (http_server's lifespan runs exactly this), against a recording stand-in
        import asyncio
        from types import SimpleNamespace
        from sglang.srt.entrypoints.warmup import execute_warmups

        class TM:
            model_config, server_args, context_len, max_req_input_len = SimpleNamespace(vocab_size=128256), sa, 4096, None
            sent = []
            async def generate_request(self, obj, request=None):
                self.sent.append(len(obj.input_ids) if isinstance(obj.input_ids[0], list) else "one")
                yield {}
        tm = TM()
        asyncio.run(execute_warmups("null", get_serving().warmups.split(","), tm))
        out[name]["executed"] = tm.sent
        out[name]["bounds"] = T._bounds(tm)
        from sglang_kimi_eagle3.integration.hooks import serving_compiles as SC
        mark = SC.mark_path(sa.port)
        out[name]["marker"] = [mark.name, json.loads(mark.read_text())] if mark.exists() else None
    for k in env:
        os.environ.pop(k)
print(json.dumps(out))
'''


# ---- the ladder only where a fused-MoE layer runs SGLang's Triton fused MoE ----------------------------------


def test_the_ladder_is_planned_unless_no_fused_moe_layer_runs_the_triton_kernel():
    assert any(b.reuse == "ladder" for b in T.plan(context_len=4096))
    no_ladder = T.plan(context_len=4096, ladder=False)
    assert no_ladder == [b for b in T.plan(context_len=4096) if b.reuse != "ladder"] and no_ladder
    assert T.ladder_wanted({}) is False  # no MoE at all (a dense target)
    assert T.ladder_wanted({"CompressedTensorsWNA16MoE": 84}) is False  # Marlin everywhere (Kimi-K2.5 INT4, SM90/SM120)
    assert T.ladder_wanted({"CompressedTensorsWNA16MoE": 83, "UnquantizedFusedMoEMethod": 1}) is True
    assert T.ladder_wanted({"CompressedTensorsWNA16TritonMoE": 3}) is True
    assert T.describe_moe({"CompressedTensorsWNA16MoE": 3}).endswith("(Marlin, no Triton fused MoE): the token-count "
                                                                   "ladder is skipped")


def test_sglangs_marlin_scheme_is_the_one_named_and_its_triton_scheme_is_not():
    """The name NO_TRITON_MOE holds is the class SGLang 0.5.23 returns for an INT4 compressed-tensors MoE unless the
    backend is triton (or auto on SM100), and moe_methods reads it from a real FusedMoE layer's `scheme`."""
    import inspect

    import torch
    from sglang.srt.layers.moe.fused_moe_triton.layer import FusedMoE
    from sglang.srt.layers.quantization.compressed_tensors.compressed_tensors import CompressedTensorsConfig
    from sglang.srt.layers.quantization.compressed_tensors.schemes import (
        CompressedTensorsWNA16MoE,
        CompressedTensorsWNA16TritonMoE,
    )

    src = inspect.getsource(CompressedTensorsConfig.get_moe_scheme)
    marlin = 'logger.info_once("Using CompressedTensorsWNA16MarlinMoEMethod")\n'
    assert marlin in src and src.split(marlin)[1].lstrip().startswith("return CompressedTensorsWNA16MoE(")
    assert "if moe_backend.is_triton() or use_blackwell_triton:" in src
    assert T.NO_TRITON_MOE == (CompressedTensorsWNA16MoE.__name__,)

    def layer(scheme_cls):
        m = FusedMoE.__new__(FusedMoE)  # the real class (isinstance), without building its weights
        torch.nn.Module.__init__(m)
        m.scheme = scheme_cls.__new__(scheme_cls)
        return m

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), layer(CompressedTensorsWNA16MoE), layer(CompressedTensorsWNA16MoE))
    assert T.moe_methods(model) == {"CompressedTensorsWNA16MoE": 2} and not T.ladder_wanted(T.moe_methods(model))
    model.append(layer(CompressedTensorsWNA16TritonMoE))
    assert T.ladder_wanted(T.moe_methods(model))
    assert T.moe_methods(torch.nn.Sequential(torch.nn.Linear(2, 2))) == {}


def test_the_coroutine_skips_the_ladder_only_on_this_launchs_marker(log, tmp_path, monkeypatch):
    import json
    import os
    import time

    monkeypatch.setenv("SGLANG_KIMI_EAGLE3_STATUS_DIR", str(tmp_path))
    planned = T.plan(max_running_requests=16, context_len=4096)
    ladder = sum(1 for b in planned if b.reuse == "ladder")

    def sent(**mark):
        if mark:
            (tmp_path / "moe-port30000.json").write_text(json.dumps(mark))
        tm = _Recorder(vocab=500, max_running_requests=16, port=30000)
        asyncio.run(T.kimi_eagle3("null", tm))
        return len(tm.sent), log.lines[-1][1]

    n_all, line = sent()
    assert f"{ladder} single prompts of 1-3600 tokens (no MoE marker from the schedulers" in line
    n, line = sent(methods={"CompressedTensorsWNA16MoE": 3}, ladder=False)
    assert n == n_all - ladder and "0 single prompts of no tokens (the target's fused-MoE layers run " in line
    n, _ = sent(methods={"CompressedTensorsWNA16TritonMoE": 3}, ladder=True)
    assert n == n_all
    (tmp_path / "moe-port30000.json").write_text(json.dumps({"methods": {}, "ladder": False}))
    old = T._LOADED - 60  # another launch's marker, left on the same port
    os.utime(tmp_path / "moe-port30000.json", (old, old))
    n, line = sent()
    assert n == n_all and "another launch's" in line
    (tmp_path / "moe-port30000.json").write_text("{not json")
    assert T.read_moe_mark(30000)[0] is True and time.time() >= T._LOADED


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    eagle3 = llama_eagle3_argv(31991)
    plain = ["--model-path", str(LLAMA_8B), "--device", "cuda", "--port", "31992"]
    cases = [("plain", plain, {}), ("plain_with_names", plain + ["--warmups", "voice_chat"], {}),
             ("off", eagle3, {"SGLANG_KIMI_EAGLE3_WARMUP": "off"}),
             ("workers", eagle3 + ["--tokenizer-worker-num", "2"], {}),
             ("on", eagle3, {}), ("operator", eagle3 + ["--warmups", "voice_chat"], {}),
             ("already", eagle3 + ["--warmups", "kimi_eagle3,voice_chat"], {})]
    status = tmp_path_factory.mktemp("status")
    return run_json(f"CASES = {cases!r}\n" + CODE, timeout=600, HF_HUB_OFFLINE="1",
                    SGLANG_KIMI_EAGLE3_STATUS_DIR=str(status))


@pytest.mark.slow
def test_an_eagle3_launch_gains_kimi_eagle3_in_warmups_and_sglangs_registry(launches):
    on = launches["on"]
    assert on["warmups"] == on["published"] == "kimi_eagle3" and on["registered"]
    assert on["main"][0] == "applied" and "appended to --warmups" in on["main"][1]
    assert on["scheduler"][0] == "applied" and "runs in the HTTP server before it accepts requests" in on["scheduler"][1]
    # SGLang's execute_warmups, given the published --warmups, runs our coroutine: one request batch per planned
    # batch, then the closed loop's single requests
    loop = sum(len(client) for c in T.loop_levels(48) for client in T.loop_requests(c, 128256, 4095))
    assert on["executed"] == [b.size for b in T.plan(**on["bounds"])] + ["one"] * loop
    assert on["bounds"]["context_len"] == 4096
    # at its end the warm-up leaves the marker the schedulers' serving_compiles row splits its count at
    name, mark = on["marker"]
    assert name == "warmup-port31991.json" and mark["detail"].startswith("applied: ") and mark["ended"] > 0
    assert on["bounds"]["max_running_requests"] == 48  # SGLang's resolved value, not the record's raw None
    assert launches["operator"]["published"] == "voice_chat,kimi_eagle3"
    assert launches["already"]["published"] == "kimi_eagle3,voice_chat"  # never twice
    assert not launches["already"]["ours_declared"] and "already in --warmups" in launches["already"]["scheduler"][1]


@pytest.mark.slow
def test_the_switch_off_and_a_plain_launch_register_and_change_nothing(launches):
    off = launches["off"]
    assert off["published"] is None and not off["registered"] and not off["ours_declared"]
    assert off["main"][0] == off["scheduler"][0] == "skipped" and "SGLANG_KIMI_EAGLE3_WARMUP=off" in off["scheduler"][1]
    workers = launches["workers"]  # SGLang's tokenizer worker processes load no plugins: said, not pretended
    assert workers["published"] is None and not workers["registered"] and workers["scheduler"][0] == "skipped"
    assert "--tokenizer-worker-num > 1" in workers["scheduler"][1]
    for name, given in (("plain", None), ("plain_with_names", "voice_chat")):
        plain = launches[name]
        assert plain["published"] == given and not plain["registered"] and not plain["ours_declared"], name
        assert plain["main"][0] == "skipped" and "not an EAGLE/EAGLE3 launch" in plain["main"][1]


MOE_ROUTED = """
import json
import sglang.srt.plugins as plugins
plugins.load_plugins()
from sglang_kimi_eagle3.status import hookstatus
from sglang_kimi_eagle3.integration import refresh_status, registry
from sglang_kimi_eagle3.integration.hooks import traffic_warmup as T
refresh_status()
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker
row = hookstatus.get(T.MOE_ROW)
print(json.dumps({"hooked": registry._chain_contains(BaseSpecWorker.init_cuda_graphs, T._after_cuda_graphs),
                  "row": row.state if row else None}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("warmup, want", [("on", {"hooked": True, "row": "applied"}),
                                          ("off", {"hooked": False, "row": "skipped"})])
def test_sglangs_load_plugins_routes_the_moe_marker_through_the_hook(warmup, want):
    assert run_json(MOE_ROUTED, SGLANG_KIMI_EAGLE3_WARMUP=warmup) == want
