"""Tiny models trained for real on CPU (PyTorch, one thread): the configuration decides what goes wrong.

One loop (`train`) covers every supervised case: a `Setup` names the model, the data, the optimizer, the
schedule and the mistake (lr far too high, frozen parameters, no shuffling over sorted data, a poisoned shard,
a slow synchronous loader, fp16 with a dynamic loss scaler, ...). Nothing here draws a curve: every value
logged is what the optimizer produced on a real loss. `train_rl` is REINFORCE on a small gridworld.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .trace import Trace

#: A missing sensor reading left in the data as this value: fine in fp32, infinite in fp16 (max 65504).
MISSING_SENTINEL = 99999.0


@dataclass(frozen=True)
class Setup:
    """One training configuration; the defaults are a sane run of a small MLP classifier."""

    steps: int = 480
    batch: int = 32
    # data: "teacher" (vectors labelled by a random teacher net), "seq" (token sequences), "seqreg" (RNN regression)
    data: str = "teacher"
    n_train: int | None = 1024  # None: a stream of fresh samples (no epochs)
    n_val: int = 512
    classes: int = 4
    dim: int = 20
    label_noise: float = 0.3  # temperature of the teacher's label noise: keeps the task from being trivial
    input_scale: float = 1.0  # raw, unnormalised inputs have a large scale
    nan_frac: float = 0.0  # samples with a NaN reading (a missing value never imputed)
    outlier_frac: float = 0.0  # samples with a missing reading left as the sentinel 99999 (fp16 max is 65504)
    shuffle: bool = True
    sort_by_label: bool = False
    shuffle_labels: bool = False  # labels permuted against inputs: nothing to learn
    poison_steps: tuple[int, ...] = ()  # stream: these steps read a corrupted shard
    poison_batches: tuple[int, ...] = ()  # epochs: these batch indices of every epoch are a corrupted shard
    poison_scale: float = 40.0
    # model
    model: str = "mlp"  # mlp | transformer | rnn | twohead; held-out only (heldout.py): gru | gru_reg | conv1d
    depth: int = 2
    hidden: int = 64
    act: str = "relu"
    init_gain: float = 1.0  # multiplies the default init of every weight
    bias_init: float | None = None
    bias: bool = True  # bias=False layers (common before a norm layer) leave no easy way off a saddle
    dropout: float = 0.0
    freeze: bool = False  # requires_grad off on everything but nothing (a forgotten unfreeze)
    # optimisation
    optimizer: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.9
    weight_decay: float = 0.0
    schedule: str = "const"  # const | step | cosine | cosine_restarts | warmup | warmup_uncapped
    warmup: int = 0
    clip: float | None = None
    # two heads: classification + regression of a raw-unit quantity
    reg_scale: float = 1.0
    reg_weight: float = 1.0
    # system
    loader_delay: float = 0.0  # seconds a synchronous loader blocks per batch (slow disk / decode)
    amp: bool = False  # fp16 gradients with PyTorch GradScaler's rule
    scaler_growth: int = 50
    # logging
    eval_every: int | None = None  # default: once per epoch
    log_layers: bool = False
    log_zero_frac: bool = False
    #: Every this many steps, histograms of each linear layer's weights, gradients and (MLP) activations (0: none).
    log_histograms: int = 0
    histogram_kinds: tuple[str, ...] = ("weight", "grad", "act")
    pretrain_steps: int = 0  # start from a checkpoint trained this long on the same task (a fine-tune)
    # process
    crash_at: int | None = None  # the process dies here
    resume_from: int | None = None  # restarted from the checkpoint saved at this step
    seed: int = 0


# ---- data -------------------------------------------------------------------------------------------------


class _Teacher:
    """Labels from a fixed random net with noise: learnable to ~85 %, not trivial."""

    def __init__(self, setup: Setup, rng: torch.Generator):
        self.s = setup
        self.w1 = torch.randn(setup.dim, 32, generator=rng) / math.sqrt(setup.dim)
        self.w2 = torch.randn(32, setup.classes, generator=rng) / math.sqrt(32) * 3.0
        self.wr = torch.randn(32, generator=rng) / math.sqrt(32)
        self.rng = rng

    def sample(self, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = torch.randn(n, self.s.dim, generator=self.rng)
        h = torch.tanh(x @ self.w1)
        logits = h @ self.w2
        gumbel = -torch.log(-torch.log(torch.rand(logits.shape, generator=self.rng).clamp_min(1e-9)))
        y = torch.argmax(logits + self.s.label_noise * 3 * gumbel, dim=1)
        reg = (h @ self.wr) * self.s.reg_scale
        return x, y, reg


class _Sequences:
    """Token sequences; the label is the most frequent of the first `classes` tokens (needs attention)."""

    def __init__(self, setup: Setup, rng: torch.Generator, length: int = 16, vocab: int = 12):
        self.s, self.rng, self.length, self.vocab = setup, rng, length, vocab

    def sample(self, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = torch.randint(0, self.vocab, (n, self.length), generator=self.rng)
        counts = torch.stack([(x == k).sum(1) for k in range(self.s.classes)], 1).float()
        y = torch.argmax(counts + 0.1 * torch.rand(counts.shape, generator=self.rng), 1)
        return x, y, torch.zeros(n)


class _AddingProblem:
    """A variant of Hochreiter's adding problem: sum the marked numbers of a sequence (an RNN benchmark)."""

    def __init__(self, setup: Setup, rng: torch.Generator, length: int = 20):
        self.s, self.rng, self.length = setup, rng, length

    def sample(self, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        values = torch.rand(n, self.length, generator=self.rng)
        marks = (torch.rand(n, self.length, generator=self.rng) < 0.3).float()
        x = torch.stack([values, marks], -1)
        y = (values * marks).sum(1)
        return x, y, y


def _source(setup: Setup, rng: torch.Generator):
    return {"teacher": _Teacher, "seq": _Sequences, "adding": _AddingProblem}[setup.data](setup, rng)


def _raw_inputs(x: torch.Tensor, setup: Setup, rng: torch.Generator) -> torch.Tensor:
    """Unnormalised inputs: a global scale, and samples whose first reading is the missing-value sentinel."""
    if setup.data != "teacher":
        return x
    x = x * setup.input_scale
    if setup.nan_frac:
        x[torch.rand(x.shape[0], generator=rng) < setup.nan_frac, 1] = float("nan")
    if setup.outlier_frac:
        outliers = torch.rand(x.shape[0], generator=rng) < setup.outlier_frac
        x[outliers, 0] = MISSING_SENTINEL
    return x


# ---- models -----------------------------------------------------------------------------------------------


_ACTS = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}


class MLP(nn.Module):
    def __init__(self, setup: Setup, out: int):
        super().__init__()
        dims = [setup.dim] + [setup.hidden] * setup.depth
        self.layers = nn.ModuleList(nn.Linear(a, b, bias=setup.bias) for a, b in zip(dims[:-1], dims[1:]))
        self.act = _ACTS[setup.act]()
        self.drop = nn.Dropout(setup.dropout)
        self.head = nn.Linear(dims[-1], out, bias=setup.bias)
        self.half = setup.amp  # autocast: linear layers run in fp16, forward and backward
        self.zero_frac: list[float] = []
        self.acts: list[torch.Tensor] = []  # each hidden layer's output in the last forward pass

    def _linear(self, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        if not self.half:
            return layer(x)
        bias = layer.bias.half() if layer.bias is not None else None
        return F.linear(x.half(), layer.weight.half(), bias).float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.zero_frac = []
        self.acts = []
        for layer in self.layers:
            x = self.act(self._linear(layer, x))
            self.zero_frac.append(float((x <= 0).float().mean()))
            self.acts.append(x.detach())
            x = self.drop(x)
        return self._linear(self.head, x)


class TwoHead(nn.Module):
    def __init__(self, setup: Setup):
        super().__init__()
        self.trunk = MLP(replace(setup, depth=setup.depth), setup.hidden)
        self.cls = nn.Linear(setup.hidden, setup.classes)
        self.reg = nn.Linear(setup.hidden, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.relu(self.trunk(x))
        return self.cls(h), self.reg(h).squeeze(-1)


class TinyTransformer(nn.Module):
    """Post-LN encoder (the original layout, the one that needs warmup), mean-pooled."""

    def __init__(self, setup: Setup, vocab: int = 12, length: int = 16, width: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.randn(length, width) * 0.02)
        layer = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, setup.depth, enable_nested_tensor=False)
        self.head = nn.Linear(width, setup.classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.embed(x) + self.pos)
        return self.head(h.mean(1))


class TinyRNN(nn.Module):
    def __init__(self, setup: Setup):
        super().__init__()
        self.rnn = nn.RNN(2, setup.hidden, batch_first=True, nonlinearity="tanh")
        self.head = nn.Linear(setup.hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.head(out[:, -1]).squeeze(-1)


class GRUClassifier(nn.Module):
    """Token sequences -> embedding -> GRU -> last state -> classes (held-out set)."""

    def __init__(self, setup: Setup, vocab: int = 12, width: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.gru = nn.GRU(width, setup.hidden, batch_first=True)
        self.head = nn.Linear(setup.hidden, setup.classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(self.embed(x))
        return self.head(out[:, -1])


class GRURegressor(nn.Module):
    """The adding problem with a GRU instead of a vanilla RNN (held-out set)."""

    def __init__(self, setup: Setup):
        super().__init__()
        self.gru = nn.GRU(2, setup.hidden, batch_first=True)
        self.head = nn.Linear(setup.hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)
        return self.head(out[:, -1]).squeeze(-1)


class Conv1d(nn.Module):
    """The readings as a 1-channel signal: `depth` conv layers of 16 channels, flattened, a linear head
    (held-out set)."""

    def __init__(self, setup: Setup):
        super().__init__()
        chans = [1] + [16] * setup.depth
        layers: list[nn.Module] = []
        for a, b in zip(chans[:-1], chans[1:]):
            layers += [nn.Conv1d(a, b, 3, padding=1, bias=setup.bias), _ACTS[setup.act]()]
        self.body = nn.Sequential(*layers)
        self.drop = nn.Dropout(setup.dropout)
        self.head = nn.Linear(chans[-1] * setup.dim, setup.classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(self.body(x.unsqueeze(1)).flatten(1)))


#: Every `Setup.model`, by name.
_MODELS = {
    "mlp": lambda setup: MLP(setup, setup.classes),
    "twohead": TwoHead,
    "transformer": TinyTransformer,
    "rnn": TinyRNN,
    "gru": GRUClassifier,
    "gru_reg": GRURegressor,
    "conv1d": Conv1d,
}


def _build(setup: Setup) -> nn.Module:
    if setup.model not in _MODELS:
        raise ValueError(setup.model)
    model: nn.Module = _MODELS[setup.model](setup)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.mul_(setup.init_gain)
            elif setup.bias_init is not None and name.endswith("bias") and "layers" in name:
                p.fill_(setup.bias_init)
    if setup.freeze:
        for p in model.parameters():
            p.requires_grad_(False)
    return model


def _layer_params(model: nn.Module) -> dict[str, nn.Parameter]:
    """The weights whose gradient norms a per-layer logger would show: first, middle and last."""
    weights = [(n, p) for n, p in model.named_parameters() if p.dim() >= 2]
    picked = {weights[0][0], weights[len(weights) // 2][0], weights[-1][0]}
    return {n: p for n, p in weights if n in picked}


# ---- schedules --------------------------------------------------------------------------------------------


def _lr_factor(setup: Setup, step: int) -> float:
    total = setup.steps
    if setup.schedule == "const":
        return 1.0
    if setup.schedule == "step":  # x0.1 at 50 % and 75 % (ResNet's recipe)
        return 0.1 ** ((step >= total // 2) + (step >= 3 * total // 4))
    if setup.schedule == "cosine":
        warm = min(1.0, (step + 1) / setup.warmup) if setup.warmup else 1.0
        return warm * 0.5 * (1 + math.cos(math.pi * step / total))
    if setup.schedule == "cosine_restarts":  # SGDR with the period doubling: T0 = total / 7
        t0 = max(1, total // 7)
        t, period = step, t0
        while t >= period:
            t, period = t - period, period * 2
        return 0.5 * (1 + math.cos(math.pi * t / period))
    if setup.schedule == "warmup":  # linear warmup, then constant
        return min(1.0, (step + 1) / setup.warmup)
    if setup.schedule == "warmup_uncapped":  # the same formula with the cap forgotten: lr keeps climbing
        return (step + 1) / setup.warmup
    raise ValueError(setup.schedule)


# ---- the loop ---------------------------------------------------------------------------------------------


def _optimizer(setup: Setup, params) -> torch.optim.Optimizer:
    params = [p for p in params if p.requires_grad] or [nn.Parameter(torch.zeros(1))]
    if setup.optimizer == "sgd":
        return torch.optim.SGD(params, lr=setup.lr, momentum=setup.momentum, weight_decay=setup.weight_decay)
    if setup.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=setup.lr, weight_decay=setup.weight_decay)
    return torch.optim.Adam(params, lr=setup.lr, weight_decay=setup.weight_decay)


def _loss(setup: Setup, model: nn.Module, x, y, reg) -> tuple[torch.Tensor, torch.Tensor | None, dict]:
    """(loss, logits or None, the terms of a multi-task loss)."""
    if setup.model == "twohead":
        logits, pred = model(x)
        ce = F.cross_entropy(logits, y)
        mse = F.mse_loss(pred, reg)
        return ce + setup.reg_weight * mse, logits, {"cls": float(ce.detach()), "reg": float(mse.detach())}
    if setup.data == "adding":
        pred = model(x)
        return F.mse_loss(pred, y), None, {}
    logits = model(x)
    return F.cross_entropy(logits, y), logits, {}


def _grad_norm(params) -> float:
    grads = [p.grad.detach().norm() for p in params if p.grad is not None]
    if not grads:
        return 0.0
    return float(torch.stack(grads).norm())


def _log_histograms(trace: Trace, setup: Setup, model: nn.Module, step: int, wall: float) -> None:
    """What `writer.add_histogram` gets in a loop that logs every linear layer: its weight after the update, the
    gradient that made it, and (MLP) the layer's output on this batch."""
    for name, p in model.named_parameters():
        if p.dim() < 2:
            continue
        layer = name.rsplit(".", 1)[0]
        if "weight" in setup.histogram_kinds:
            trace.log_histogram(f"hist_weight/{layer}", step, p.detach().numpy().ravel().copy(), wall)
        if "grad" in setup.histogram_kinds and p.grad is not None:
            trace.log_histogram(f"hist_grad/{layer}", step, p.grad.detach().numpy().ravel().copy(), wall)
    if "act" in setup.histogram_kinds:
        for i, out in enumerate(getattr(model, "acts", [])):
            trace.log_histogram(f"hist_act/{setup.act}{i}", step, out.numpy().ravel().copy(), wall)


def _pretrain(model: nn.Module, source, setup: Setup, rng: torch.Generator) -> None:
    """The checkpoint a fine-tune starts from: Adam on fresh samples of the same task, nothing logged."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(setup.pretrain_steps):
        x, y, reg = source.sample(setup.batch)
        loss, _, _ = _loss(setup, model, _raw_inputs(x, setup, rng), y, reg)
        opt.zero_grad()
        loss.backward()
        opt.step()


def train(setup: Setup) -> Trace:
    """Train once under `setup` and return everything the loop measured."""
    torch.set_num_threads(1)
    torch.manual_seed(setup.seed)
    rng = torch.Generator().manual_seed(1000 + setup.seed)
    source = _source(setup, rng)
    val_x, val_y, val_reg = source.sample(setup.n_val)
    val_x = _raw_inputs(val_x, setup, rng)
    if setup.n_train is not None:
        train_x, train_y, train_reg = source.sample(setup.n_train)
        train_x = _raw_inputs(train_x, setup, rng)
        if setup.shuffle_labels:
            train_y = train_y[torch.randperm(train_y.numel(), generator=rng)]
        if setup.sort_by_label:
            order = torch.argsort(train_y, stable=True)
            train_x, train_y, train_reg = train_x[order], train_y[order], train_reg[order]
        steps_per_epoch = setup.n_train // setup.batch
    else:
        steps_per_epoch = setup.eval_every or 50
    eval_every = setup.eval_every or steps_per_epoch

    model = _build(setup)
    if setup.pretrain_steps:
        _pretrain(model, source, setup, rng)
    params = list(model.parameters())
    opt = _optimizer(setup, params)
    layers = _layer_params(model) if setup.log_layers else {}
    trace = Trace(steps_per_epoch=steps_per_epoch, num_classes=setup.classes if setup.data != "adding" else None)
    trace.optimizer = type(opt).__name__
    if setup.data != "adding":
        freq = torch.bincount(val_y, minlength=setup.classes).double() / val_y.numel()
        trace.prior_loss = float(-(freq[freq > 0] * freq[freq > 0].log()).sum())
        trace.prior_acc = float(freq.max())
    scale, good_steps = 2.0**16, 0
    checkpoint = None
    start = time.perf_counter()
    wall_offset = 0.0
    order = torch.arange(setup.n_train or 0)
    step = 0
    segment_start = 0
    while step < setup.steps:
        if setup.resume_from is not None and setup.crash_at is not None and step == setup.crash_at:
            # The process died; a new one loads the checkpoint and writes into the same folder.
            trace.segments.append((segment_start, step - 1))
            model.load_state_dict(checkpoint[0])
            opt.load_state_dict(checkpoint[1])
            scale, good_steps = checkpoint[2]
            torch.manual_seed(setup.seed + 7919)  # a new process: new dropout / sampling randomness
            wall_offset += 120.0  # the time it took someone to notice and relaunch
            trace.restart_wall = time.perf_counter() - start + wall_offset
            step = setup.resume_from + 1
            segment_start = step
            setup = replace(setup, crash_at=None)
            continue
        if setup.crash_at is not None and step == setup.crash_at:
            break
        for group in opt.param_groups:
            group["lr"] = setup.lr * _lr_factor(setup, step)
        t0 = time.perf_counter()
        # --- data ---
        if setup.loader_delay:
            time.sleep(setup.loader_delay)  # a synchronous loader reading and decoding from a slow disk
        if setup.n_train is None:
            x, y, reg = source.sample(setup.batch)
            x = _raw_inputs(x, setup, rng)
            poisoned = step in setup.poison_steps
        else:
            in_epoch = step % steps_per_epoch
            if in_epoch == 0 and setup.shuffle:
                order = torch.randperm(setup.n_train, generator=rng)
            elif in_epoch == 0:
                order = torch.arange(setup.n_train)
            idx = order[in_epoch * setup.batch : (in_epoch + 1) * setup.batch]
            x, y, reg = train_x[idx], train_y[idx], train_reg[idx]
            poisoned = in_epoch in setup.poison_batches
        if poisoned:
            # A corrupted shard: raw bytes decoded without normalisation (all large and positive).
            if x.is_floating_point():
                x = (x + 2.5) * setup.poison_scale
            else:  # token data: the shard's labels are misaligned with its sequences (off by one class)
                y = (y + 1) % setup.classes
        t_data = time.perf_counter()
        # --- step ---
        model.train()
        loss, logits, terms = _loss(setup, model, x, y, reg)
        opt.zero_grad(set_to_none=True)
        skipped = False
        if loss.requires_grad:
            if setup.amp:
                (loss * scale).backward()
                # GradScaler's rule on fp16 gradients: store scaled, overflow -> skip and halve,
                # `scaler_growth` clean steps in a row -> double.
                overflow = False
                for p in params:
                    if p.grad is not None:
                        half = p.grad.to(torch.float16)
                        p.grad = half.float() / scale  # unscale_: a tiny scale makes this inf too
                        overflow |= not bool(torch.isfinite(p.grad).all())
                if overflow:
                    skipped, scale, good_steps = True, scale * 0.5, 0
                else:
                    good_steps += 1
                    if good_steps >= setup.scaler_growth:
                        scale, good_steps = scale * 2.0, 0
            else:
                loss.backward()
            norm = _grad_norm(params)
            if setup.clip is not None:
                torch.nn.utils.clip_grad_norm_(params, setup.clip)
            if not skipped:
                opt.step()
        else:
            norm = 0.0
        t_end = time.perf_counter()
        wall = t_end - start + wall_offset
        trace.log("loss", step, float(loss.detach()), wall)
        if logits is not None:
            trace.log("acc", step, float((logits.argmax(1) == y).float().mean()), wall)
        trace.log("lr", step, opt.param_groups[0]["lr"], wall)
        trace.log("grad_norm", step, norm, wall)
        for name, p in layers.items():
            trace.log(f"grad_norm/{name}", step, float(p.grad.norm()) if p.grad is not None else 0.0, wall)
        if setup.log_zero_frac and hasattr(model, "zero_frac"):
            for i, frac in enumerate(model.zero_frac):
                trace.log(f"zero_frac/layer{i}", step, frac, wall)
        for name, value in terms.items():
            trace.log(f"task/{name}", step, value, wall)
        if setup.amp:
            trace.log("loss_scale", step, scale, wall)
        trace.log("data_time", step, t_data - t0, wall)
        trace.log("step_time", step, t_end - t0, wall)
        if setup.log_histograms and step % setup.log_histograms == 0:
            _log_histograms(trace, setup, model, step, wall)
        if setup.resume_from is not None and step == setup.resume_from:
            checkpoint = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()), (scale, good_steps))
        step += 1
        if step % eval_every == 0 or step == setup.steps:
            model.eval()
            with torch.no_grad():
                vloss, vlogits, vterms = _loss(setup, model, val_x, val_y, val_reg)
            wall = time.perf_counter() - start + wall_offset
            trace.log("val_loss", step - 1, float(vloss), wall)
            if vlogits is not None:
                trace.log("val_acc", step - 1, float((vlogits.argmax(1) == val_y).float().mean()), wall)
            for name, value in vterms.items():
                trace.log(f"val_task/{name}", step - 1, value, wall)
    trace.segments.append((segment_start, step - 1))
    return trace


# ---- reinforcement learning ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RLSetup:
    updates: int = 200
    episodes_per_update: int = 8
    size: int = 7  # gridworld side; start top-left, goal bottom-right, -0.01 a move, +1 at the goal
    max_len: int = 60
    lr: float = 0.003
    entropy_coef: float = 0.01
    seed: int = 0


def train_rl(setup: RLSetup) -> Trace:
    """REINFORCE with a learned baseline on a gridworld; returns rise noisily (the shape RL users see)."""
    torch.set_num_threads(1)
    torch.manual_seed(setup.seed)
    rng = np.random.default_rng(setup.seed)
    n = setup.size
    policy = nn.Sequential(nn.Linear(2 * n, 32), nn.Tanh(), nn.Linear(32, 4))
    value = nn.Sequential(nn.Linear(2 * n, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = torch.optim.Adam([*policy.parameters(), *value.parameters()], lr=setup.lr)
    moves = np.array([(0, 1), (1, 0), (0, -1), (-1, 0)])
    trace = Trace(steps_per_epoch=setup.episodes_per_update * setup.max_len)
    start = time.perf_counter()
    env_steps = 0
    for _update in range(setup.updates):
        obs_all, act_all, ret_all, returns, lengths = [], [], [], [], []
        for _ in range(setup.episodes_per_update):
            pos = np.zeros(2, dtype=np.int64)
            obs, acts, rewards = [], [], []
            for _t in range(setup.max_len):
                o = np.zeros(2 * n, dtype=np.float32)
                o[pos[0]], o[n + pos[1]] = 1.0, 1.0
                with torch.no_grad():
                    probs = F.softmax(policy(torch.from_numpy(o)), -1).numpy().astype(np.float64)
                a = int(rng.choice(4, p=probs / probs.sum()))
                pos = np.clip(pos + moves[a], 0, n - 1)
                done = bool((pos == n - 1).all())
                obs.append(o)
                acts.append(a)
                rewards.append(1.0 if done else -0.01)
                if done:
                    break
            g = np.cumsum(rewards[::-1])[::-1]
            obs_all += obs
            act_all += acts
            ret_all += list(g)
            returns.append(sum(rewards))
            lengths.append(len(rewards))
        env_steps += sum(lengths)
        obs_t = torch.from_numpy(np.stack(obs_all))
        act_t = torch.tensor(act_all)
        ret_t = torch.tensor(ret_all, dtype=torch.float32)
        v = value(obs_t).squeeze(-1)
        adv = ret_t - v.detach()
        logp = F.log_softmax(policy(obs_t), -1)
        entropy = -(logp.exp() * logp).sum(-1).mean()
        policy_loss = -(logp[torch.arange(len(act_all)), act_t] * adv).mean()
        value_loss = F.mse_loss(v, ret_t)
        loss = policy_loss + 0.5 * value_loss - setup.entropy_coef * entropy
        opt.zero_grad()
        loss.backward()
        opt.step()
        explained = 1.0 - float(torch.var(ret_t - v.detach()) / torch.var(ret_t).clamp_min(1e-8))
        wall = time.perf_counter() - start
        trace.log("return", env_steps, float(np.mean(returns)), wall)
        trace.log("ep_len", env_steps, float(np.mean(lengths)), wall)
        trace.log("loss", env_steps, float(loss.detach()), wall)
        trace.log("policy_loss", env_steps, float(policy_loss.detach()), wall)
        trace.log("value_loss", env_steps, float(value_loss.detach()), wall)
        trace.log("entropy", env_steps, float(entropy.detach()), wall)
        trace.log("explained_variance", env_steps, explained, wall)
        trace.log("lr", env_steps, setup.lr, wall)
    trace.segments.append((0, env_steps))
    return trace
