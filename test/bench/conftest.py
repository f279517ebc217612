"""Bench tests talk to benchmark/serving/protocol_stub.py: a local stand-in for SGLang's HTTP API
(SGLang's /generate response shape, synthetic acceptance and timing; not a model)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmark" / "serving"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # stub_server.py
