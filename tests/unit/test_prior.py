from kvtune.bench.workload import Workload
from kvtune.launchers.llama_server import LlamaServerLauncher
from kvtune.tuner.prior import informed_start

W = Workload(concurrency=8, prompt_tokens=200, output_tokens=64)


def test_llama_server_informed_start_follows_the_seeds():
    knobs = LlamaServerLauncher(binary="/x", model_path="/m.gguf").default_knobs(W, 4)
    guess = informed_start(knobs, W)
    assert guess == {"parallel": 8, "ctx-per-slot": 512, "threads": 4, "batch-size": 2048,
                     "ubatch-size": 512, "flash-attn": "on", "cache-type-k": "f16",
                     "cache-type-v": "f16", "cont-batching": True}
    for k in knobs:  # every value is one the space allows
        if k.kind == "choices":
            assert guess[k.name] in k.choices


def test_informed_start_is_queued_after_the_baseline(tmp_path):
    from kvtune.launchers.base import Knob
    from kvtune.testing.fake_launcher import FakeLauncher
    from kvtune.tuner.build import open_tuner, prepare
    from kvtune.tuner.spec import StudySpec

    launcher = FakeLauncher(knobs=(Knob("parallel", "choices", choices=(1, 2, 4)),
                                   Knob("speed", "choices", choices=(1, 2))))
    spec = StudySpec(study="p", trials=2, workload=Workload(concurrency=2), startup_timeout_s=10).validate()
    tuner = open_tuner(prepare(spec, launcher=launcher, runs_dir=str(tmp_path)))
    queued = tuner.study.trials
    assert queued[0].user_attrs == {"baseline": True}
    assert queued[1].user_attrs == {"informed_start": True}
