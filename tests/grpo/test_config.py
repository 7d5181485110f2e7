import re
from dataclasses import dataclass, field
from typing import Literal, Optional

import pytest

from grpo.config import ConfigError, config_diff, config_to_dict, load_config, parse_overrides
from grpo.train_step import GRPOConfig


@dataclass
class Inner:
    lr: float = 1e-3
    steps: int = 10
    kind: Literal["a", "b"] = "a"
    splits: list[int] = field(default_factory=lambda: [1, 2])
    name: Optional[str] = None


@dataclass
class Outer:
    seed: int = 0
    inner: Inner = field(default_factory=Inner)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    weights: dict[str, float] = field(default_factory=dict)


def _yaml(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_load_and_override(tmp_path):
    p = _yaml(tmp_path, "seed: 3\ninner:\n  lr: 0.01\n  splits: [4, 5]\nweights: {pick: 1, ocr: 0.5}\n")
    cfg = load_config(Outer, p, ["inner.steps=7", "inner.lr=3e-4", "inner.kind=b", "grpo.group_size=4", "inner.name=x"])
    assert cfg.seed == 3 and cfg.inner.lr == 3e-4 and cfg.inner.steps == 7 and cfg.inner.kind == "b"
    assert cfg.inner.splits == [4, 5] and cfg.weights == {"pick": 1.0, "ocr": 0.5} and cfg.grpo.group_size == 4
    assert config_to_dict(cfg)["inner"]["splits"] == [4, 5]


def test_unknown_key_named_with_suggestion(tmp_path):
    p = _yaml(tmp_path, "inner:\n  lrr: 0.1\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'inner.lrr' \(did you mean 'lr'\?\)"):
        load_config(Outer, p)
    with pytest.raises(ConfigError, match="unknown config key 'sed'"):
        load_config(Outer, None, ["sed=1"])


def test_wrong_type_and_literal(tmp_path):
    with pytest.raises(ConfigError, match=r"'inner.steps' expects int, got 'ten'"):
        load_config(Outer, None, ["inner.steps=ten"])
    with pytest.raises(ConfigError, match=r"'inner.kind' expects one of 'a', 'b', got 'c'"):
        load_config(Outer, None, ["inner.kind=c"])
    with pytest.raises(ConfigError, match=r"'inner.splits\[1\]' expects int"):
        load_config(Outer, None, ["inner.splits=[1, x]"])
    with pytest.raises(ConfigError, match="'seed' expects int, got True"):
        load_config(Outer, None, ["seed=true"])
    with pytest.raises(ConfigError, match="group_size must be >= 2"):
        load_config(Outer, None, ["grpo.group_size=1"])


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="config file not found: .*nope.yaml"):
        load_config(Outer, tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(Outer, _yaml(tmp_path, "- 1\n- 2\n"))
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["seed"])


def test_missing_required_key():
    @dataclass
    class Req:
        path: str

    with pytest.raises(ConfigError, match="missing required config key 'path'"):
        load_config(Req)


def test_config_diff():
    a = config_to_dict(Outer())
    b = config_to_dict(load_config(Outer, None, ["inner.lr=0.5"]))
    assert config_diff(a, b) == ["inner.lr: 0.001 != 0.5"]


@dataclass
class Moded:
    mode: Literal["a", "b"] = "a"
    inner: Inner = field(default_factory=Inner)
    b_only: int = 1  # read only in mode b

    def inactive_keys(self) -> dict[str, str]:
        return {"b_only": "mode='a'", "inner.kind": "mode='a'"} if self.mode == "a" else {"inner": "mode='b'"}


def test_inactive_keys_refused_only_when_given(tmp_path):
    assert load_config(Moded).b_only == 1  # defaults are never refused
    with pytest.raises(ConfigError, match=r"config key 'b_only' does nothing with mode='a'"):
        load_config(Moded, None, ["b_only=2"])
    p = _yaml(tmp_path, "inner:\n  kind: b\n")
    with pytest.raises(ConfigError, match=r"c.yaml: config key 'inner.kind' does nothing with mode='a'"):
        load_config(Moded, p)
    assert load_config(Moded, None, ["mode=b", "b_only=3"]).b_only == 3
    with pytest.raises(ConfigError, match=r"'inner.lr' does nothing with mode='b'"):  # a section covers its keys
        load_config(Moded, None, ["mode=b", "inner.lr=0.1"])


def test_resume_ignores_inactive_keys():
    from grpo.config import check_resume_config

    saved = config_to_dict(Moded(b_only=5))  # an older run that still set the ignored key
    check_resume_config(saved, Moded(), "ckpt")
    with pytest.raises(ValueError, match="seed|mode"):
        check_resume_config(saved, Moded(mode="b"), "ckpt")


def test_resume_ignores_a_moved_run_dir_and_reports_in_one_line():
    from dataclasses import dataclass

    from grpo.config import check_resume_config

    @dataclass
    class Run:
        seed: int = 0
        output_dir: str = "runs/a"
        lr: float = 1e-3

    check_resume_config(config_to_dict(Run()), Run(output_dir="/elsewhere/a"), "ckpt")  # moved or copied: resumes
    with pytest.raises(ValueError) as e:
        check_resume_config(config_to_dict(Run()), Run(seed=1, lr=2e-3), "ckpt")
    msg = str(e.value)
    assert "\n" not in msg and "lr: 0.001 != 0.002" in msg and "seed: 0 != 1" in msg and "resume=false" in msg


def test_output_paths_expand_the_home_and_a_run_of_another_job_is_refused(tmp_path, monkeypatch):
    """``output_dir: ~/x`` is written where the checks read it, under the home (was: a directory named "~" in the
    working directory); a saved config with keys the class has not is another job's run, refused in one line."""
    from grpo.config import check_resume_config, foreign_keys

    @dataclass
    class Job:
        seed: int = 0
        output_dir: str = "runs/a"
        output: str = "enc.safetensors"
        inner: Inner = field(default_factory=Inner)

    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = load_config(Job, None, ["output_dir=~/runs/x", "output=~/enc.safetensors"])
    assert cfg.output_dir == str(tmp_path / "runs" / "x") and cfg.output == str(tmp_path / "enc.safetensors")
    assert load_config(Job, None, ["output_dir=runs/~x"]).output_dir == "runs/~x"  # only a leading ~ is the home's
    with pytest.raises(ConfigError, match=r"'output_dir'='~nosuchuser_bl/x': no home directory"):
        load_config(Job, None, ["output_dir=~nosuchuser_bl/x"])
    with pytest.raises(ConfigError, match=r"'inner.name' holds a NUL byte"):
        load_config(Job, _yaml(tmp_path, 'inner: {name: "a\\0b"}\n'))
    other = {"seed": 0, "env": {"tasks": []}, "inner": {"lr": 0.1, "hidden": 3}}
    assert foreign_keys(Job, other) == ["env", "inner.hidden"]
    with pytest.raises(ValueError) as e:
        check_resume_config(other, Job(), "ckpt")
    msg = str(e.value)
    assert "\n" not in msg and "not a Job run" in msg and "env, inner.hidden" in msg and "another output_dir" in msg


def test_non_finite_empty_and_range_errors_name_the_key(tmp_path):
    from grpo.config import require_at_least, require_positive

    with pytest.raises(ConfigError, match=r"'inner.lr' expects a finite number, got 'nan'"):
        load_config(Moded, None, ["inner.lr=nan"])
    with pytest.raises(ConfigError, match=r"c.yaml: the file is empty"):
        load_config(Moded, _yaml(tmp_path, ""))
    with pytest.raises(ConfigError, match=r"is a directory"):
        load_config(Moded, tmp_path)

    @dataclass
    class R:
        n: int = 1
        lr: float | None = 0.1

    with pytest.raises(ValueError, match=r"^x.n must be >= 1, got 0$"):
        require_at_least("x", R(n=0), n=1)
    with pytest.raises(ValueError, match=r"^x.lr must be > 0, got -0.1$"):
        require_positive("x", R(lr=-0.1), "lr")
    require_positive("x", R(lr=None), "lr")  # None means off


def test_branch_mode_refuses_flat_keys():
    from diffusion_rl.config import DiffusionRLConfig

    for key in ["grpo.group_size=4", "grpo.advantage=median", "grpo.std_mode=none", "train.use_tracker=true",
                "grpo.reward_weights={a: 1}"]:
        with pytest.raises(ConfigError, match=rf"'{key.split('=')[0]}' does nothing with branch.enabled=true"):
            load_config(DiffusionRLConfig, None, ["branch.enabled=true", key])
    load_config(DiffusionRLConfig, None, ["branch.enabled=false", "grpo.group_size=4", "branch.split_steps=[1]"])
    with pytest.raises(ConfigError, match=r"'train.nft_beta' does nothing with train.loss='grpo'"):
        load_config(DiffusionRLConfig, None, ["train.nft_beta=2"])
    load_config(DiffusionRLConfig, None, ["train.loss=nft", "grpo.clip_low=0.2"])  # toggling the objective is fine


def test_vla_mode_refuses_unused_keys():
    from vla_rl.config import VLARLConfig

    with pytest.raises(ConfigError, match=r"'rl.success_band' does nothing with rl.dynamic_sampling=false"):
        load_config(VLARLConfig, None, ["rl.dynamic_sampling=false", "rl.success_band=[0.1, 0.9]"])
    with pytest.raises(ConfigError, match=r"'grpo.reward_weights' does nothing with grpo.advantage='mean_std'"):
        load_config(VLARLConfig, None, ["grpo.reward_weights={success: 1.0}"])
    # switchable sections keep their settings: one YAML, two arms
    load_config(VLARLConfig, None, ["rl.reward=binary", "srpo.num_frames=4", "policy.gaussian.hidden=64"])


def test_tracker_settings_without_their_tracker_are_inactive_keys(tmp_path):
    """log.wandb_mode / log.mlflow_uri without their backend: refused by check_inactive_keys in every job's config
    (a nested log: section too), with the message of the other inactive keys, whatever value is given."""
    from diffusion_rl.config import DiffusionRLConfig
    from grpo.demo import ToyConfig
    from vla_rl.config import VLARLConfig
    from vla_rl.wm_loop import WorldLoopConfig

    for cls, log in ((DiffusionRLConfig, "log"), (VLARLConfig, "log"), (ToyConfig, "log"),
                     (WorldLoopConfig, "vla.log")):
        for key, value in (("wandb_mode", "offline"), ("wandb_mode", "auto"), ("mlflow_uri", "file:///tmp/x")):
            with pytest.raises(ConfigError, match=rf"^defaults \+ overrides: config key '{log}.{key}' does "
                               rf"nothing with {log}.backends=\['tensorboard'\] .*; remove it"):
                load_config(cls, None, [f"{log}.{key}={value}"])
    p = _yaml(tmp_path, "log:\n  backends: []\n  mlflow_uri: file:///tmp/x\n")
    with pytest.raises(ConfigError, match=r"c.yaml: config key 'log.mlflow_uri' does nothing with log.backends=\[\]"):
        load_config(ToyConfig, p)
    cfg = load_config(ToyConfig, None, ["log.backends=[wandb,mlflow]", "log.wandb_mode=offline",
                                        "log.mlflow_uri=file:///tmp/x"])  # with their trackers: taken
    assert (cfg.log.wandb_mode, cfg.log.mlflow_uri) == ("offline", "file:///tmp/x")


def test_config_help_lists_every_leaf():
    from grpo.config import config_help, format_config_help

    rows = {k: (t, d, h) for k, t, d, h in config_help(Moded)}
    assert set(rows) == {"mode", "inner.lr", "inner.steps", "inner.kind", "inner.splits", "inner.name", "b_only"}
    assert rows["b_only"] == ("int", "1", "read only in mode b")
    assert rows["inner.name"][0] == "str or None"
    assert re.search(r"^b_only +int = 1  # read only in mode b$", format_config_help(Moded), re.M)


def test_median_advantage_refuses_std_mode():
    from diffusion_rl.config import DiffusionRLConfig
    from vla_rl.config import VLARLConfig

    for cls in (DiffusionRLConfig, VLARLConfig):
        with pytest.raises(ConfigError, match=r"'grpo.std_mode' does nothing with grpo.advantage='median'"):
            load_config(cls, None, ["grpo.advantage=median", "grpo.std_mode=none"])
        load_config(cls, None, ["grpo.advantage=median_std", "grpo.std_mode=none"])


def test_every_shipped_recipe_loads():
    """Every YAML in configs/ loads into its config class (no unknown, mistyped or inactive key)."""
    from pathlib import Path

    from diffusion_rl.config import DiffusionRLConfig
    from grpo.demo import ToyConfig
    from vla_rl.config import VLARLConfig
    from vla_rl.wm_loop import WorldLoopConfig
    from world_models.progress_encoder import FitEncoderConfig

    root = Path(__file__).resolve().parents[2] / "configs"
    classes = {"diffusion": DiffusionRLConfig, "vla": VLARLConfig, "world_models": WorldLoopConfig, "grpo": ToyConfig}
    other_jobs = {"vla/fit_progress_encoder.yaml": FitEncoderConfig}  # vla-rl fit-encoder's config, not a training run
    seen = 0
    for sub, cls in classes.items():
        for f in sorted((root / sub).glob("*.yaml")):
            load_config(other_jobs.get(f"{sub}/{f.name}", cls), f)
            seen += 1
    assert seen >= 15


def test_every_config_field_has_a_help_line():
    """Each field of every job's config (nested sections included) has a one-line description for --help-config."""
    from diffusion_rl.config import DiffusionRLConfig
    from grpo.config import fields_without_help
    from grpo.demo import ToyConfig
    from vla_rl.config import VLARLConfig
    from vla_rl.wm_loop import WorldLoopConfig

    classes = (DiffusionRLConfig, VLARLConfig, WorldLoopConfig, ToyConfig)
    missing = [m for cls in classes for m in fields_without_help(cls)]
    assert not missing, f"config fields without a help line: {missing}"


def test_help_config_option_prints_every_key(capsys):
    from grpo.cli import ArgumentParser, add_config_help

    p = ArgumentParser(prog="job")
    p.add_argument("config")
    add_config_help(p, lambda: Moded)
    with pytest.raises(SystemExit) as e:
        p.parse_args(["--help-config"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "inner.lr" in out and re.search(r"^b_only +int = 1  # read only in mode b$", out, re.M)


def test_empty_mapping_override_clears_a_free_form_mapping(tmp_path):
    """``key={}`` replaces a free-form mapping (was: merged, a silent no-op: ``reward.kwargs={}`` kept the file's
    ``shape_width`` when switching shapes_flat.yaml to another reward); non-empty mappings still merge, and on a
    config section ``{}`` changes nothing."""
    p = _yaml(tmp_path, "inner:\n  lr: 0.01\nweights: {pick: 1, ocr: 0.5}\n")
    assert load_config(Outer, p, ["weights={}"]).weights == {}
    assert load_config(Outer, p, ["weights={}", "weights.clip=2"]).weights == {"clip": 2.0}
    assert load_config(Outer, p, ["weights={clip: 2}"]).weights == {"pick": 1.0, "ocr": 0.5, "clip": 2.0}
    cfg = load_config(Outer, p, ["inner={}", "weights.clip=2"])
    assert cfg.inner.lr == 0.01 and cfg.weights == {"pick": 1.0, "ocr": 0.5, "clip": 2.0}
    assert config_to_dict(load_config(Outer, p, ["weights={}"]))["weights"] == {}


def test_shapes_recipe_takes_another_reward_by_override():
    """The user's switch of configs/diffusion/shapes_flat.yaml to a reward with other arguments, by overrides only."""
    from diffusion_rl.trainer import DiffusionRLConfig

    over = ["reward.name=jpeg_compressibility", "reward.kwargs={}"]
    cfg = load_config(DiffusionRLConfig, "configs/diffusion/shapes_flat.yaml", over)
    assert cfg.reward.name == "jpeg_compressibility" and cfg.reward.kwargs == {}
