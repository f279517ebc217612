"""Build the tiny target/draft pair under OUT (OUT/target, OUT/draft): python -m sglang_kimi_eagle3.tiny OUT.

The target is KimiK25ForConditionalGeneration (language model only, as SGLang serves Kimi-K2.5) unless
--text-only; --int4 stores its routed experts as Kimi-K2.5's compressed-tensors INT4 (group 32);
--draft-agreement Q makes the drafter propose the target's next token after a seeded fraction Q of the
tokens (1.0: always); --kimi-width builds the measurement pair (vocab 163840, hidden 7168, drafters with
32000 and 4000 draft rows: OUT/draft and OUT/draft-4000; about 8 GB: use --device cuda on a GPU box);
--preset deploy builds the pair shaped like the deployment's draft-step / target-step time ratio (one TP-8
rank's shapes at Kimi's hidden 7168, 84 layers, INT4 experts: use it with --int4; about 8 GB) and prints
that ratio as the planner models it for the seed deployment and for this pair on one H200
(--ratios-only prints it without building).
"""

from __future__ import annotations

import argparse
import sys
import time

from .spec import PRESETS


def _fraction(text: str) -> float:
    try:
        q = float(text)
    except ValueError:
        q = -1.0
    if not 0.0 <= q <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a fraction in [0, 1], e.g. 0.6")
    return q


MAX_SEED = 2**32 - 1  # weights.draft_proposals seeds a generator with 1_000_003 * seed + 7: torch takes < 2**64


def _seed(text: str) -> int:
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if not 0 <= seed <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer in [0, {MAX_SEED}], e.g. 0")
    return seed


class _BadArgument(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (main), not argparse's usage block and SystemExit
        raise _BadArgument(message)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except _BadArgument as exc:
        print(f"error: {exc} (see python -m sglang_kimi_eagle3.tiny --help)", file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    from ..terminal import HelpFormatter

    ap = _Parser(prog="python -m sglang_kimi_eagle3.tiny", description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("out", nargs="?", help="folder to write target/ and draft/ into")
    ap.add_argument("--seed", type=_seed, default=0, help=f"an integer in [0, {MAX_SEED}] (default 0)")
    ap.add_argument("--int4", action="store_true", help="routed experts as compressed-tensors pack-quantized int4")
    ap.add_argument("--text-only", action="store_true", help="serve DeepseekV3ForCausalLM instead of the Kimi-K2.5 wrapper")
    ap.add_argument("--draft-agreement", type=_fraction, default=1.0, metavar="Q",
                    help="fraction of tokens after which the drafter proposes the target's next token (default 1.0)")
    ap.add_argument("--kimi-width", action="store_true", help="the Kimi-width measurement pair instead of the tiny one")
    ap.add_argument("--preset", choices=sorted(PRESETS), default=None,
                    help="the shapes by name (tiny, kimi-width, deploy); --kimi-width is --preset kimi-width")
    ap.add_argument("--ratios-only", action="store_true",
                    help="print the modelled draft-step / target-step ratios of the preset and the seed; build nothing")
    ap.add_argument("--device", default="cpu", help="torch device to make the tensors on (default cpu; e.g. cuda)")
    a, unknown = ap.parse_known_args(argv)
    if unknown:  # named before a missing OUT: `--bogus` alone is about --bogus
        ap.error(f"unrecognized arguments: {' '.join(unknown)}")
    if a.out is None and not a.ratios_only:  # --ratios-only prints and builds nothing
        ap.error("OUT is required: the folder to write target/ and draft/ into")
    if a.kimi_width and a.preset not in (None, "kimi-width"):
        print(f"error: --kimi-width and --preset {a.preset} name two presets; give one", file=sys.stderr)
        return 2
    name = "kimi-width" if a.kimi_width else a.preset or "tiny"
    if a.ratios_only:  # prints the modelled ratios and builds nothing
        from .ratio import report

        print(report(PRESETS[name], int4=a.int4), file=sys.stderr)
        return 0
    import torch

    from ..validate import expand_path
    from . import build, preset

    # the device before the deploy preset's ratio report: a refusal is one line, not a report and then a line
    if a.device == "meta":
        print("error: --device meta makes shapes only and writes nothing; use --device cpu or cuda", file=sys.stderr)
        return 2
    if a.device != "cpu":
        try:
            torch.empty(1, device=a.device)
        except (RuntimeError, AssertionError) as exc:
            print(f"error: --device {a.device}: {str(exc).splitlines()[0]}; use --device cpu", file=sys.stderr)
            return 2
    if name == "deploy":
        from .ratio import report

        print(report(PRESETS[name], int4=a.int4), file=sys.stderr)
    spec = preset(name)
    t0 = time.monotonic()
    try:
        out = expand_path(a.out, "OUT")  # '' is not the current folder
        if out.exists() and not out.is_dir():
            raise ValueError(f"OUT {a.out}: is a file, not a folder; give a folder to write target/ and draft/ into")
        try:
            out.mkdir(parents=True, exist_ok=True)  # before any tensor is made
            target, draft = build(out, seed=a.seed, spec=spec, text_only=a.text_only, int4=a.int4,
                                  draft_agreement=a.draft_agreement, device=a.device)
        except OSError as exc:
            raise ValueError(f"OUT {a.out}: cannot write {exc.filename or a.out} ({exc.strerror or exc}); give a "
                             "folder this user can create files in") from None
    except ValueError as exc:  # a spec the INT4 MoE kernel cannot serve, a foreign or unwritable OUT, and the like
        print(f"error: {exc}", file=sys.stderr)
        return 2
    kind = "DeepseekV3ForCausalLM" if a.text_only else "KimiK25ForConditionalGeneration"
    print(f"tiny target: {target} ({kind}{', INT4 routed experts' if a.int4 else ', bf16'})\n"
          f"tiny draft:  {draft} (agreement {a.draft_agreement:g})"
          + "".join(f"\n             {draft.parent / f'draft-{rows}'}" for rows in spec.draft_variants)
          + f"\n({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
