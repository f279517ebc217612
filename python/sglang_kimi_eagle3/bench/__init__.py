"""`sglang-kimi-eagle3 bench`: measure running SGLang servers over HTTP (pure: never imports sglang).

prompts.py  the bundled prompt set (prompts/*.json) and chat templates
client.py   one native /generate request -> RequestResult (errors captured, never raised)
stats.py    per-concurrency summaries: throughput, tau, per-position acceptance from histograms
runner.py   the concurrency sweep (threads, progress bar)
report.py   table and JSON;  plots.py  PNGs (optional matplotlib);  cli.py  the command
"""
