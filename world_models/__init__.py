"""world_models: latent encoders, inverse dynamics, an action-conditioned video world model, its data and the
world-model env -- a library: it imports no frontend and runs no RL loop.

* :mod:`world_models.encoders` -- ``encode(video[B, T, C, H, W]) -> [B, D]`` (+ per frame): built-in TCN
  video encoder, DINOv2 and V-JEPA 2 wrappers (transformers, local weights).
* :mod:`world_models.idm` -- inverse-dynamics model (frames window -> action), EVA's decoder.
* :mod:`world_models.video_wm` -- flow-matching video world model (Wan transformer) with a success head.
* :mod:`world_models.data` -- SANS-style simulator data (successes, near-successes, failures, random),
  any policy's rollouts (an ``act`` callable), the proprio state model.
* :mod:`world_models.windows` -- the world model's training windows (``WindowBatch``; ``WindowSet``: cut per batch
  from the uint8 episodes) and the success head's per-frame samples (``FrameBatch``, ``FrameSamples``).
* :mod:`world_models.fit` -- fitting the world model, state model and IDM on simulator data, and reports against
  the simulator (what the World-VLA-Loop, ``vla_rl.wm_loop``, drives: ``vla-rl loop CONFIG``).
* :mod:`world_models.wm_env` -- the world model as a batched gymnasium ``VectorEnv`` and as a per-step
  ``sims``-style env registered in ``sims``' registry (``"wm/<task>"``) so ``vla_rl`` trains inside it unchanged.
* :mod:`world_models.eva_alignment` -- the EVA executability reward on the world model's predictions, its
  calibration and report (the RL run itself: ``diffusion_rl.align_world_model``).

Every model runs where its parameters are (``.to(device)``; the loop's ``device`` option): public methods take
inputs on any device and move them there; data and metrics stay in CPU RAM.
"""
