"""What each scalar tag measures: its role (train_loss, lr, grad_norm, ...) and which direction is better.

Tags arrive in every convention training code uses: PyTorch examples (`Loss/train`, `Accuracy/val`),
Lightning (`train_loss_step`, `val_loss_epoch`, `lr-AdamW`, `lr-SGD-momentum`), HF Trainer
(`train/loss`, `eval/loss`, `train/learning_rate`, `train/grad_norm`), Keras (`epoch_loss` in `train/`
and `validation/` sibling runs, `epoch_learning_rate`), timm (`train_loss`, `eval_top1`), mmengine
(`train/loss_cls`, `val/bbox_mAP`, `lr`, `grad_norm`, `data_time`, `time`), detectron2 (`total_loss`,
`loss_box_reg`, `lr`, `data_time`, `time`), ultralytics (`train/box_loss`, `metrics/mAP50(B)`, `lr/pg0`),
fairseq (`gnorm`, `loss_scale`, `wps`, `ups`), nvitop's collector (`resources/gpu:0/gpu_utilization (%)/mean`),
ignite's GpuInfo (`gpu:0 util(%)`), and plain names (`loss`, `acc`, `val_acc`, `perplexity`, `wer`, `bleu`).

A tag is normalised (camelCase split, lower-cased) and cut into word tokens; rules are tried in an order
where the more specific family wins (`loss_scale` before losses, `grad_norm/layer1.weight` before weight
norms, `lr-SGD-momentum` before lr). Users override or extend with `[roles]` in the config (checked first).
Unknown tags stay `(None, 0)`: a wrong role is worse than none, because detectors trust roles.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from .config import Config, parse_role
from .datamodel import PrimaryTags

# ---- vocabularies ---------------------------------------------------------------------------------------

#: Words that mark a validation-side series (PyTorch examples log `test`, HF `eval`, Keras `validation`).
VAL_WORDS = frozenset(
    {
        "val",
        "valid",
        "validation",
        "validate",
        "eval",
        "evaluation",
        "evaluate",
        "test",
        "testing",
        "dev",
        "holdout",
        "heldout",
    }
)
TRAIN_WORDS = frozenset({"train", "training", "trn", "tr"})
#: Glued spellings (`valloss`, `trainacc`) are split into phase + quantity before matching.
_GLUED = re.compile(
    r"^(train|training|val|valid|validation|eval|test)(loss|acc|accuracy|ppl|perplexity|err|error|f1|auc|mae|mse|rmse|iou|top1|top5)$"
)
#: Words that say how a loss was aggregated, not what it measures: `train_loss_epoch` is the total loss.
AGGREGATE_WORDS = frozenset(
    {
        "loss",
        "losses",
        "total",
        "overall",
        "sum",
        "all",
        "full",
        "combined",
        "avg",
        "average",
        "mean",
        "running",
        "smoothed",
        "smooth",
        "ema",
        "epoch",
        "step",
        "batch",
        "iter",
        "iteration",
        "global",
        "final",
        "value",
        "objective",
        "metrics",
        "metric",
        "scalar",
        "scalars",
        "summary",
        "vs",
        "iterations",
        "net",
        "model",
        "main",
        "train",
        "on",
        "per",
        "stats",
        "logs",
        "log",
    }
)
#: Words around a gradient tag that do not name a layer: `train/grad_norm_before_clip` is the global norm.
_GRAD_CONTEXT_WORDS = frozenset(
    {
        "grad",
        "grads",
        "gradient",
        "gradients",
        "gnorm",
        "norm",
        "norms",
        "l2",
        "total",
        "global",
        "all",
        "model",
        "before",
        "after",
        "clip",
        "clipped",
        "unclipped",
        "pre",
        "post",
        "mean",
        "max",
        "optimizer",
        "optim",
        "opt",
        "trainer",
        "stats",
        "monitor",
        "metrics",
        "value",
        "overall",
        "full",
        "params",
        "parameters",
        "net",
        "network",
        "ratio",
        "raw",
        # Keras logs the global norm per epoch and per batch: `epoch_grad_norm` names no layer.
        "epoch",
        "batch",
        "step",
        "iter",
    }
    | TRAIN_WORDS
    | VAL_WORDS
)

_HIGHER_IS_BETTER = re.compile(
    r"^(acc|accs|accuracy|accuracies|acc\d+|top\d+|top_\d+|f1|fscore|f1score|f\d|bleu|sacrebleu|chrf|rouge\w*|"
    r"meteor|cider|spice|map|map\d+|ap|ap\d+|aps|apm|apl|ar|ar\d+|auc|auroc|auprc|rocauc|precision|recall|"
    r"prec|rec|iou|miou|dice|psnr|ssim|msssim|r2|ndcg|mrr|hits?|hit\d+|em|exact|kappa|mcc|spearman|pearson|"
    r"corr|correlation|reward|rewards|rew|return|returns|success|fitness|bertscore|jaccard|specificity|sensitivity|"
    r"explained)$"
)
_LOWER_IS_BETTER = re.compile(
    r"^(ppl|perplexity|error|errors|err|wer|cer|ter|mae|mse|rmse|rmsle|mape|smape|fid|kid|lpips|bpd|bpc|eer|ece|"
    r"ade|fde|chamfer|distance|dist|nmse|psnrloss|regret|miss|missrate)$"
)
_LOSS_TOKEN = re.compile(r"loss|^(nll|xent|crossentropy|cross_entropy|ce|bce|elbo|kl|kld|kldiv|objective)$")
_NOT_A_LOSS = re.compile(r"loss_?(weight|weights|coef|coeff|coefficient|ratio|multiplier|lambda)s?\b")


#: Tags whose pieces and rule verdicts are remembered: a sweep's thousands of runs log the same few dozen
#: tags, and cutting a tag runs a dozen regular expressions (a third of the roles' cost per run before).
#: The rules below are pure functions of the tag, so a remembered answer is the answer.
TAG_CACHE = 4096


@dataclass(frozen=True)
class _Tag:
    """A tag cut into the pieces the rules look at."""

    text: str  # normalised: camelCase split, lower-cased
    components: tuple[tuple[str, ...], ...]  # word tokens of each `/` component
    tokens: tuple[str, ...]  # every word token, in order


def _normalise(tag: str) -> str:
    text = tag.replace("mAP", "map").replace("2.0_norm", "norm").replace("2.0-norm", "norm")
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z][a-z])|(?<=[a-z])(?=[A-Z])", "_", text)
    return text.lower()


@lru_cache(maxsize=TAG_CACHE)
def _split(tag: str) -> _Tag:
    text = _normalise(tag)
    components = []
    for part in text.split("/"):
        words: list[str] = []
        for word in re.findall(r"[a-z0-9]+", part):
            glued = _GLUED.match(word)
            words.extend(glued.groups() if glued else (word,))
        components.append(tuple(words))
    return _Tag(text, tuple(components), tuple(w for c in components for w in c))


def _phase_of_tokens(tokens: Iterable[str]) -> str | None:
    tokens = set(tokens)
    if tokens & VAL_WORDS:
        return "val"
    if tokens & TRAIN_WORDS:
        return "train"
    return None


def _run_phase(run_name: str | None) -> str | None:
    """Keras writes `X/train` and `X/validation` sibling runs: the run's last path part names the phase."""
    if not run_name:
        return None
    return _phase_of_tokens([run_name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].lower()])


def tag_phase(tag: str, run_name: str | None = None) -> str | None:
    """'train', 'val' or None: which side of a train/validation split the tag's series was measured on."""
    return _phase_of_tokens(_split(tag).tokens) or _run_phase(run_name)


@lru_cache(maxsize=TAG_CACHE)
def quantity_key(tag: str) -> str:
    """What a tag measures with the phase and aggregation words removed: `val_loss_epoch` -> 'loss'."""
    synonyms = {
        "accuracy": "acc",
        "accs": "acc",
        "perplexity": "ppl",
        "losses": "loss",
        "error": "err",
        "acc1": "top1",
        "acc5": "top5",
        "top_1": "top1",
    }
    words = [synonyms.get(w, w) for w in _split(tag).tokens]
    kept = [w for w in words if w not in VAL_WORDS and w not in TRAIN_WORDS and w not in (AGGREGATE_WORDS - {"loss"})]
    return " ".join(kept)


# ---- the rules, most specific first ---------------------------------------------------------------------


def _is_epoch(t: _Tag) -> bool:
    leaf = [w for w in t.components[-1] if w not in TRAIN_WORDS]
    return leaf in (["epoch"], ["epochs"], ["cur", "epoch"], ["current", "epoch"])


def _resource_role(t: _Tag) -> str | None:
    text = t.text
    if re.search(r"power|temp|fan|clock|energy|watt|pcie|nvlink|ecc", text):
        return None
    on_gpu = re.search(r"gpu|cuda|device|nvidia|accelerator|tpu", text) is not None
    memory = re.search(r"mem", text) is not None
    if on_gpu and not memory and re.search(r"util|usage|busy|load|duty|sm_?active|occupancy", text):
        return "gpu_util"
    if "utilization.gpu" in text:
        return "gpu_util"
    if memory and re.search(r"free|total|bandwidth|utilization|util\b", text):
        return None  # free/total are capacity, memory_utilization is bandwidth: none is a usage curve
    if re.search(r"host|cpu|ram\b|swap|rss", text):
        return None
    # torch.cuda.memory_allocated/reserved and Lightning's DeviceStatsMonitor (`allocated_bytes.all.current`)
    # are device memory even without the word gpu; mmengine logs max allocated MB as plain `memory`.
    torch_memory = re.search(r"(allocated|reserved)(_bytes)?|max_memory|memory_(allocated|reserved)|cuda_mem", text)
    if (memory and on_gpu) or torch_memory or t.components[-1] in (("memory",), ("mem",)):
        return "gpu_mem"
    return None


def _timing_role(t: _Tag) -> str | None:
    text = t.text
    if re.search(r"runtime|wall|timestamp|duration|elapsed|eta|remaining|total_time|time_total", text):
        return None
    if re.search(
        r"data_?(time|load|loading_?time|wait)|time_?data|dataloader.*time|load_?time|fetch_?time|"
        r"time/data|input_?time|wait_?time",
        text,
    ):
        return "data_time"
    if re.search(
        r"(step|iter|iteration|batch|update)_?time|time_?(per_?)?(step|iter|batch|it)\b|time/(step|iter|batch)|"
        r"sec(ond)?s?_?per_?(step|iter|it|batch)|s_per_(step|iter|it)|(step|iter|batch)_?(duration|latency)",
        text,
    ):
        return "step_time"
    leaf = [w for w in t.components[-1] if w not in TRAIN_WORDS and w not in ("s", "sec", "seconds")]
    if leaf == ["time"]:
        return "step_time"  # mmengine and detectron2 log the iteration time as plain `time`
    if re.fullmatch(r"(step|iter|iteration|batch)_(s|sec|ms)", "_".join(t.components[-1])):
        return "step_time"  # a unit suffix: `perf/iter_s` is seconds per iteration (`it/s` is a throughput)
    if re.fullmatch(r"(data|fetch|load|loader|dataloader|input)(_wait)?_(s|sec|ms)", "_".join(t.components[-1])):
        return "data_time"  # the same for the time spent waiting on data: `timing/fetch_s`
    if re.search(
        r"samples?_?(per_?s(ec(ond)?)?|/s)|(imgs?|images?|tokens?|toks?|seqs?|sequences?|examples?|items?)"
        r"_?(/|per_?)_?s(ec(ond)?)?\b|throughput|it/s|its?_?per_?sec|iters?_?per_?sec|steps?_?per_?s(ec(ond)?)?\b",
        text,
    ):
        return "throughput"
    if set(t.components[-1]) & {"ips", "fps", "wps", "ups", "tps", "tflops", "mfu"}:
        return "throughput"
    return None


def _optimizer_role(t: _Tag) -> str | None:
    text = t.text
    # GradScaler's scale is logged as its own name too (`amp/grad_scale`, `grad_scale`): a scale, not a norm.
    if re.search(r"loss_?scale|grad_?scaler?(?![a-z])|scaler/scale|amp/scale|amp_scale|lossscale", text):
        return "loss_scale"
    if re.search(r"momentum|beta1|beta_1", text) and "loss" not in text:
        return "momentum"
    if any(re.fullmatch(r"lr\d*|lrs|learningrate", w) for w in t.tokens) or re.search(r"learning_?rate", text):
        return "lr"
    return None


def _gradient_role(t: _Tag) -> str | None:
    text = t.text
    grad_word = any(w in ("grad", "grads", "gradient", "gradients", "gnorm", "gradnorm") for w in t.tokens)
    if not grad_word and not re.search(r"grad_?norm|gradnorm", text):
        return None
    if re.search(r"accum|penalty|clip_?(frac|ratio|coef|rate)|(?<![a-z])clip$", text):
        return None  # accumulation counters, gradient penalties (a loss term), clip fractions
    if "loss" in text:
        return None
    layer_words = [w for w in t.tokens if w not in _GRAD_CONTEXT_WORDS and not w.startswith("grad")]
    return "grad_norm_layer" if layer_words else "grad_norm"


def _weight_role(t: _Tag) -> str | None:
    text = t.text
    if re.search(r"decay|loss|init", text):
        return None
    if re.search(
        r"(weight|weights|param|params|parameter|parameters|w)_?(norm|l2|std|rms|magnitude)|"
        r"(norm|l2)_?(of_)?(weight|weights|param|params)|weight_?norm|param_?norm|weights?_stats.*(std|norm)|"
        r"(weight|weights|param|params)/.*(norm|l2)",
        text,
    ):
        return "weight_norm"
    return None


def _activation_role(t: _Tag) -> str | None:
    # Bare "sparsity" is left out on purpose: pruning logs weight sparsity, which is meant to reach 90 %. A bare
    # "sparsity" whose values read as a zero share measured per batch is judged by detectors/activations.py.
    if re.search(
        r"zero_?frac|frac(tion)?_?(of_)?zeros?|percent_?zeros?|pct_?zeros?|zeros?_?(ratio|pct|percent|rate|frac)|"
        r"dead_?(relu|units?|neurons?|frac|ratio)|(relu|activation|act|acts|activations|hidden)\w*/?.*(zero|dead|sparsity)|"
        r"saturat",
        t.text,
    ) and not re.search(r"weight|param|prun", t.text):
        return "activation_zero_frac"
    return None


#: Words of series that describe a run without judging it: when it will end, how long an evaluation took, how
#: random a policy still is. They get the `context` role: known, shown, and never judged as a loss or metric.
_CONTEXT_WORDS = frozenset({"eta", "runtime", "elapsed", "remaining", "timestamp", "duration", "entropy"})


def _context_role(t: _Tag) -> str | None:
    if set(t.tokens) & _CONTEXT_WORDS and not _loss_like(t):
        return "context"
    if t.tokens == ("hp", "metric"):
        return "context"  # Lightning's hparams placeholder, -1 until a user sets it
    return None


#: Loss terms of a reinforcement-learning objective: policy gradient, value function, entropy bonus. None of them
#: is a training loss whose shape says whether the run learns (the return says that).
_POLICY_WORDS = frozenset({"policy", "actor", "pg"})
_RL_TERM_WORDS = _POLICY_WORDS | {"value", "critic", "vf", "entropy", "gradient", "q"}


#: An episode reward or return (`rollout/ep_rew_mean`, `episode/Return`, `reward`): the run is reinforcement learning.
_RL_RETURN = re.compile(r"(^|[/_ .])(ep_?rew\w*|rewards?|returns?|episode_?(reward|return)s?)($|[/_ .])")


def rl_return(tag: str) -> bool:
    """The tag is an episode reward or return: the run that logs it is reinforcement learning."""
    return bool(_RL_RETURN.search(tag.lower()))


def rl_term(tag: str) -> bool:
    """A loss term of an RL objective (`train/policy_gradient_loss`, `loss/value`, `train/entropy_loss`)."""
    qualifiers = _loss_qualifiers(_split(tag)) or tuple(w for w in _split(tag).tokens if w == "value")
    return bool(qualifiers) and set(qualifiers) <= _RL_TERM_WORDS


#: RL episode lengths: a performance measure whose better direction depends on the task (reach a goal: shorter;
#: balance a pole: longer).
_EPISODE_LENGTH = re.compile(r"(^|_)(ep|episode)_?(len|length)(_|$)")


@lru_cache(maxsize=TAG_CACHE)
def _loss_like(t: _Tag) -> bool:
    if _NOT_A_LOSS.search(t.text):
        return False
    return any(_LOSS_TOKEN.search(w) for w in t.tokens)


@lru_cache(maxsize=TAG_CACHE)
def _loss_qualifiers(t: _Tag) -> tuple[str, ...]:
    """Words beyond phase and aggregation: `loss_box_reg` -> ('box', 'reg'); `train_loss_epoch` -> ()."""
    return tuple(
        w
        for w in t.tokens
        if w not in AGGREGATE_WORDS
        and w not in VAL_WORDS
        and w not in TRAIN_WORDS
        and not re.fullmatch(r"loss(es)?", w)
    )


@lru_cache(maxsize=TAG_CACHE)
def _metric_direction(t: _Tag) -> int:
    lower = any(_LOWER_IS_BETTER.match(w) for w in t.tokens)
    higher = any(_HIGHER_IS_BETTER.match(w) for w in t.tokens)
    if lower:
        return -1  # `top1_err`, `error_rate`: an error of something better-is-higher is still an error
    return 1 if higher else 0


_DIRECTIONS = {
    "train_loss": -1,
    "val_loss": -1,
    "loss_component": -1,
    "step_time": -1,
    "data_time": -1,
    "throughput": 1,
    "gpu_util": 1,
}


@lru_cache(maxsize=TAG_CACHE)
def _builtin_role(t: _Tag) -> str | None:
    """The role of a tag that is not a loss or metric (those need the whole run to decide)."""
    if _is_epoch(t):
        return "epoch"
    for rule in (_optimizer_role, _resource_role, _timing_role, _gradient_role, _weight_role, _activation_role):
        role = rule(t)
        if role is not None:
            return role
    return None


def assign_roles(
    tags: Iterable[str], config: Config | None = None, *, run_name: str | None = None
) -> dict[str, tuple[str | None, int]]:
    """Map every tag to (role, direction): direction +1 higher is better, -1 lower is better, 0 neither.

    `run_name` lets Keras's `X/validation` run mark its unphased `epoch_loss` as a validation loss.
    A loss with a qualifier (`loss_cls`, `train/box_loss`) is a `loss_component` when its phase also has a
    total loss or at least two qualified losses; a single qualified loss (`train/nll_loss`) is the total.
    """
    patterns = tuple((p, r) for p, r in config.roles) if config else ()
    return dict(_assign_roles(tuple(dict.fromkeys(tags)), patterns, _run_phase(run_name)))


#: Runs (tag sets, with their config's role patterns and the run's phase) whose roles are remembered: a sweep's runs
#: log the same tags, and their roles are a function of those alone.
ROLES_CACHE = 256


@lru_cache(maxsize=ROLES_CACHE)
def _assign_roles(
    tags: tuple[str, ...], patterns: tuple[tuple[str, str], ...], run_phase: str | None
) -> dict[str, tuple[str | None, int]]:
    """`assign_roles` of distinct `tags` (a dict every caller copies: the cache keeps the original)."""
    overrides = [(re.compile(p), parse_role(r)) for p, r in patterns]
    out: dict[str, tuple[str | None, int]] = {}
    losses: dict[str, tuple[str, tuple[str, ...]]] = {}  # tag -> (phase, qualifiers)
    for tag in tags:
        override = next((role for pattern, role in overrides if pattern.search(tag)), None)
        if override is not None:
            out[tag] = override
            continue
        t = _split(tag)
        role = _builtin_role(t)
        if role is not None:
            out[tag] = (role, _DIRECTIONS.get(role, 0))
            continue
        if _loss_like(t):
            phase = _phase_of_tokens(t.tokens) or run_phase or "train"
            losses[tag] = (phase, _loss_qualifiers(t))
            continue
        direction = _metric_direction(t)
        if not direction and _EPISODE_LENGTH.search("_".join(t.tokens)):
            out[tag] = ("metric", 0)
            continue
        role = None if direction else _context_role(t)
        out[tag] = ("metric", direction) if direction else ((role, 0) if role else (None, 0))
    for phase in ("train", "val"):
        in_phase = {tag: q for tag, (p, q) in losses.items() if p == phase}
        if any(set(q) & _POLICY_WORDS for q in in_phase.values()):
            # Beside a policy loss, `value` names the value function's loss (`train/value_loss`, `loss/value`),
            # one term of an RL objective, not the loss's value.
            in_phase = {tag: q or (("value",) if "value" in _split(tag).tokens else q) for tag, q in in_phase.items()}
        has_total = any(not q for q in in_phase.values())
        qualified = [tag for tag, q in in_phase.items() if q]
        for tag, qualifiers in in_phase.items():
            is_component = bool(qualifiers) and (has_total or len(qualified) >= 2)
            role = "loss_component" if is_component else ("val_loss" if phase == "val" else "train_loss")
            out[tag] = (role, -1)
    return {tag: out[tag] for tag in tags}


# ---- pairing train and validation series ------------------------------------------------------------------

_PAIRABLE = {"train_loss": "val_loss", "loss_component": "loss_component", "metric": "metric"}


def pair_train_val(
    roles: Mapping[str, tuple[str | None, int]],
    points: Mapping[str, int] | None = None,
    *,
    run_name: str | None = None,
) -> list[tuple[str, str]]:
    """(train tag, val tag) pairs measuring the same quantity: `Loss/train`+`Loss/test`, `train_acc`+`val_acc`.

    One pair per validation tag; among several train candidates (`train_loss_step`, `train_loss_epoch`)
    the one with the most points wins (`points`), then the shortest name. A lone train loss and a lone
    validation loss pair even when their names share nothing (`loss` + `eval_nll`).
    """
    found = _pair_train_val(tuple(roles.items()), tuple((points or {}).items()), _run_phase(run_name))
    return list(found)


@lru_cache(maxsize=ROLES_CACHE)
def _pair_train_val(
    role_items: tuple[tuple[str, tuple[str | None, int]], ...],
    point_items: tuple[tuple[str, int], ...],
    run_phase: str | None,
) -> tuple[tuple[str, str], ...]:
    """`pair_train_val` of the roles, points and run phase as items (what a sweep's runs share)."""
    roles, points = dict(role_items), dict(point_items)

    def phase(tag: str) -> str | None:
        return _phase_of_tokens(_split(tag).tokens) or run_phase

    train_side = {t: r for t, (r, _) in roles.items() if r in _PAIRABLE and phase(t) != "val"}
    val_side = {t: r for t, (r, _) in roles.items() if r in _PAIRABLE.values() and phase(t) == "val"}
    pairs: list[tuple[str, str]] = []
    for val_tag, val_role in sorted(val_side.items()):
        key = quantity_key(val_tag)
        candidates = [t for t, r in train_side.items() if _PAIRABLE[r] == val_role and quantity_key(t) == key]
        if val_role == "metric":
            direction = roles[val_tag][1]
            candidates = [t for t in candidates if roles[t][1] == direction]
        if candidates:
            best = max(candidates, key=lambda t: (points.get(t, 0), -len(t), t))
            pairs.append((best, val_tag))
    train_losses = [t for t, r in train_side.items() if r == "train_loss"]
    val_losses = [t for t, r in val_side.items() if r == "val_loss"]
    if len(val_losses) == 1 and train_losses and not any(v == val_losses[0] for _, v in pairs):
        best = max(train_losses, key=lambda t: (points.get(t, 0), -len(t), t))
        pairs.append((best, val_losses[0]))
    return tuple(pairs)


# ---- the series a run is judged by ---------------------------------------------------------------------


def primary_tags(
    roles: Mapping[str, tuple[str | None, int]],
    points: Mapping[str, int] | None = None,
    *,
    run_name: str | None = None,
) -> PrimaryTags:
    """Pick the headline series: the most-sampled total loss (a loss component when there is no total)."""
    return _primary_tags(tuple(roles.items()), tuple((points or {}).items()), _run_phase(run_name))


@lru_cache(maxsize=ROLES_CACHE)
def _primary_tags(
    role_items: tuple[tuple[str, tuple[str | None, int]], ...],
    point_items: tuple[tuple[str, int], ...],
    run_phase: str | None,
) -> PrimaryTags:
    """`primary_tags` of the roles, points and run phase as items (a frozen answer: shared by the runs asking)."""
    roles, points = dict(role_items), dict(point_items)

    def phase(tag: str) -> str | None:
        return _phase_of_tokens(_split(tag).tokens) or run_phase

    def best(candidates: list[str]) -> str | None:
        return max(candidates, key=lambda t: (points.get(t, 0), -len(t), t)) if candidates else None

    def with_role(role: str) -> list[str]:
        return [t for t, (r, _) in roles.items() if r == role]

    # An RL objective's terms are never promoted to the run's loss: their shapes do not say whether it learns.
    components = [t for t in with_role("loss_component") if not rl_term(t)]
    train_components = [t for t in components if phase(t) != "val"]
    val_components = [t for t in components if phase(t) == "val"]
    metrics = [t for t, (r, d) in roles.items() if r == "metric" and d != 0]
    phases = {t: phase(t) for t in metrics}
    # Unphased metrics (`bbox/AP`, `metrics/mAP50(B)`) are evaluation results unless the run is a train sibling.
    val_metrics = [t for t in metrics if phases[t] == "val"] or [t for t in metrics if phases[t] is None]
    lrs = with_role("lr")
    # Param-group 0 (`lr/pg0`, `lr-AdamW`) is the model's main group; prefer it over later groups.
    main_lrs = [t for t in lrs if not re.search(r"pg[1-9]|group_?[1-9]|/[1-9]$", t.lower())] or lrs
    # A headline metric is top-1 rather than top-5; otherwise the most sampled, then the shortest name.
    headline = (
        max(val_metrics, key=lambda t: (points.get(t, 0), not re.search(r"top_?5|acc5|@5", t.lower()), -len(t), t))
        if val_metrics
        else None
    )
    return PrimaryTags(
        train_loss=best(with_role("train_loss")) or best(train_components),
        val_loss=best(with_role("val_loss")) or best(val_components),
        val_metric=headline,
        lr=best(main_lrs),
        grad_norm=best(with_role("grad_norm")),
    )
