"""A held-out set the rules were never tuned on: other architectures (a GRU, a 1-D conv net), other optimisers
(AdamW, SGD with momentum), batch sizes and seeds, logged under tag names no corpus convention uses (a hand-rolled
loop's `Loss/train_step`, `metrics/val_top1`, `opt/lr_group0`, `grads/total_norm`; tensorboardX's
`objective/holdout`, `gradient/global_norm`; fairseq's `train_inner/` and `valid/` with the loss in bits).

It is not committed and nothing is tuned on it: make it, judge it, read what the engine says.

    python -m bench.corpus.heldout --out /tmp/heldout          # ~1 min of CPU
    python bench/accuracy.py --corpus /tmp/heldout --runs --no-realworld
    python -m bench.corpus.heldout --out /tmp/heldout-100 --seed-offset 100   # a fresh draw of the same cases

Once a rule has been changed after reading what the engine says here, this draw is no longer unseen: judge the
change on a new `--seed-offset` as well.

Labels, checks and the training loop are the corpus's (`cases.py`, `train.py`); a seed whose run does not show
what its label claims is left out and reported, as for the corpus.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):  # `python bench/corpus/heldout.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    __package__ = "bench.corpus"

from . import cases as C  # noqa: E402
from .cases import Case  # noqa: E402
from .generate import generate  # noqa: E402
from .train import Setup  # noqa: E402

#: A GRU over token sequences (the label needs the whole sequence), AdamW.
GRU = Setup(data="seq", model="gru", hidden=48, n_train=2048, batch=64, steps=400, optimizer="adamw", lr=3e-3)
#: Two conv layers over the 20 readings as a signal, Adam.
CONV = Setup(model="conv1d", depth=2, act="relu", label_noise=0.1, n_train=2048, batch=64, steps=600)
CONV_SGD = replace(CONV, optimizer="sgd", lr=0.02, momentum=0.9)
#: The adding problem with a GRU, SGD.
GRU_ADD = Setup(
    data="adding",
    model="gru_reg",
    hidden=48,
    n_train=None,
    batch=32,
    steps=400,
    eval_every=25,
    optimizer="sgd",
    lr=0.05,
)


def heldout_cases(seed_offset: int = 0) -> list[Case]:
    """Healthy runs of hard shapes and sick runs of several kinds, one seed each (seeds the corpus never uses);
    `seed_offset` is added to every seed: a fresh draw of the same cases (see `--seed-offset`)."""
    healthy = [
        ("h_gru_adamw_cosine_warmup", replace(GRU, schedule="cosine", warmup=40), "handwritten", 11),
        ("h_conv_sgd_step_decay", replace(CONV_SGD, schedule="step", lr=0.05), "handwritten_tbx", 12),
        ("h_conv_batch8_noisy", replace(CONV, batch=8, lr=3e-4, steps=900), "fairseq", 13),
        ("h_gru_adding_clipped", replace(GRU_ADD, clip=1.0), "handwritten", 14),
        (
            "h_mlp_adamw_bigbatch",
            replace(C.MLP, batch=256, optimizer="adamw", lr=3e-3, weight_decay=0.05, steps=300, n_train=4096),
            "handwritten_tbx",
            15,
        ),
        ("h_conv_finetune", replace(CONV, pretrain_steps=500, lr=1e-4), "handwritten", 16),
        ("h_conv_cosine_restarts", replace(CONV_SGD, schedule="cosine_restarts", lr=0.05), "fairseq", 17),
        ("h_twohead_adamw", replace(C.TWO_HEAD, optimizer="adamw", lr=1e-3), "handwritten_tbx", 18),
        ("h_conv_amp", replace(CONV, amp=True), "handwritten", 19),
        ("h_gru_sgd_wd", replace(GRU, optimizer="sgd", lr=0.05, weight_decay=1e-4, steps=300), "fairseq", 34),
    ]
    out = [
        Case(name, "healthy", setup, (conv,), healthy=True, seeds=(seed + seed_offset,))
        for name, setup, conv, seed in healthy
    ]
    no_learning = C.whole_run("no_learning")
    quiet = ("plateau", "slow_convergence")
    # (name, configured cause, setup, convention, label, kinds also fair to name, the label's check, seed)
    sick = [
        (
            "s_gru_sgd_momentum_overfits",  # validation loss rises from its best while accuracy stays flat
            "no_regularisation",
            replace(GRU, optimizer="sgd", lr=0.1, steps=500),
            "fairseq",
            C._overfit,
            (),
            C.check_overfit,
            20,
        ),
        (
            "s_conv_warmup_uncapped",
            "warmup_uncapped",
            replace(CONV_SGD, schedule="warmup_uncapped", warmup=30),
            "handwritten",
            C._div,
            ("oscillation", "loss_spike", "exploding_gradients", "lr_anomaly"),
            C.check_diverged,
            21,
        ),
        (
            "s_conv_frozen",
            "frozen_params",
            replace(CONV, freeze=True),
            "handwritten_tbx",
            no_learning,
            (*quiet, "vanishing_gradients"),
            C.check_no_learning,
            22,
        ),
        (
            "s_gru_adding_no_clip",
            "no_clipping",
            replace(GRU_ADD, lr=0.3),
            "fairseq",
            C._grad_onset,
            ("loss_spike", "divergence", "oscillation", "warmup_instability"),
            C.check_exploded,
            23,
        ),
        (
            "s_conv_poisoned_every_epoch",
            "poisoned_shard",
            replace(CONV, shuffle=False, poison_batches=(20, 21, 22)),
            "handwritten",
            C._poison_periodic,
            ("loss_spike",),
            None,
            24,
        ),
        (
            "s_mlp_sigmoid_deep",
            "sigmoid_deep_stack",
            replace(C.DEEP, act="sigmoid", optimizer="adamw", lr=1e-3),
            "handwritten_tbx",
            C.whole_run("vanishing_gradients"),
            ("no_learning", *quiet),
            C.check_vanishing,
            25,
        ),
        (
            "s_conv_slow_loader",
            "slow_data_loading",
            replace(CONV, loader_delay=0.015, steps=300),
            "handwritten",
            C.whole_run("input_bottleneck"),
            (),
            C.check_bottleneck,
            26,
        ),
        (
            "s_conv_overfit_small",
            "no_regularisation",
            replace(CONV, n_train=128, batch=16, steps=900, eval_every=16, label_noise=0.2, lr=3e-3),
            "fairseq",
            C._overfit,
            (),
            C.check_overfit,
            27,
        ),
        (
            "s_mlp_fp16_overflow",
            "fp16_overflow",
            replace(C.MLP, amp=True, outlier_frac=0.004, hidden=128, depth=3, act="relu", batch=96, optimizer="adamw"),
            "handwritten_tbx",
            C._scale_onset,
            ("no_learning", *quiet),
            C.check_scale_collapse,
            28,
        ),
        (
            "s_gru_shuffled_labels",
            "shuffled_labels",
            replace(GRU, shuffle_labels=True),
            "fairseq",
            no_learning,
            ("overfitting", *quiet),
            C.check_no_learning,
            29,
        ),
        (
            "s_mlp_sgd_oscillation",
            "lr_too_high",
            replace(C.MLP, optimizer="sgd", lr=0.5, momentum=0.9, hidden=96, batch=48, steps=700),
            "handwritten",
            C.whole_run("oscillation"),
            ("loss_spike", "overfitting"),
            C.check_bouncing,
            30,
        ),
        (
            "s_twohead_unweighted",
            "unweighted_loss_sum",
            replace(C.TWO_HEAD, reg_scale=30.0, lr=1e-4),
            "handwritten_tbx",
            C.whole_run("task_imbalance"),
            ("no_learning", *quiet),
            C.check_imbalance,
            31,
        ),
        (
            "s_mlp_adamw_lr_far_too_low",
            "lr_too_low",
            replace(C.MLP, optimizer="adamw", lr=1e-6),
            "handwritten",
            no_learning,
            quiet,
            C.check_no_learning,
            32,
        ),
        (
            "s_mlp_dying_relu_adamw",
            "lr_too_high",
            replace(C.MLP, act="relu", lr=0.05, optimizer="adamw", hidden=96, log_zero_frac=True),
            "handwritten",
            C._dead_onset,
            ("overfitting", "oscillation", "loss_spike"),
            C.check_dead,
            35,
        ),
        (
            "s_conv_shuffled_labels",
            "shuffled_labels",
            replace(CONV, shuffle_labels=True),
            "handwritten",
            no_learning,
            ("overfitting", *quiet),
            C.check_no_learning,
            36,
        ),
    ]
    out += [
        Case(name, cause, setup, (conv,), expect=expect, also_ok=also_ok, check=check, seeds=(seed + seed_offset,))
        for name, cause, setup, conv, expect, also_ok, check, seed in sick
    ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/tbtriage-heldout"))
    parser.add_argument("--only", help="regex over case names")
    parser.add_argument(
        "--seed-offset",
        type=int,
        default=0,
        help="add this to every seed: a fresh draw nobody has looked at, once a rule was changed after reading the set",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    written = generate(args.out, args.only, chosen=heldout_cases(args.seed_offset))
    print(f"{len(written)} runs in {args.out}, {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
