"""The plugin's status, pure (no sglang import).

  status/hookstatus.py  the one status table of every hook, and the per-process call counters
  snapshot.py    the runtime status file (port<PORT>.json), as `status --running` reads it back
Its two SGLang-side users: integration/hooks/runtime_status.py (confirms the hooks after CUDA-graph
capture and writes the status file) and commands/status.py (the `status` command).
"""
