"""world_models: latent encoders, inverse dynamics, an action-conditioned video world model and the
World-VLA-Loop around it.

* :mod:`world_models.encoders` -- ``encode(video[B, T, C, H, W]) -> [B, D]`` (+ per frame): built-in TCN
  video encoder, DINOv2 and V-JEPA 2 wrappers (transformers, local weights).
* :mod:`world_models.idm` -- inverse-dynamics model (frames window -> action), EVA's decoder.
* :mod:`world_models.video_wm` -- flow-matching video world model (Wan transformer) with a success head.
* :mod:`world_models.data` -- SANS-style simulator data (successes, near-successes, failures, random),
  policy rollouts, training windows (``WindowSet``: cut per batch from the uint8 episodes), the proprio state model.
* :mod:`world_models.wm_env` -- the world model as a batched gymnasium ``VectorEnv`` and as a per-step
  ``sims``-style env registered in ``sims``' registry (``"wm/<task>"``) so ``vla_rl`` trains inside it unchanged.
* :mod:`world_models.loop` -- ``python -m world_models.loop configs/world_models/loop_reach.yaml``.
* :mod:`world_models.eva_alignment` -- RL of the world model with the EVA executability reward (diffusion_rl).

Every model runs where its parameters are (``.to(device)``; the loop's ``device`` option): public methods take
inputs on any device and move them there; data and metrics stay in CPU RAM.
"""
