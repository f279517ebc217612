"""The bundled prompt set: four categories, recorded lengths true, templates well-formed."""

import pytest

from sglang_kimi_eagle3.bench import prompts as P
from sglang_kimi_eagle3.errors import UserError


def test_every_category_present_with_true_lengths_and_unique_ids():
    ps = P.load()
    assert {p.category for p in ps} == set(P.CATEGORIES)
    assert len({p.id for p in ps}) == len(ps)
    for p in ps:
        assert (p.chars, p.words) == (len(p.text), len(p.text.split())), p.id
    for c in P.CATEGORIES:
        assert sum(p.category == c for p in ps) >= 4


def test_long_context_is_long():
    longs = P.load(["long_context"])
    assert min(p.chars for p in longs) > 5 * max(p.chars for p in P.load(["chat", "code", "math"]))
    assert max(p.chars for p in longs) > 50_000


def test_templates():
    assert P.render("raw", "hi") == "hi"
    k = P.render("kimi", "hi")
    assert k.startswith("<|im_system|>system<|im_middle|>") and k.endswith("hi<|im_end|><|im_assistant|>assistant<|im_middle|>")
    assert P.render("llama3", "hi").endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert P.guess_template("/models/moonshotai/Kimi-K2.5") == "kimi"
    assert P.guess_template("meta-llama/Llama-3.1-8B-Instruct") == "llama3"
    assert P.guess_template(None) == "raw"
    with pytest.raises(UserError):
        P.render("chatml", "hi")
    with pytest.raises(UserError):
        P.load(["poetry"])


def test_bench_and_planner_never_import_sglang():
    import subprocess
    import sys

    code = ("import sys, sglang_kimi_eagle3.commands.bench, sglang_kimi_eagle3.bench.plots, sglang_kimi_eagle3.commands.plan, "
            "sglang_kimi_eagle3.planner.plot; print(sorted(m for m in sys.modules if m.split('.')[0] == 'sglang'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
