"""`sglang-kimi-eagle3 tune` on a CPU box: the no-GPU refusal, --dry-run, flag errors (the real CLI)."""


from helpers import clean_env, python

from sglang_kimi_eagle3.cli import main


def test_refuses_without_a_gpu_in_one_line():
    p = python(["-m", "sglang_kimi_eagle3.cli", "tune"], env=clean_env(CUDA_VISIBLE_DEVICES=""), timeout=300)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA GPU" in lines[0] and "--dry-run" in lines[0], p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_dry_run_embedded_default(capsys, tmp_path):
    assert main(["tune", "--dry-run", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "the embedded default" in out and "parsed by SGLang's launch_server parser" in out
    assert "draft lm_head shard 4000 rows x hidden 7168 (draft vocab 32000, TP 8); top-k 1; N 4" in out
    for line in ("lm_head_gemv   R=4000 H=7168 bs=8", "key R4000:H7168:bs8", "draft_topk     V=32000 k=1 bs=128",
                 "argmax_verify  n=4 bs=256 vocab=163840", "key n4_bs256", "tree_sampling  n=4 bs=1"):
        assert line in out, line
    assert "Would measure 28 (op, shape) points" in out  # 5 bs x 2 draft-head ops + 6 bs x 3 verify ops (no lm_head_topk)
    assert f"written to {tmp_path}/<GPU name>.json" in out
    assert not list(tmp_path.iterdir())  # a dry run writes nothing


def test_dry_run_with_launch_flags(capsys):
    rc = main(["tune", "--dry-run", "--quick", "--ops", "draft_topk,argmax_verify",
               "--model-path", "llama-3.1-8b-instruct", "--speculative-algorithm", "EAGLE3",
               "--speculative-draft-model-path", "llama-3.1-8b-eagle3", "--tp-size", "2",
               "--speculative-eagle-topk", "4", "--speculative-num-steps", "4", "--speculative-num-draft-tokens", "16"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "TP 2); top-k 4; N 16 draft tokens over target vocab 128256" in out
    assert "key V32000:k4:bs32" in out and "key V32000:k1:bs1" in out and "key n16_bs128" in out
    assert "lm_head_gemv" not in out and "Would measure 9 (op, shape) points" in out


def test_flags_without_a_model_path_change_the_embedded_default_as_check_does(capsys):
    """`tune --dry-run --tp-size 4` is the embedded default at TP 4 (as `check --tp-size 4`), not a refusal."""
    assert main(["tune", "--dry-run", "--quick", "--tp-size", "4", "--cuda-graph-max-bs-decode", "8"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # echo wraps to the terminal
    assert "the embedded default" in out and "with --tp-size 4 --cuda-graph-max-bs-decode 8" in out, out
    assert "shard 8000 rows" in out and "bs 1,8 (draft), 1,8 (verify)" in out, out  # --quick within the cap


def test_bad_tune_flags_exit_2(capsys):
    assert main(["tune", "--dry-run", "--ops", "nope"]) == 2
    assert "unknown op(s) nope" in capsys.readouterr().err
    assert main(["tune", "--dry-run", "--model-path", "/no/such/folder", "--speculative-draft-model-path", "x"]) == 2
    assert "--model-path /no/such/folder" in capsys.readouterr().err


def test_dry_run_where_sglangs_server_stack_does_not_import(capsys, monkeypatch):
    """As on the lent GPU box (SGLang's kernels, not its server): the flags are read directly."""
    from sglang_kimi_eagle3.commands import tune as tune_cmd

    monkeypatch.setattr(tune_cmd, "_parsed_by_sglang", lambda argv: None)
    assert main(["tune", "--dry-run", "--quick", "--model-path", "kimi-k2.5", "--speculative-draft-model-path",
                 "aq-medai/kimi-k2-eagle3", "--tp-size=4", "--cuda-graph-max-bs", "8"]) == 0
    out = capsys.readouterr().out
    assert "flags read directly" in out and "shard 8000 rows" in out and "top-k 1; N 4" in out
    assert main(["tune", "--dry-run", "--model-path", "kimi-k2.5", "--speculative-draft-model-path",
                 "aq-medai/kimi-k2-eagle3", "--cuda-graph-max-bs-decode", "8"]) == 0
    assert "bs 1,8 (draft), 1,8 (verify)" in capsys.readouterr().out
    assert main(["tune", "--dry-run", "--model-path", "kimi-k2.5", "--tp-size", "eight"]) == 2
    assert "--tp-size 'eight': expected an integer" in capsys.readouterr().err


def test_cuda_graph_max_bs_decode_bounds_the_grid_through_sglangs_parser(capsys):
    """SGLang 0.5.23 has --cuda-graph-max-bs-decode (no --cuda-graph-max-bs); tune must read it."""
    assert main(["tune", "--dry-run", "--model-path", "kimi-k2.5", "--speculative-algorithm", "EAGLE3",
                 "--speculative-draft-model-path", "aq-medai/kimi-k2-eagle3", "--tp-size", "8",
                 "--cuda-graph-max-bs-decode", "8"]) == 0
    assert "bs 1,8 (draft), 1,8 (verify)" in capsys.readouterr().out


def test_tp_size_0_is_refused_as_check_refuses_it(capsys):
    """Not read as TP 1 (`or 1`): exit 2 with the one line `check` prints, before anything else runs."""
    for flags in (["--tp-size", "0"], ["--tp-size=0"], ["--tensor-parallel-size", "-1"]):
        assert main(["tune", "--dry-run", "--model-path", "kimi-k2.5", *flags]) == 2, flags
        err = capsys.readouterr()
        assert err.out == "" and len(err.err.strip().splitlines()) == 1, err
        assert "expected a positive integer (GPUs)" in err.err, err.err
        assert main(["check", "--model-path", "kimi-k2.5", *flags]) == 2
        assert "expected a positive integer (GPUs)" in capsys.readouterr().err


def test_a_tp_size_the_heads_cannot_split_is_refused_not_tuned(capsys):
    """Kimi's 64 heads (and the drafter's) cannot shard over 3 GPUs: no shapes are listed for a launch SGLang refuses."""
    assert main(["tune", "--dry-run", "--tp-size", "3"]) == 2
    err = capsys.readouterr()
    assert err.out == "" and len(err.err.strip().splitlines()) == 1, err
    assert "--tp-size 3" in err.err and "64 attention heads" in err.err, err.err
    assert main(["tune", "--dry-run", "--tp-size", "4"]) == 0


def test_a_file_as_cache_dir_is_refused_not_promised(capsys, tmp_path):
    f = tmp_path / "a-file"
    f.write_text("")
    for where in (f, f / "sub"):
        assert main(["tune", "--dry-run", "--cache-dir", str(where)]) == 2
        err = capsys.readouterr()
        assert "would be written" not in err.out and "--cache-dir" in err.err and "not a folder" in err.err, err


def test_a_bad_launch_flag_is_named_before_the_missing_gpu(capsys):
    """On a box without a GPU, `tune --bogus` names the unknown flag (what the user can fix here), not the GPU."""
    assert main(["tune", "--bogus"]) == 2
    err = capsys.readouterr().err
    assert "--bogus" in err and "no CUDA GPU" not in err, err


def test_a_cache_dir_this_user_cannot_write_in_is_refused_not_promised(capsys):
    """--dry-run promised `Table would be written to /proc/x/...`; the real run would fail its write after measuring."""
    from pathlib import Path

    for where in ("/proc/kimi-tune-x", "/sys/kernel/kimi-tune-x"):
        try:  # a box where this user can create there after all: nothing to refuse
            (Path(where).parent / "kimi-probe").mkdir()
            (Path(where).parent / "kimi-probe").rmdir()
            continue
        except OSError:
            pass
        assert main(["tune", "--dry-run", "--cache-dir", where]) == 2, where
        err = capsys.readouterr()
        assert "would be written" not in err.out and "cannot create files in" in err.err, err
        assert len(err.err.strip().splitlines()) == 1, err.err


def test_a_value_given_to_a_switch_is_refused_not_read_as_on(capsys, tmp_path):
    """--quick=no, --ignore-bundled=false, --dry-run=0 were each read as the switch given (a quick grid, the bundled
    table ignored, a dry run) whatever the value said."""
    for flag in ("--dry-run=0", "--quick=no", "--ignore-bundled=false", "--quick="):
        argv = ["tune", "--cache-dir", str(tmp_path), flag] + ([] if flag.startswith("--dry-run") else ["--dry-run"])
        assert main(argv) == 2, flag
        err = capsys.readouterr().err.strip().splitlines()
        name = flag.split("=")[0]
        assert len(err) == 1 and f"{flag}: {name} takes no value; write {name} alone or leave it out" in err[0], err
    assert not list(tmp_path.iterdir())


def test_json_model_override_args_reach_the_shapes_as_sglang_applies_them(capsys):
    """SGLang applies --json-model-override-args to the target's and the draft's config (as `check` reads them); tune
    measured the configs as stored."""
    llama = ["--model-path", "llama-3.1-8b-instruct", "--speculative-algorithm", "EAGLE3",
             "--speculative-draft-model-path", "llama-3.1-8b-eagle3", "--ops", "argmax_verify", "--quick"]
    assert main(["tune", "--dry-run", *llama, "--json-model-override-args", '{"vocab_size": 131072}']) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "N 4 draft tokens over target vocab 131072" in out and "vocab=131072" in out, out
    # Kimi-K2.5's vocabulary sits in its text_config: a top-level key does not reach it (SGLang merges one level)
    assert main(["tune", "--dry-run", "--quick", "--json-model-override-args", '{"vocab_size": 131072}']) == 0
    assert "over target vocab 163840" in " ".join(capsys.readouterr().out.split())
    assert main(["tune", "--dry-run", "--quick", "--json-model-override-args", "null"]) == 0  # SGLang: no overrides
    capsys.readouterr()
    for raw, words in (("{nope", "not valid JSON"), ("[1]", "expected a JSON object, got list"), ("", "not valid JSON")):
        assert main(["tune", "--dry-run", "--json-model-override-args", raw]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"tune: --json-model-override-args: {words}" in err[0], err


def test_a_config_file_is_read_as_launch_server_reads_it(tmp_path, capsys):
    """`--config FILE` was ignored: tune measured the embedded default's shapes (as `check` did before it merged it)."""
    cfg = tmp_path / "launch.yaml"
    cfg.write_text("model-path: llama-3.1-8b-instruct\nspeculative-algorithm: EAGLE3\n"
                   "speculative-draft-model-path: llama-3.1-8b-eagle3\ntp-size: 2\n")
    assert main(["tune", "--dry-run", "--quick", "--ops", "argmax_verify", "--config", str(cfg)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "TP 2); top-k 1; N 4 draft tokens over target vocab 128256" in out and "embedded default" not in out, out
    assert main(["tune", "--dry-run", "--config", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--config" in err[0], err
