"""A test helper for LIBERO-Spatial task 0: put the black bowl just above the plate by hand (the task's BDDL goal then
holds once it settles)."""

import numpy as np


def place_bowl_over_plate(env, height: float = 0.03) -> None:
    """Move the bowl's free joint to ``height`` m above the plate in ``env`` (a ``sims`` LIBERO env) and re-run the
    simulator's forward pass; the caller steps or snapshots the state."""
    e = env._env.env
    bowl, plate = (e.objects_dict[n] for n in e.obj_of_interest)
    q = e.sim.data.get_joint_qpos(bowl.joints[-1]).copy()
    q[:3] = e.sim.data.body_xpos[e.sim.model.body_name2id(plate.root_body)] + np.array([0.0, 0.0, height])
    e.sim.data.set_joint_qpos(bowl.joints[-1], q)
    e.sim.forward()
