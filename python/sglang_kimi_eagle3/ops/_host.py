"""Host-side integer helpers for the launchers, without Triton's per-call wrapper.

Triton 3.8 wraps `triton.cdiv` and `triton.next_power_of_2` as ConstexprFunction objects so that kernels can call
them; from host code each call then unwraps its arguments and imports a module, ~10 µs on a 2-core CPU. A
tree-sampling verify made five such calls per launch, on the eager path of every decode step. These are the
same arithmetic as Triton's (test/ops/test_host_path.py compares them), for host code only: kernels keep
`triton.cdiv`.
"""

from __future__ import annotations


def cdiv(x: int, y: int) -> int:
    """ceil(x / y) for ints (triton.cdiv)."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of 2 >= n, for 1 <= n <= 2**64 (triton.next_power_of_2, the same bit steps)."""
    n -= 1
    n |= n >> 1
    n |= n >> 2
    n |= n >> 4
    n |= n >> 8
    n |= n >> 16
    n |= n >> 32
    n += 1
    return n
