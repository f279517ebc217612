"""The eager verify ops' host path: the one-pass tree guard rejects exactly what the rule-by-rule guard rejects,
memoised launch plans are keyed on their whole config, and the host integer helpers are Triton's own.

These paths run on every decode step of a live server (the verify ops are not in a CUDA graph), so they were
made cheaper: a boolean pass before the messages, plans computed once per shape, Triton's raw helpers. None of
that may change which calls our kernels take.
"""

import pytest
import torch
import triton

from kernel_device import device
from sglang_kimi_eagle3.ops import _host, _tree
from sglang_kimi_eagle3.ops._tree import MAX_DRAFT_TOKENS, cached_plan, check_tree_inputs
from sglang_kimi_eagle3.ops.arch import Unsupported
from sglang_kimi_eagle3.ops.tree_sampling import sampling_plan

DEV = device()
BS, N, S = 3, 4, 4


def _valid():
    i64 = torch.zeros((BS, N), dtype=torch.int64, device=DEV)
    return {"predicts": torch.zeros(BS * N, dtype=torch.int32, device=DEV),
            "accept_index": torch.zeros((BS, S), dtype=torch.int32, device=DEV),
            "accept_token_num": torch.zeros(BS, dtype=torch.int32, device=DEV),
            "candidates": i64, "retrive_index": i64.clone(), "retrive_next_token": i64.clone(),
            "retrive_next_sibling": i64.clone()}


def _noncontig(t):
    """The same shape and dtype, not contiguous."""
    wide = torch.zeros((*t.shape[:-1], t.shape[-1] * 2) if t.ndim > 1 else (t.shape[0] * 2,), dtype=t.dtype,
                       device=t.device)
    return wide[..., ::2]


NAMES = list(_valid())
# every way one argument can leave the contract: dtype, shape, contiguity
MUTATIONS = {
    "int32": lambda t: t.to(torch.int32) if t.dtype == torch.int64 else t.to(torch.int64),
    "float": lambda t: t.float(),
    "one-more-row": lambda t: torch.zeros((t.shape[0] + 1, *t.shape[1:]), dtype=t.dtype, device=t.device),
    "flat": lambda t: t.reshape(-1),
    "noncontiguous": _noncontig,
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
@pytest.mark.parametrize("name", NAMES)
def test_one_pass_guard_agrees_with_the_rule_by_rule_guard(name, mutation):
    args = _valid()
    args[name] = MUTATIONS[mutation](args[name])

    def verdict(fn):
        try:
            return fn(*args.values())
        except Unsupported as exc:
            return f"Unsupported: {exc}"

    slow = verdict(_tree._reject_tree_inputs)
    assert verdict(check_tree_inputs) == slow  # same acceptance and, on a rejection, the same message


def test_valid_inputs_and_limits():
    args = _valid()
    assert check_tree_inputs(*args.values()) == (BS, N, S)
    i64 = torch.zeros((1, MAX_DRAFT_TOKENS + 1), dtype=torch.int64, device=DEV)
    big = [torch.zeros(MAX_DRAFT_TOKENS + 1, dtype=torch.int32, device=DEV),
           torch.zeros((1, S), dtype=torch.int32, device=DEV), torch.zeros(1, dtype=torch.int32, device=DEV),
           i64, i64.clone(), i64.clone(), i64.clone()]
    with pytest.raises(Unsupported, match="at most"):
        check_tree_inputs(*big)


def test_cached_plan_is_keyed_on_the_whole_config():
    a = cached_plan(sampling_plan, 8, 4, 163840, {"num_warps": 8})
    assert a == sampling_plan(8, 4, 163840, {"num_warps": 8})
    assert cached_plan(sampling_plan, 8, 4, 163840, {"num_warps": 8}) is a  # computed once
    b = cached_plan(sampling_plan, 8, 4, 163840, {"num_warps": 4})
    assert b["sum_warps"] == 4 and a["sum_warps"] == 8
    c = cached_plan(sampling_plan, 8, 16, 163840, {"num_warps": 8})
    assert c == sampling_plan(8, 16, 163840, {"num_warps": 8}) and c != a
    # an unhashable config is planned every time, never keyed by identity
    assert cached_plan(sampling_plan, 8, 4, 163840, {"num_warps": 8, "x": [1]}) == a | {}


@pytest.mark.parametrize("n", [1, 2, 3, 15, 16, 17, 1000, 163840, 2**31 + 5])
def test_host_helpers_are_tritons(n):
    assert _host.next_power_of_2(n) == triton.next_power_of_2(n)
    for d in (1, 3, 16, 4096):
        assert _host.cdiv(n, d) == triton.cdiv(n, d)
