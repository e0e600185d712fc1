"""Tag roles: whatever framework wrote the tags, the engine knows which curve is the loss, the lr, the grad norm."""

from __future__ import annotations

import pytest

from tbtriage.analysis.config import Config, ConfigError, load_config
from tbtriage.analysis.roles import assign_roles, pair_train_val, primary_tags, quantity_key, tag_phase

CONVENTIONS = {
    # PyTorch SummaryWriter examples
    "Loss/train": ("train_loss", -1),
    "Loss/test": ("val_loss", -1),
    "Accuracy/val": ("metric", 1),
    # Lightning
    "train_loss_step": ("train_loss", -1),
    "val_loss_epoch": ("val_loss", -1),
    "lr-AdamW": ("lr", 0),
    "lr-SGD-momentum": ("momentum", 0),
    "epoch": ("epoch", 0),
    # HF Trainer
    "train/loss": ("train_loss", -1),
    "eval/loss": ("val_loss", -1),
    "train/learning_rate": ("lr", 0),
    "train/grad_norm": ("grad_norm", 0),
    "eval/accuracy": ("metric", 1),
    "train/epoch": ("epoch", 0),
    "train/train_samples_per_second": ("throughput", 1),
    # Keras (in the train/ sibling run)
    "epoch_loss": ("train_loss", -1),
    "epoch_accuracy": ("metric", 1),
    "epoch_learning_rate": ("lr", 0),
    "epoch_grad_norm": ("grad_norm", 0),  # the global norm per epoch, not a layer called "epoch"
    # timm
    "eval_top1": ("metric", 1),
    "eval_top5": ("metric", 1),
    # mmengine / detectron2
    "val/bbox_mAP": ("metric", 1),
    "grad_norm": ("grad_norm", 0),
    "data_time": ("data_time", -1),
    "time": ("step_time", -1),
    "bbox/AP50": ("metric", 1),
    "memory": ("gpu_mem", 0),
    # ultralytics
    "metrics/mAP50(B)": ("metric", 1),
    "metrics/mAP50-95(B)": ("metric", 1),
    "lr/pg0": ("lr", 0),
    "metrics/precision(B)": ("metric", 1),
    # nvitop's resource collector, ignite's GpuInfo
    "resources/gpu:0/gpu_utilization (%)/mean": ("gpu_util", 1),
    "resources/gpu:0/memory_used (MiB)/mean": ("gpu_mem", 0),
    "training/gpu:0 util(%)": ("gpu_util", 1),
    # fairseq
    "gnorm": ("grad_norm", 0),
    "loss_scale": ("loss_scale", 0),
    "wps": ("throughput", 1),
    # plain names
    "acc": ("metric", 1),
    "val_acc": ("metric", 1),
    "perplexity": ("metric", -1),
    "wer": ("metric", -1),
    "bleu": ("metric", 1),
    "f1": ("metric", 1),
    "top1_err": ("metric", -1),
    "valloss": ("val_loss", -1),
    # instrumentation
    "grad_norm/layer1.weight": ("grad_norm_layer", 0),
    "gradients/conv1": ("grad_norm_layer", 0),
    "grad_2.0_norm_total": ("grad_norm", 0),
    "weight_norm/fc": ("weight_norm", 0),
    "act/relu1_zero_frac": ("activation_zero_frac", 0),
    "grad_scaler/scale": ("loss_scale", 0),
    "amp/grad_scale": ("loss_scale", 0),  # GradScaler's scale under its own name: a scale, not a layer's norm
    "timing/fetch_s": ("data_time", -1),  # a unit suffix on the time spent waiting for data
    "sys/dataloader_wait_ms": ("data_time", -1),
    # names no framework prescribes (the held-out runs of issue 9)
    "Loss/train_step": ("train_loss", -1),
    "Loss/valid_epoch": ("val_loss", -1),
    "metrics/val_top1": ("metric", 1),
    "opt/lr_group0": ("lr", 0),
    "grads/total_norm": ("grad_norm", 0),
    "objective/holdout": ("val_loss", -1),
    "score/holdout_acc": ("metric", 1),
    "gradient/global_norm": ("grad_norm", 0),
    "perf/step_time": ("step_time", -1),
    "perf/data_time": ("data_time", -1),
    "gpu/util": ("gpu_util", 1),
    "DeviceStatsMonitor.on_train_batch_start/allocated_bytes.all.current": ("gpu_mem", 0),
    "perf/iter_s": ("step_time", -1),  # a unit suffix: seconds per iteration
    # stable-baselines3 and plain RL loops
    "rollout/ep_rew_mean": ("metric", 1),
    "episode/Return": ("metric", 1),
    "train/explained_variance": ("metric", 1),
    "rollout/ep_len_mean": ("metric", 0),  # shorter or longer is better depending on the task
    "episode/Length": ("metric", 0),
    # series that describe a run without judging it
    "eval/runtime": ("context", 0),
    "train/train_runtime": ("context", 0),
    "eta_seconds": ("context", 0),
    "policy/entropy": ("context", 0),
    "hp_metric": ("context", 0),
}


@pytest.mark.parametrize("tag,expected", sorted(CONVENTIONS.items()))
def test_every_framework_convention_gets_its_role(tag, expected):
    assert assign_roles([tag])[tag] == expected


@pytest.mark.parametrize(
    "tag",
    [
        "resources/host/cpu_percent (%)/mean",  # host, not the accelerator
        "resources/gpu:0/power_usage (W)/mean",  # power is not utilisation
        "resources/gpu:0/memory_free (MiB)/mean",  # capacity, not usage
        "weight_decay",
        "loss_weight/cls",
        "train/grad_penalty",
        "my_custom_counter",
        "theta",  # not an ETA
    ],
)
def test_tags_that_are_not_what_their_words_suggest_stay_unknown(tag):
    assert assign_roles([tag])[tag] == (None, 0)


def test_a_multi_task_run_tells_loss_terms_from_the_total():
    roles = assign_roles(["total_loss", "loss_cls", "loss_box_reg", "loss_rpn_cls", "lr"])
    assert roles["total_loss"] == ("train_loss", -1)
    assert {roles[t][0] for t in ("loss_cls", "loss_box_reg", "loss_rpn_cls")} == {"loss_component"}


def test_a_single_qualified_loss_is_the_total_but_two_without_a_total_are_terms():
    assert assign_roles(["train/nll_loss", "val/nll_loss"])["train/nll_loss"] == ("train_loss", -1)
    ultralytics = assign_roles(["train/box_loss", "train/cls_loss", "val/box_loss", "val/cls_loss"])
    assert {r for r, _ in ultralytics.values()} == {"loss_component"}
    assert primary_tags(ultralytics).train_loss in ("train/box_loss", "train/cls_loss")


def test_an_rl_objectives_value_loss_is_one_of_its_terms_never_the_training_loss():
    sb3 = assign_roles(["train/loss", "train/value_loss", "train/policy_gradient_loss", "train/entropy_loss"])
    assert sb3["train/loss"] == ("train_loss", -1)
    assert {sb3[t] for t in ("train/value_loss", "train/policy_gradient_loss", "train/entropy_loss")} == {
        ("loss_component", -1)
    }
    # Without a total, the terms of an RL objective are not promoted to the run's loss either.
    plain = assign_roles(["loss/policy", "loss/value", "episode/Return"])
    assert plain["loss/value"] == ("loss_component", -1)
    assert primary_tags(plain).train_loss is None and primary_tags(plain).val_metric == "episode/Return"
    # Alone, `loss/value` is still the value of the loss.
    assert assign_roles(["loss/value"])["loss/value"] == ("train_loss", -1)


def test_keras_validation_sibling_run_makes_its_epoch_loss_a_validation_loss():
    roles = assign_roles(["epoch_loss", "epoch_accuracy"], run_name="mnist_cnn/validation")
    assert roles["epoch_loss"] == ("val_loss", -1)
    assert tag_phase("epoch_accuracy", "mnist_cnn/validation") == "val"
    assert assign_roles(["epoch_loss"], run_name="mnist_cnn/train")["epoch_loss"] == ("train_loss", -1)


def test_train_and_validation_series_of_the_same_quantity_are_paired():
    pytorch = assign_roles(["Loss/train", "Loss/test", "Accuracy/train", "Accuracy/val"])
    assert sorted(pair_train_val(pytorch)) == [("Accuracy/train", "Accuracy/val"), ("Loss/train", "Loss/test")]
    lightning = assign_roles(["train_loss_step", "train_loss_epoch", "val_loss", "val_acc"])
    # The most sampled train series wins; a validation metric without a train twin stays unpaired.
    assert pair_train_val(lightning, points={"train_loss_step": 1000, "train_loss_epoch": 10}) == [
        ("train_loss_step", "val_loss")
    ]
    assert quantity_key("val_loss_epoch") == quantity_key("train_loss") == "loss"


def test_a_lone_train_loss_and_lone_validation_loss_pair_even_with_unrelated_names():
    roles = assign_roles(["loss", "eval_nll"])
    assert pair_train_val(roles) == [("loss", "eval_nll")]


def test_headline_series_are_the_main_ones():
    roles = assign_roles(
        [
            "train/loss",
            "eval/loss",
            "eval_top5",
            "eval_top1",
            "lr/pg1",
            "lr/pg0",
            "train/grad_norm",
            "grad_norm/layer1.weight",
        ]
    )
    primary = primary_tags(roles, points={"train/loss": 100})
    assert (primary.train_loss, primary.val_loss, primary.val_metric, primary.lr, primary.grad_norm) == (
        "train/loss",
        "eval/loss",
        "eval_top1",
        "lr/pg0",
        "train/grad_norm",
    )


def test_user_roles_from_the_config_win_over_the_built_in_rules(tmp_path):
    config_file = tmp_path / "config.toml"
    config_file.write_text('[roles]\n"^objective$" = "train_loss"\n"^acc$" = "none"\n"my_score" = "metric+"\n')
    config = load_config(config_file)
    roles = assign_roles(["objective", "acc", "my_score", "loss"], config)
    assert roles == {
        "objective": ("train_loss", -1),
        "acc": (None, 0),
        "my_score": ("metric", 1),
        "loss": ("train_loss", -1),
    }


def test_a_missing_default_config_is_fine_and_gives_the_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert load_config() == Config()


def test_the_default_config_lives_under_xdg_config_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "tbtriage").mkdir()
    (tmp_path / "tbtriage" / "config.toml").write_text('theme = "light"\n[keys]\nquit = "Q"\n[llm]\nthreads = 4\n')
    config = load_config()
    assert (config.theme, config.keys, config.llm) == ("light", {"quit": "Q"}, {"threads": 4})


@pytest.mark.parametrize(
    "text,problem",
    [
        ("[roles\n", "invalid TOML"),
        ('[roles]\n"(" = "lr"\n', "not a valid regular expression"),
        ('[roles]\n"x" = "banana"\n', "unknown role"),
        ("roles = 3\n", "must be a table"),
        ("theme = 3\n", "theme must be a string"),
    ],
)
def test_a_broken_config_raises_one_clear_line_naming_the_file(tmp_path, text, problem):
    config_file = tmp_path / "config.toml"
    config_file.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_config(config_file)
    message = str(error.value)
    assert str(config_file) in message and problem in message and "\n" not in message


def test_an_explicit_config_file_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.toml")
