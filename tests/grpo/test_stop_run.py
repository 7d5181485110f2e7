"""grpo.loop.StopRun: a step (or an evaluation) that cannot finish stops the loop after a checkpoint of the
iterations done, with the reason in ``LoopResult.error``; the iterations before it ran and nothing after it."""

from grpo.loop import StopRun, run_loop


def _loop(fail_step=None, fail_eval=None):
    done, saves, evals = [], [], []

    def step(phase):
        if len(done) + 1 == fail_step:
            raise StopRun("reward server http://127.0.0.1:9 failed")
        done.append(len(done) + 1)
        return {"it": float(len(done))}

    def evaluate(i):
        if i == fail_eval:
            raise StopRun("reward server down in the evaluation")
        evals.append(i)

    res = run_loop(step, 0, 6, save=lambda: saves.append(len(done)), save_every=2, evaluate=evaluate, eval_every=2,
                   progress=False)
    return res, done, saves, evals


def test_a_failed_step_saves_the_iterations_done_and_stops():
    res, done, saves, evals = _loop(fail_step=4)
    assert done == [1, 2, 3] and saves == [2, 3] and evals == [2]
    assert res.error == res.stopped == "reward server http://127.0.0.1:9 failed" and res.last == {"it": 3.0}


def test_a_failed_evaluation_saves_the_finished_iteration_and_stops():
    res, done, saves, evals = _loop(fail_eval=4)
    assert done == [1, 2, 3, 4] and saves == [2, 4] and evals == [2]
    assert res.error == "reward server down in the evaluation"


def test_no_failure_runs_to_the_end():
    res, done, saves, evals = _loop()
    assert done == [1, 2, 3, 4, 5, 6] and res.error is None and res.stopped is None and saves == [2, 4, 6]
