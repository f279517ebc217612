"""Acceptance math: Leviathan's closed form, hand-computed cases, histograms -> per-position acceptance."""

import pytest

from sglang_kimi_eagle3.planner.acceptance import (alpha_from_tau, alphas_from_histogram, expected_tokens,
                                                    extend_alphas, iid_expected_tokens, reach_from_histogram)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.7, 0.95, 1.0])
@pytest.mark.parametrize("gamma", [1, 2, 3, 5, 8])
def test_iid_sum_equals_leviathan_closed_form(alpha, gamma):
    closed = gamma + 1 if alpha == 1.0 else (1 - alpha ** (gamma + 1)) / (1 - alpha)
    assert expected_tokens([alpha] * gamma) == pytest.approx(closed, rel=1e-12)
    assert iid_expected_tokens(alpha, gamma) == pytest.approx(closed, rel=1e-12)


def test_hand_computed_non_iid():
    # 1 + 0.8 + 0.8*0.5 + 0.8*0.5*0.25 = 1 + 0.8 + 0.4 + 0.1
    assert expected_tokens([0.8, 0.5, 0.25]) == pytest.approx(2.3)
    assert expected_tokens([]) == 1.0
    assert expected_tokens([0.0, 0.9]) == 1.0  # nothing after a certain rejection


def test_histogram_to_alphas_hand_computed():
    # 10 passes: 2 accepted 0 drafts, 3 accepted 1, 5 accepted 2
    assert alphas_from_histogram([2, 3, 5], 2) == pytest.approx([8 / 10, 5 / 8])
    assert reach_from_histogram([2, 3, 5], 2) == pytest.approx([0.8, 0.5])


def test_histogram_round_trip_exact_chain_distribution():
    # chain alpha = (0.9, 0.5, 0.2): P(k=0)=.1, P(1)=.9*.5, P(2)=.9*.5*.8, P(3)=.9*.5*.2  -> x100
    hist = [10, 45, 36, 9]
    assert alphas_from_histogram(hist, 3) == pytest.approx([0.9, 0.5, 0.2])
    # and tau from the alphas equals the histogram's mean accepted + 1
    mean = sum(k * v for k, v in enumerate(hist)) / sum(hist)
    assert expected_tokens([0.9, 0.5, 0.2]) == pytest.approx(mean + 1)


def test_histogram_shorter_than_steps_and_empty():
    # SGLang grows the list only to the largest k seen: [4] = four passes, none accepted
    assert alphas_from_histogram([4], 3) == [0.0, None, None]
    assert alphas_from_histogram([], 2) == [None, None]
    assert reach_from_histogram([], 2) == [None, None]


@pytest.mark.parametrize("alpha,gamma", [(0.2, 1), (0.6, 3), (0.753, 4), (0.97, 7)])
def test_alpha_from_tau_inverts_closed_form(alpha, gamma):
    assert alpha_from_tau(iid_expected_tokens(alpha, gamma), gamma) == pytest.approx(alpha, abs=1e-9)


def test_alpha_from_tau_rejects_impossible_tau():
    with pytest.raises(ValueError):
        alpha_from_tau(4.5, 3)  # at most gamma + 1 = 4
    with pytest.raises(ValueError):
        alpha_from_tau(0.9, 3)


def test_extend_alphas_marks_extrapolation():
    assert extend_alphas([0.8, 0.6], 2) == ([0.8, 0.6], False)
    assert extend_alphas([0.8, 0.6], 1) == ([0.8], False)
    assert extend_alphas([0.8, 0.6], 4) == ([0.8, 0.6, 0.6, 0.6], True)
    with pytest.raises(ValueError):
        extend_alphas([1.2], 2)
    with pytest.raises(ValueError):
        extend_alphas([], 2)
