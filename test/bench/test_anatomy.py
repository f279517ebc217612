"""benchmark/serving/anatomy.py's trace parser on small synthetic traces in torch.profiler's chrome-trace format
(what SGLang's /start_profile exports: gzipped JSON, traceEvents with cpu_op / cuda_runtime / kernel / gpu_memcpy
events, flow and metadata events). Two decode steps of an `upstream` and an `auto` server, numbers chosen by hand."""

import gzip
import json

import pytest

import anatomy as A

UPSTREAM_STEP = [("nvjet_tst_128x64_64x3_1x2_h_bz_TNT", 20), ("void at::native::direct_copy_kernel_cuda", 2),
                 ("_draft_topk1_partial_argmax_kernel", 5), ("_draft_topk1_finalize_kernel", 3),
                 ("nvjet_tst_128x64_64x3_1x2_h_bz_TNT", 20), ("void at::native::direct_copy_kernel_cuda", 2),
                 ("_draft_topk1_partial_argmax_kernel", 5), ("_draft_topk1_finalize_kernel", 3),
                 ("fused_moe_kernel", 50), ("void at::native::vectorized_elementwise_kernel<4, FillFunctor<int>>", 1),
                 ("void at::native::reduce_kernel<512, 1, ReduceOp<float, ArgMaxOps<float>, unsigned int, long, 4>>", 12),
                 ("void sglang::VerifyTreeGreedy<int, long>(int*, int*, int*, long*, long*)", 6)]
AUTO_STEP = [("_lm_head_gemv_kernel", 18), ("_row_topk_kernel", 4), ("_lm_head_gemv_kernel", 18), ("_row_topk_kernel", 4),
             ("fused_moe_kernel", 50), ("void at::native::vectorized_elementwise_kernel<4, FillFunctor<int>>", 1),
             ("_split_argmax_kernel", 7), ("verify_greedy_kernel", 2)]


def trace(step, steps=2, t0=1_000_000.0):
    """A chrome trace as torch.profiler writes it: every kernel, then 1 µs idle; a DtoH copy ends each step."""
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python3"}},
          {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}}]
    t, corr = t0, 1
    for _ in range(steps):
        for name, dur in step + [("Memcpy DtoH (Device -> Pinned)", 1)]:
            cat = "gpu_memcpy" if name.startswith("Memcpy") else "kernel"
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242,
                       "ts": t - 5, "dur": 3, "args": {"External id": corr, "cbid": 211, "correlation": corr}})
            ev.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": t, "dur": dur,
                       "args": {"External id": corr, "queued": 0, "device": 0, "context": 1, "stream": 7,
                                "correlation": corr, "registers per thread": 32, "shared memory": 0,
                                "grid": [132, 1, 1], "block": [128, 1, 1]}})
            ev.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": t, "cat": "ac2g", "name": "ac2g", "bp": "e"})
            t, corr = t + dur + 1, corr + 1
    # another stream's kernel inside the first one: GPU busy and wall are unions, not sums
    ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "pid": 0, "tid": 20,
               "ts": t0 + 1, "dur": 5, "args": {"stream": 20, "device": 0}})
    ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 4242, "tid": 4242, "ts": t0, "dur": 400})
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "computeMajor": 9}],
            "traceEvents": ev, "traceName": "x", "displayTimeUnit": "ms", "baseTimeNanoseconds": 1796117000000000000}


def _write(tmp_path, name, doc, gz=True):
    p = tmp_path / name
    data = json.dumps(doc).encode()
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def test_upstream_step_attributes_sglangs_generic_kernels_by_position(tmp_path):
    p = _write(tmp_path, "upstream-c1-T0-1796117000.1-TP-0.trace.json.gz", trace(UPSTREAM_STEP))
    an = A.anatomy(A.load_events(p))
    assert an["steps"] == 2  # one VerifyTreeGreedy per step
    # 12 kernels + a copy = 130 µs of GPU work and 13 gaps of 1 µs per step; the last gap is not in the window
    assert an["step_gpu_busy_us"] == pytest.approx(130) and an["step_wall_us"] == pytest.approx((2 * 143 - 1) / 2)
    f = an["families"]
    assert f["draft lm_head"]["sglang"]["us_per_step"] == pytest.approx(40)  # the GEMM before each top-1, past the cast
    assert f["draft lm_head"]["sglang"]["calls_per_step"] == pytest.approx(2)
    assert f["draft top-k"]["sglang"]["us_per_step"] == pytest.approx(16)
    assert f["greedy verify"]["sglang"]["us_per_step"] == pytest.approx(18)  # argmax + walk; the fill is not counted
    assert f["greedy verify"]["sglang"]["share"] == pytest.approx(18 / 142.5)
    assert "ours" not in f["greedy verify"] and "sampling verify" not in f


def test_auto_step_and_the_table_against_upstream(tmp_path):
    up = _write(tmp_path, "upstream-c1-T0-1-TP-0.trace.json.gz", trace(UPSTREAM_STEP))
    auto = _write(tmp_path, "auto-c1-T0-1-TP-0.trace.json", {"traceEvents": trace(AUTO_STEP)["traceEvents"]}, gz=False)
    bare = _write(tmp_path, "bare.json", trace(AUTO_STEP)["traceEvents"], gz=False)  # a bare event list loads too
    a = A.anatomy(A.load_events(auto))
    assert A.anatomy(A.load_events(bare)) == a
    assert a["steps"] == 2 and a["families"]["draft lm_head"] == {
        "ours": {"us_per_step": 36.0, "calls_per_step": 2.0, "kernels": {"_lm_head_gemv_kernel": 36.0},
                 "share": pytest.approx(36 / a["step_wall_us"])}}
    assert a["families"]["greedy verify"]["ours"]["us_per_step"] == pytest.approx(9)
    out = tmp_path / "anatomy.json"
    assert A.main(["parse", str(up), str(auto), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [(s["server"], s["concurrency"], s["temperature"]) for s in doc["summaries"]] == [("upstream", 1, 0.0), ("auto", 1, 0.0)]
    row = next(line for line in doc["table"].splitlines() if line.startswith("| greedy verify"))
    assert row.startswith("| greedy verify | 1 | 0 | 9.0 | 18.0 | 0.50 |"), row
    lm = next(line for line in doc["table"].splitlines() if line.startswith("| draft lm_head"))
    assert "| 36.0 | 40.0 | 0.90 |" in lm
    # a server of ours named otherwise (device_e2e.sh OURS=1: `ours`) is the table's column of ours all the same
    ours = _write(tmp_path, "ours-c1-T0-1-TP-0.trace.json.gz", trace(AUTO_STEP))
    assert A.main(["parse", str(up), str(ours), "--json", str(out)]) == 0
    row = next(line for line in json.loads(out.read_text())["table"].splitlines() if line.startswith("| greedy verify"))
    assert row.startswith("| greedy verify | 1 | 0 | 9.0 | 18.0 | 0.50 |"), row


def test_sglangs_gemm_before_our_top_k_is_counted_as_sglangs_in_the_auto_server():
    """auto at a shape the table gives our top-k but not our GEMV: SGLang's GEMM, then our top-1."""
    step = [("nvjet_gemm", 20), ("_row_topk_kernel", 4), ("_split_argmax_kernel", 7), ("verify_greedy_kernel", 2)]
    f = A.anatomy(trace(step)["traceEvents"])["families"]
    assert f["draft lm_head"] == {"sglang": {"us_per_step": 20.0, "calls_per_step": 1.0, "kernels": {"nvjet_gemm": 20.0},
                                            "share": pytest.approx(f["draft lm_head"]["sglang"]["share"])}}
    assert f["draft top-k"]["ours"]["us_per_step"] == 4.0


def test_a_file_without_trace_events_is_refused(tmp_path):
    p = _write(tmp_path, "x.json", {"schemaVersion": 1}, gz=False)
    with pytest.raises(ValueError, match="no traceEvents"):
        A.load_events(p)


def test_only_an_argmax_right_before_sglangs_verify_is_its_greedy_verify():
    """VerifyTreeGreedy after something else (target_predict from a sampler, not torch.argmax): not counted."""
    step = [("fused_moe_kernel", 50), ("void sglang::VerifyTreeGreedy<int, long>", 6)]
    f = A.anatomy(trace(step)["traceEvents"])["families"]
    assert f["greedy verify"]["sglang"]["us_per_step"] == 6.0 and "fused_moe_kernel" not in f["greedy verify"]["sglang"]["kernels"]


def test_capture_profiles_a_running_server_and_summarizes_its_trace(tmp_path):
    """The capture loop against the protocol stub's /start_profile (a SYNTHETIC one-kernel trace): request sent
    with SGLang's fields, the new file found in the folder, parsed, and the traffic drained."""
    from stub_server import ProtocolStub, StubConfig

    with ProtocolStub(StubConfig(pass_ms=0.1)) as url:
        rc = A.main(["capture", "--server", f"auto={url}", "--concurrency", "2", "--temperatures", "0,0.7", "--steps", "3",
                     "--max-new-tokens", "8", "--settle-s", "0.05", "--out", str(tmp_path)])
    assert rc == 0
    doc = json.loads((tmp_path / "anatomy.json").read_text())
    assert [(s["server"], s["concurrency"], s["temperature"]) for s in doc["summaries"]] == [("auto", 2, 0.0), ("auto", 2, 0.7)]
    assert all(s["anatomy"]["steps"] == 3 and s["trace"].startswith(f"auto-c2-T{s['temperature']:g}-") for s in doc["summaries"])


def test_one_wave_fits_the_kv_budget():
    assert A.wave_tokens(64, 56000, 4096) == 56000 // 64 - len(A.PROMPT) - 8
    assert A.wave_tokens(1, 56000, 4096) == 4096
    assert A.wave_tokens(4096, 56000, 4096) == 16


def _rt(name, ts, dur, corr, tid=4242):
    cat = "cuda_driver" if name.startswith("cu") and not name.startswith("cuda") else "cuda_runtime"
    return {"ph": "X", "cat": cat, "name": name, "pid": 4242, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": corr}}


def _kernel(name, ts, dur, corr):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "stream": 7}}


def _host_trace(steps, verify="verify_greedy_kernel", launch="cudaLaunchKernel"):
    """Per step: the target-verify graph launch at g1 (8 µs), eager launches at the given times (the last one the
    verify kernel), the draft-extend graph launch at g2; plus a graph launch on another thread, which must not count."""
    ev, corr = [], 100
    for g1, eager, g2 in steps:
        ev.append(_rt("cudaGraphLaunch", g1, 8, corr))
        ev.append(_kernel("fused_moe_kernel", g1 + 40, 30, corr))
        corr += 1
        for j, ts in enumerate(eager):
            ev.append(_rt(launch, ts, 3, corr))
            ev.append(_kernel(verify if j == len(eager) - 1 else "void at::native::vectorized_elementwise_kernel", ts + 60, 2, corr))
            corr += 1
        ev.append(_rt("cudaGraphLaunch", g2, 8, corr))
        ev.append(_kernel("draft_extend_kernel", g2 + 40, 10, corr))
        corr += 1
        ev.append(_rt("cudaGraphLaunch", g1 + 20, 5, corr, tid=9999))  # another thread's graph: not this path
        corr += 1
    return ev


def test_the_host_path_runs_from_the_verify_graph_launch_to_the_draft_extend_launch():
    h = A.host_verify_path(_host_trace([(1000, [1010, 1030], 1100), (2000, [2005, 2050], 2300)]))
    assert h == {"steps": 2, "median_us": (92 + 292) / 2, "min_us": 92, "max_us": 292}
    # no graph launch after the verify kernel (a draft extend run eagerly): nothing measured, nothing made up
    assert A.host_verify_path(_host_trace([(1000, [1010], 900)]))["steps"] == 0
    assert A.host_verify_path(trace(UPSTREAM_STEP)["traceEvents"]) == {"steps": 0, "median_us": None, "min_us": None,
                                                                      "max_us": None}


def test_one_launch_verify_kernels_end_a_step_and_the_table_has_a_host_row():
    up = A.anatomy(_host_trace([(1000, [1010, 1060], 1100), (2000, [2010, 2060], 2100)],
                               "void sglang::VerifyTreeGreedy<int, long>"))
    ours = A.anatomy(_host_trace([(1000, [1030], 1070), (2000, [2030], 2070)], "_argmax_verify_kernel"))
    assert up["steps"] == 2 and ours["steps"] == 2
    assert up["host_verify_path"]["median_us"] == 92 and ours["host_verify_path"]["median_us"] == 62
    rows = A.table([{"server": "upstream", "concurrency": 1, "temperature": 0.0, "anatomy": up},
                    {"server": "auto", "concurrency": 1, "temperature": 0.0, "anatomy": ours}]).splitlines()
    host = next(r for r in rows if r.startswith("| host: eager verify path"))
    assert host.startswith("| host: eager verify path (CPU) | 1 | 0 | 62.0 | 92.0 | 0.67 |"), host


def test_top_kernels_say_where_a_step_goes_and_plain_decoding_counts_the_profiled_steps():
    # the upstream step: the MoE kernel (50 µs), then the two draft GEMMs (20 + 20 µs under one name), per step
    a = A.anatomy(trace(UPSTREAM_STEP, steps=2)["traceEvents"])
    top = a["top_kernels"]
    assert list(top)[:2] == ["fused_moe_kernel", "nvjet_tst_128x64_64x3_1x2_h_bz_TNT"]
    assert top["nvjet_tst_128x64_64x3_1x2_h_bz_TNT"] == pytest.approx(40.0)
    assert top["fused_moe_kernel"] == pytest.approx(50.0) and len(top) <= A.TOP_K
    assert list(top.values()) == sorted(top.values(), reverse=True)
    # plain decoding has no verify kernel: the steps profiled (capture's --steps) are its steps
    plain = [("fused_moe_kernel", 50), ("void at::native::reduce_kernel<ArgMaxOps>", 3)]
    p = A.anatomy(trace(plain, steps=4)["traceEvents"], steps=4)
    assert p["steps"] == 4 and p["top_kernels"]["fused_moe_kernel"] == pytest.approx(50.0)


def test_a_triton_verify_kernel_launched_through_the_driver_api_is_found():
    # Triton launches with cuLaunchKernelEx: the profiler files that call as `cuda_driver`, not `cuda_runtime`
    h = A.host_verify_path(_host_trace([(1000, [1010, 1030], 1100)], verify="_argmax_verify_kernel",
                                       launch="cuLaunchKernelEx"))
    assert h["steps"] == 1 and h["median_us"] == 92


def test_host_api_sums_the_runtime_calls_per_step_and_names_the_longest(tmp_path):
    """A copy the driver turned into a wait on the step in flight (a pageable H2D cudaMemcpyAsync of 4 ms) stands out
    by name and by its longest call; the eager launches are counted per step."""
    doc = trace(AUTO_STEP)  # 9 cudaLaunchKernel of 3 µs per step (8 kernels and the DtoH copy), 2 steps
    doc["traceEvents"].append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 4242, "tid": 4242,
                               "ts": 1_000_010.0, "dur": 4000.0, "args": {"correlation": 999}})
    doc["traceEvents"].append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 4242, "tid": 4242,
                               "ts": 1_000_200.0, "dur": 40.0, "args": {"correlation": 997}})  # a copy that did not wait
    doc["traceEvents"].append({"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 4242, "tid": 4242,
                               "ts": 1_000_020.0, "dur": 10.0, "args": {"correlation": 998}})
    an = A.anatomy(A.load_events(_write(tmp_path, "off-c8-T0-1-TP-0.trace.json.gz", doc)))
    api = an["host_api"]
    assert list(api)[:2] == ["cudaMemcpyAsync", "cudaLaunchKernel"]  # dearest first
    assert api["cudaMemcpyAsync"] == {"us_per_step": 2020.0, "calls_per_step": 1.0, "max_us": 4000.0}
    assert api["cudaLaunchKernel"]["calls_per_step"] == pytest.approx(9) and api["cudaLaunchKernel"]["max_us"] == 3
    assert api["cuLaunchKernelEx"]["us_per_step"] == pytest.approx(5)
    assert "aten::mm" not in api  # a cpu_op, not a CUDA call
