"""`sglang-kimi-eagle3 bench`: measure running SGLang servers over HTTP (pure: never imports sglang).

prompts.py  the bundled prompt set (prompts/*.json) and chat templates;  prompt_file.py  --prompts FILE
client.py   one native /generate request, streamed or not -> RequestResult (errors captured, never raised)
stats.py    per-concurrency summaries: throughput, latency percentiles, tau, per-position acceptance
runner.py   the concurrency sweep (threads, progress bar)
report.py   table and JSON;  plots.py  PNGs (optional matplotlib);  cli.py  the command
"""
