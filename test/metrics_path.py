"""A scheduler-like child for the metrics test: worker_path.scheduler_like (SGLang's publish, calls through
SGLang's own functions, SGLang's own init_all_cuda_graphs -> our publish), then more calls after the exporter
started. Puts this process's hookstatus counters and the `metrics` row of its published status table on the queue."""


def metrics_child(server_args, out_q):
    import torch
    from worker_path import _draft_calls, scheduler_like

    class _Box:
        def put(self, x):
            self.x = x

    box = _Box()
    scheduler_like(server_args, box)
    if not box.x.get("ok"):
        out_q.put(box.x)
        return
    _draft_calls(torch)  # counted after the exporter started: these reach Prometheus through the listener
    from sglang_kimi_eagle3.integration.hooks import metrics
    from sglang_kimi_eagle3.status import hookstatus

    published = {h["name"]: h for h in box.x["snapshot"]["hooks"]}  # the status table the scheduler published
    out_q.put({"ok": True, "counts": [[list(k), n] for k, n in hookstatus.count_items()], "exporting": bool(metrics._M),
               "row": published.get(metrics.NAME)})
