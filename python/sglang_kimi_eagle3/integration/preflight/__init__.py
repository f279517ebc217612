"""Preflight's SGLang side: a launch as SGLang parsed and resolved it, made into plain data for the pure checks.

  inputs.py        the launch -> a preflight `Deployment` (configs, flags, the context policy's margin)
  sglang_facts.py  SGLang's own verdicts on the launch (backends, tree capacity, the draft's fc width)
  gpu_memory.py    the target GPU's memory, and SGLang's resolution made to see it (`check --for-gpu`)
  launch.py        preflight at launch: run every check, report, refuse on errors when asked
The checks themselves are pure and live in the top-level `preflight/` package.
"""
