"""`check` and `status` bind the draft worker's lazy top-k outside a server (draft_head_kernels.
bind_worker_topk_outside_a_server): with the real SGLang the row becomes `applied`; when the worker module cannot
be imported the row says `failed` with the import error, and the command itself goes on."""

import importlib
import sys

import pytest

from sglang_kimi_eagle3.integration.hooks import draft_head_kernels as dh
from sglang_kimi_eagle3.status import hookstatus


@pytest.fixture(autouse=True)
def clean():
    hookstatus.clear()
    yield
    hookstatus.clear()


def test_binds_the_real_worker_module(monkeypatch):
    worker = importlib.import_module(dh.WORKER_MODULE)
    monkeypatch.setattr(worker, "fast_topk", worker.fast_topk)  # restored after the test
    hookstatus.record(*dh.WORKER_TOPK, "registered", "queued")
    dh.bind_worker_topk_outside_a_server()
    assert hookstatus.get("draft_worker_topk").state == "applied"
    assert worker.fast_topk is dh._fast_topk


def test_an_unimportable_worker_is_recorded_as_failed_not_raised(monkeypatch):
    monkeypatch.setitem(sys.modules, dh.WORKER_MODULE, None)  # `import` of it now raises ImportError
    hookstatus.record(*dh.WORKER_TOPK, "registered", "queued")
    dh.bind_worker_topk_outside_a_server()
    row = hookstatus.get("draft_worker_topk")
    assert row.state == "failed" and row.detail.startswith(f"import {dh.WORKER_MODULE}: ModuleNotFoundError"), row


def test_leaves_a_row_that_is_not_registered_alone():
    hookstatus.record(*dh.WORKER_TOPK, "skipped", "SGLANG_KIMI_EAGLE3_KERNELS=upstream")
    dh.bind_worker_topk_outside_a_server()
    assert hookstatus.get("draft_worker_topk").state == "skipped"
