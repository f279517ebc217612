"""Host-side integer helpers for the launchers, without Triton's per-call wrapper.

Triton 3.8 wraps `triton.cdiv` and `triton.next_power_of_2` as ConstexprFunction objects so that kernels can call
them; from host code each call then unwraps its arguments and imports a module, ~10 µs on a 2-core CPU. A
tree-sampling verify made five such calls per launch, on the eager path of every decode step. These are the
same functions (their raw `.fn`, where the wrapper exists), for host code only: kernels keep `triton.cdiv`.
"""

from __future__ import annotations

import triton

cdiv = getattr(triton.cdiv, "fn", triton.cdiv)
next_power_of_2 = getattr(triton.next_power_of_2, "fn", triton.next_power_of_2)
