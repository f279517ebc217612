"""Per-GPU tuning (pure w.r.t. sglang): the shapes a deployment runs, the user table cache, GPU timing.

`commands/tune.py` (the `sglang-kimi-eagle3 tune` command) drives these; it is the only part
of tuning that imports SGLang (for its kernels, the baseline every measurement is compared with).
"""
