"""SGLang's own objects for one greedy target verify, as the worker hands them to eagle_sample: the tests call
SGLang's real eagle_sample (and our hook around it) with them, and bench_host times both per eager call."""

from __future__ import annotations


def greedy_verify_batch(torch, cand, ridx, nxt, sib, depth: int, vocab: int, device: str = "cpu", topk: int = 2):
    """(EagleVerifyInput, ScheduleBatch) for one greedy target verify of `cand` [bs, N] (a tree of `topk` and
    `depth` draft steps: accept_index rows of depth + 1; seq_len 17), tensors on the tensors' own device and the
    batch on `device`."""
    from sglang.srt.managers.schedule_batch import ScheduleBatch
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardMode
    from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo
    from sglang.srt.speculative.eagle_info import EagleVerifyInput

    bs, n = cand.shape
    dev = cand.device
    seq_lens = torch.full((bs,), 17, device=dev)
    vi = EagleVerifyInput(draft_token=cand.reshape(-1), custom_mask=None,
                          positions=torch.zeros(bs * n, dtype=torch.int64, device=dev), retrieve_index=ridx,
                          retrieve_next_token=nxt, retrieve_next_sibling=sib, retrieve_cum_len=None, spec_steps=depth,
                          topk=topk, draft_token_num=n, capture_hidden_mode=CaptureHiddenMode.FULL,
                          seq_lens_sum=17 * bs, seq_lens_cpu=torch.full((bs,), 17))
    ones = torch.ones(bs, 1, device=dev)
    info = SamplingBatchInfo(temperatures=ones, top_ps=ones.flatten(), top_ks=torch.ones(bs, dtype=torch.int32, device=dev),
                             min_ps=torch.zeros(bs, device=dev), is_all_greedy=True, is_any_greedy=True,
                             need_top_p_sampling=False, need_top_k_sampling=False, need_min_p_sampling=False,
                             vocab_size=vocab)
    batch = ScheduleBatch(reqs=[], device=device, seq_lens=seq_lens, forward_mode=ForwardMode.TARGET_VERIFY,
                          sampling_info=info)
    return vi, batch
