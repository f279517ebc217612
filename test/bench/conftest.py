"""Bench tests talk to the stubs of test/bench/stub_server.py: local stand-ins for SGLang's HTTP API
(SGLang's /generate response shape, synthetic acceptance and timing or canned faults; not a model), and
import the scripts of benchmark/serving."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmark" / "serving"))  # e2e.py, anatomy.py, ...
sys.path.insert(0, str(Path(__file__).resolve().parent))  # stub_server.py: ProtocolStub, FaultServer, StreamServer
