"""vla_rl: GRPO post-training of vision-language-action policies on ``sims`` tasks.

Modules: ``tokenizer`` (offline word-level vocabulary), ``action_head`` (pi0-style flow-matching expert and
Gaussian head, log-probs through ``grpo.flow_sde``), ``policy`` (the built-in small VLA, LeRobot interface),
``policies`` (the TrainablePolicy interface, the kind/type factory, LeRobot's SmolVLA / pi0 in
``.venv-lerobot``), ``lerobot_dataset`` (SFT demos from a LeRobotDataset), ``deploy`` (a policy on a LeRobot robot),
``sft`` (behaviour cloning on a few demos),
``demos`` (scripted-expert recording, robomimic-style HDF5), ``rollout`` (group rollouts with action chunks,
held-out evaluation), ``srpo`` (self-referential progress reward, binary reward), ``trainer`` (config +
SFT -> GRPO loop), ``cli`` (``vla-rl``). Environments come from ``sims.make``.
"""
