"""Test-wide setup.

Triton kernels run through the interpreter on machines without a GPU (TRITON_INTERPRET must be set
before triton is imported anywhere). On a CUDA machine the same tests run compiled.
"""

import os
import sys
from pathlib import Path

try:  # cheap probe without importing torch: nvidia-smi or /dev/nvidia0
    _HAS_GPU = Path("/dev/nvidia0").exists()
except OSError:
    _HAS_GPU = False
if not _HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_CONFIGS = ROOT / "python" / "sglang_kimi_eagle3" / "profiles"
sys.path.insert(0, str(ROOT / "test"))  # shared test helpers (test/helpers.py)
