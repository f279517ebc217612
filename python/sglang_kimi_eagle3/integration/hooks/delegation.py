"""Hook: KimiK25ForConditionalGeneration exposes the EAGLE-3 target interface.

Upstream target: sglang.srt.model_loader.utils.get_model_architecture (sglang 0.5.23
  model_loader/utils.py:198), AFTER: it returns the model class SGLang is about to build, in the
  scheduler process, before construction. The class itself lives in sglang.srt.models.kimi_k25,
  whose import costs seconds; hooking the resolver keeps register() cheap in processes that never
  build a model (detokenizer, DP controller).
Why: the EAGLE-3 worker calls `set_eagle3_layers_to_capture` on the target's ModelRunner
  (attention_backend_setup.py:40-61) and `get_embed_and_head` / `set_embed_and_head`
  (eagle_worker_v2.py:336-379). SGLang releases that know Kimi-K2.5 but predate PR #19689 lack
  them on the multimodal wrapper, so the launch failed on AttributeError after loading ~550 GB.
How: when the resolved class is (a subclass of) KimiK25ForConditionalGeneration, add each of the three
  methods it lacks, delegating to `self.language_model` (the inner DeepSeek-V3 model). Methods the
  class already has (sglang 0.5.23 has all three) are left alone. A model built encoder-only has no
  language model: our delegates raise an AttributeError that says so.
Remove when: the oldest supported SGLang has PR #19689 (0.5.23 does; kept for older pins).
"""

from __future__ import annotations

from ...status import hookstatus
from .. import registry
from ..launch_record import our_launch
from . import runtime_status

NAME = "delegation"
PROBE = "delegation_probe"
TARGET = "sglang.srt.model_loader.utils.get_model_architecture"
KIMI_CLASS = "KimiK25ForConditionalGeneration"
METHODS = ("set_eagle3_layers_to_capture", "get_embed_and_head", "set_embed_and_head")


SITES = ["sglang.srt.model_loader.utils:get_model_architecture",
         "sglang.srt.model_executor.model_runner_components.startup_weight_load:get_model_architecture"]


def install() -> None:
    runtime_status.watch(PROBE, SITES)
    registry.register(PROBE, TARGET, _after_get_model_architecture, "after")
    hookstatus.record(NAME, f"sglang.srt.models.kimi_k25.{KIMI_CLASS}", "registered",
                      "checked when SGLang resolves a Kimi-K2.5 model class (or by `check`/`status`)")


def _inner(self, method: str):
    lm = getattr(self, "language_model", None)
    if lm is None:
        raise AttributeError(
            f"{type(self).__name__}.{method}: this model was built encoder-only (language_model is None), so it "
            f"cannot be an EAGLE-3 target; serve the target without --encoder-only")
    if not hasattr(lm, method):
        raise AttributeError(f"{type(self).__name__}.{method}: the inner {type(lm).__name__} has no {method}()")
    return lm


def _set_eagle3_layers_to_capture(self, layer_ids=None):
    """[sglang-kimi-eagle3] Delegate EAGLE-3 aux-hidden-state capture to the inner language model."""
    return _inner(self, "set_eagle3_layers_to_capture").set_eagle3_layers_to_capture(layer_ids)


def _get_embed_and_head(self):
    """[sglang-kimi-eagle3] The inner language model's (embedding weight, lm_head weight)."""
    return _inner(self, "get_embed_and_head").get_embed_and_head()


def _set_embed_and_head(self, embed, head):
    """[sglang-kimi-eagle3] Replace the inner language model's embedding and lm_head weights."""
    return _inner(self, "set_embed_and_head").set_embed_and_head(embed, head)


DELEGATES = {"set_eagle3_layers_to_capture": _set_eagle3_layers_to_capture,
             "get_embed_and_head": _get_embed_and_head, "set_embed_and_head": _set_embed_and_head}


def is_kimi_k25(cls) -> bool:
    return isinstance(cls, type) and any(c.__name__ == KIMI_CLASS for c in cls.__mro__)


def ensure_delegation(cls) -> str:
    """Add the missing delegates to `cls` (idempotent); record and return the status."""
    target = f"{cls.__module__}.{cls.__qualname__}"
    missing = [m for m in METHODS if not callable(getattr(cls, m, None))]
    for m in missing:
        setattr(cls, m, DELEGATES[m])
    ours = [m for m in METHODS if getattr(cls, m) is DELEGATES[m]]
    if ours:
        row = hookstatus.record(NAME, target, "applied", f"added delegates to language_model: {', '.join(ours)}")
    else:
        row = hookstatus.record(NAME, target, "skipped", f"upstream already defines {', '.join(METHODS)} (SGLang PR #19689); left alone")
    return row.state


def ensure_for_installed_sglang() -> str:
    """Check the installed SGLang's Kimi-K2.5 class now (imports it: seconds). For `check` and `status`."""
    try:
        from sglang.srt.models.kimi_k25 import KimiK25ForConditionalGeneration
    except Exception as exc:
        hookstatus.record(NAME, f"sglang.srt.models.kimi_k25.{KIMI_CLASS}", "failed",
                          f"cannot import the Kimi-K2.5 model class: {type(exc).__name__}: {exc}")
        return "failed"
    return ensure_delegation(KimiK25ForConditionalGeneration)


def ensure_for_architectures(arch_list: list[str]) -> str | None:
    """For `check`: what the hook does when a scheduler resolves the class SGLang builds for these
    architectures (None: not a Kimi-K2.5 class, or SGLang cannot resolve one)."""
    try:
        from sglang.srt.models.registry import ModelRegistry

        cls, _ = ModelRegistry.resolve_model_cls(arch_list)
    except Exception:
        return None
    return ensure_delegation(cls) if is_kimi_k25(cls) else None


def _after_get_model_architecture(result, *args, **kwargs):
    try:
        cls = result[0]
    except Exception:
        return result
    if is_kimi_k25(cls) and our_launch() is not False:
        try:
            ensure_delegation(cls)
        except Exception as exc:  # record, never break model loading from here
            hookstatus.record(NAME, KIMI_CLASS, "failed", f"{type(exc).__name__}: {exc}")
    return result
