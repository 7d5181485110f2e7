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
