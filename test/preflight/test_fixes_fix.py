"""Every fix `check` suggests is itself checked: apply it to the launch, check again, the finding is gone.

Launches that between them produce each finding whose fix is a flag; for each such finding, each alternative
of its fix that is flags ("A, or B", "--policy extend|yarn|cap", "drop --flag") is applied to the argv and the
launch is checked again through the CLI (SGLang's parser and resolution). The finding must be gone, and no
error the launch did not have may appear. Two interpreters in all (test/check_many.py), not one per check.
"""

import json
import re
import subprocess
import sys

import pytest

from helpers import ROOT, clean_env

pytestmark = pytest.mark.slow

H200 = ["--for-gpu", "H200"]
EXPLICIT = ["--model-path", "kimi-k2.5", "--tp-size", "8", "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", "aq-medai/kimi-k2-eagle3", "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--for-gpu", "H200"]

# (id, launch (check's arguments; no --model-path: the embedded default with these flags), check, finding regex)
CASES = [
    ("kv_below_context", [], "memory", r"KV pool .* x the served context"),
    ("bad_device", ["--device", "nope"], "launch_flags", r"--device nope"),
    ("page_size_0", ["--page-size", "0"], "launch_flags", r"--page-size 0"),
    ("no_running_requests", ["--max-running-requests", "0"], "launch_flags", r"--max-running-requests 0"),
    ("custom_all_reduce", [], "platform_sm120", r"custom all-reduce allowed"),
    ("page_size_tree", ["--for-gpu", "sm100", "--speculative-eagle-topk", "4"], "spec_params",
     r"topk > 1 with page size"),
    ("draft_inherits_mla_only", ["--for-gpu", "sm100", "--speculative-eagle-topk", "4"], "attention_backend",
     r"trtllm_mla \(MLA-only\)"),
    ("tree_capacity", [*H200, "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "32"], "spec_params",
     r"32 draft tokens from topk 2"),
    ("rejection_tree", [*H200, "--speculative-eagle-topk", "2", "--speculative-use-rejection-sampling"], "spec_params",
     r"rejection-sampling with topk"),
    ("weights_do_not_fit", ["--tp-size", "4"], "memory", r"> static pool"),
    ("allowance", ["--mem-fraction-static", "0.95", "--attention-backend", "flashinfer",
                   "--speculative-num-draft-tokens", "6", "--speculative-draft-model-quantization", "fp8"], "memory",
     r"leaves .* for activations"),
    ("sm120_flashinfer", ["--mem-fraction-static", "0.95", "--attention-backend", "flashinfer",
                          "--speculative-num-draft-tokens", "6", "--speculative-draft-model-quantization", "fp8"],
     "platform_sm120", r"flashinfer attention with CUDA-graph"),
    ("chain_draft_tokens", ["--mem-fraction-static", "0.95", "--attention-backend", "flashinfer",
                            "--speculative-num-draft-tokens", "6", "--speculative-draft-model-quantization", "fp8"],
     "spec_params", r"topk 1 with 6 draft tokens"),
    ("draft_quantization", ["--mem-fraction-static", "0.95", "--attention-backend", "flashinfer",
                            "--speculative-num-draft-tokens", "6", "--speculative-draft-model-quantization", "fp8"],
     "quantization", r"on an unquantized drafter"),
    ("strict_policy", ["--speculative-draft-context-policy", "strict"], "context", r"refusing"),
    ("eagle_with_eagle3_drafter", ["--speculative-algorithm", "EAGLE"], "algorithm", r"--speculative-algorithm EAGLE$"),
    ("draft_backend_mla_only", [*H200, "--speculative-draft-attention-backend", "flashmla"], "attention_backend",
     r"flashmla \(MLA-only\)"),
    ("trust_remote_code", EXPLICIT, "trust_remote_code", r"--trust-remote-code is not set"),
    ("context_above_target", ["--context-length", "300000"], "context", r"> the target's 262144"),
]

_FLAGS = re.compile(r"^--[a-z0-9-]+(?: [^\s-][^\s]*)?(?: --[a-z0-9-]+(?: [^\s-][^\s]*)?)*$")


def alternatives(fix: str) -> list[list[str]]:
    """The flag-only alternatives of a fix: "A, or B" / "A or B", each without its "(...)" remark;
    "--flag a|b|c" is three; "drop --flag" is ["drop", "--flag"]."""
    out = []
    for alt in re.split(r",? or ", re.sub(r"\s*\([^)]*\)", "", fix)):
        alt = alt.strip().rstrip(",")
        m = re.fullmatch(r"drop (--[a-z0-9-]+)", alt)
        if m:
            out.append(["drop", m.group(1)])
            continue
        m = re.fullmatch(r"(--[a-z0-9-]+) ([\w.]+(?:\|[\w.]+)+)", alt)
        if m:
            out += [[m.group(1), v] for v in m.group(2).split("|")]
        elif _FLAGS.match(alt):
            out.append(alt.split())
    return out


def apply(argv: list[str], fix: list[str]) -> list[str]:
    """argv with each flag of `fix` set (its value replaced, or added); ["drop", flag] removes the flag."""
    def pairs(xs):
        out, i = [], 0
        while i < len(xs):
            if i + 1 < len(xs) and not xs[i + 1].startswith("--"):
                out.append([xs[i], xs[i + 1]])
                i += 2
            else:
                out.append([xs[i]])
                i += 1
        return out

    have = pairs(argv)
    if fix[0] == "drop":
        return [x for p in have if p[0] != fix[1] for x in p]
    for p in pairs(fix):
        same = [q for q in have if q[0] == p[0]]
        if same:
            same[0][:] = p
        else:
            have.append(p)
    return [x for p in have for x in p]


def check_many(launches: list[list[str]]) -> list[dict]:
    cp = subprocess.run([sys.executable, str(ROOT / "test" / "check_many.py")], input=json.dumps(launches),
                        capture_output=True, text=True, timeout=1500, env=clean_env(COLUMNS="200"), cwd=str(ROOT))
    assert cp.returncode == 0, cp.stderr[-3000:]
    return json.loads(cp.stdout)


def matching(res: dict, check: str, pattern: str) -> list[dict]:
    """The errors and warnings of this check whose text matches (the same text as info is a fix that worked)."""
    return [f for f in res["out"]["findings"]
            if f["check"] == check and f["severity"] != "info" and re.search(pattern, f["found"])]


@pytest.fixture(scope="module")
def rounds():
    """{case id: (its finding, [(fix alternative, argv, result)])}: both rounds of checks at once."""
    launches = [list(x) for x in dict.fromkeys(tuple(c[1]) for c in CASES)]
    first = dict(zip(map(tuple, launches), check_many(launches)))
    todo = []
    for cid, argv, check, pattern in CASES:
        res = first[tuple(argv)]
        assert "out" in res, (cid, res)
        found = matching(res, check, pattern)
        assert len(found) == 1, (cid, [f["found"][:100] for f in res["out"]["findings"]])
        for alt in alternatives(found[0]["fix"]):
            todo.append((cid, alt, apply(argv, alt)))
    second = check_many([t[2] for t in todo])
    out = {}
    for (cid, alt, argv), res in zip(todo, second):
        out.setdefault(cid, []).append((alt, argv, res))
    return first, out


def test_alternatives_and_apply_read_fixes_as_flags():
    assert alternatives("--context-length 118784, or --kv-cache-dtype fp8_e4m3 --context-length 238592 (half), or "
                        "--tp-size 16 --nnodes 2 (8 GPUs per node) (37.8 GiB)") == [
        ["--context-length", "118784"], ["--kv-cache-dtype", "fp8_e4m3", "--context-length", "238592"],
        ["--tp-size", "16", "--nnodes", "2"]]
    assert alternatives("--speculative-draft-context-policy extend|yarn|cap (or SGLANG_KIMI_EAGLE3_CONTEXT_POLICY)") == [
        ["--speculative-draft-context-policy", v] for v in ("extend", "yarn", "cap")]
    assert alternatives("--mem-fraction-static 0.89 or leave it out (SGLang derives it)") == [
        ["--mem-fraction-static", "0.89"]]
    assert alternatives("drop --speculative-draft-model-quantization") == [["drop", "--speculative-draft-model-quantization"]]
    assert alternatives("see the message; the other findings still apply") == []
    assert apply(["--tp-size", "4", "--trust-remote-code"], ["--tp-size", "8", "--nnodes", "2"]) == [
        "--tp-size", "8", "--trust-remote-code", "--nnodes", "2"]
    assert apply(["--a", "1", "--q", "fp8"], ["drop", "--q"]) == ["--a", "1"]


@pytest.mark.parametrize("cid", [c[0] for c in CASES])
def test_the_suggested_fix_removes_the_finding(rounds, cid):
    first, second = rounds
    argv, check, pattern = next(c[1:] for c in CASES if c[0] == cid)
    before = first[tuple(argv)]
    fix = matching(before, check, pattern)[0]["fix"]
    assert second.get(cid), f"{cid}: the fix {fix!r} has no flag alternative to apply"
    errors_before = {f["check"] for f in before["out"]["findings"] if f["severity"] == "error"}
    for alt, fixed, res in second[cid]:
        assert "out" in res, (cid, alt, res)
        left = matching(res, check, pattern)
        assert not left, f"{cid}: {' '.join(alt)} (from the fix {fix!r}) leaves: {left[0]['found']}"
        new = [f for f in res["out"]["findings"] if f["severity"] == "error" and f["check"] not in errors_before]
        assert not new, f"{cid}: {' '.join(alt)} brings new errors: {[f['found'][:120] for f in new]}"
