"""Code run in a fresh interpreter: a launch parsed, resolved and published by SGLang's own code, then the
target and draft ModelConfig built exactly as TpModelWorker / EagleDraftWorker build them
(tp_worker.py _init_model_config; eagle_worker_v2.py: draft context_length = target's context_len).

Usage from a test: run_json(WORKER_PATH + "print(json.dumps(matrix(CASES)))", **env)
"""

WORKER_PATH = r'''
import json, os, warnings
warnings.filterwarnings("ignore")
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang.srt.server_args import prepare_server_args
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.runtime_context import override_platform, publish, get_model, get_spec

SM90 = dict(is_cuda=True, is_hip=False, is_sm90=True, is_sm100=False, is_sm120=False, is_blackwell=False,
            is_hopper_with_cuda_12_3=True, has_flashinfer=True, device_sm=90, device_capability=(9, 0))

def launch(argv, env):
    """One launch: returns what the target and draft ModelConfigs came out as, or the error."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update({k: v for k, v in env.items() if v is not None})
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
    try:
        sa = prepare_server_args(argv + ["--device", "cuda"])
        with override_platform(**SM90):
            sa.resolve_once()
        publish(sa, role="scheduler")
        stage = "target"
        target = ModelConfig.from_server_args(sa, model_path=get_model().model_path, model_revision=get_model().revision,
                                              is_draft_model=False, context_length=None)
        stage = "draft"
        draft = ModelConfig.from_server_args(sa, model_path=get_spec().speculative_draft_model_path,
                                             model_revision=get_spec().speculative_draft_model_revision,
                                             is_draft_model=True, context_length=target.context_len)
        h = draft.hf_text_config
        rope = getattr(h, "rope_parameters", None) or getattr(h, "rope_scaling", None)
        return {"ok": True, "target_ctx": target.context_len, "draft_ctx": draft.context_len,
                "draft_mpe": h.max_position_embeddings, "draft_rope": dict(rope) if rope else None,
                "env_overwrite_after": os.environ.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN")}
    except Exception as exc:
        return {"ok": False, "stage": stage if "stage" in dir() else "resolve", "type": type(exc).__name__,
                "error": str(exc)[:2000], "env_overwrite_after": os.environ.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN")}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

def matrix(cases):
    return {name: launch(argv, env) for name, (argv, env) in cases.items()}
'''
