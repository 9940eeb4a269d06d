"""`mssr-hf train` that can stop itself at a chosen point, for tests/test_kill.py to `kill -9` it there.

python tests/scripts/killable_train.py FLAG PAUSE CONFIG.yaml [--field value ...]

PAUSE is ``none`` or ``STAGE:EVENT:STEP``: in the trainer of the stage whose folder name starts with STAGE, when the
callback EVENT fires at global step STEP, the process writes FLAG and sleeps until it is killed. Events:
``on_save`` (the parent trainer has written checkpoint-STEP; MSSRTrainer's replay state and completion record come
after this callback), ``on_step_begin`` (checkpoint-STEP is complete, step STEP + 1 has not started),
``on_train_end`` (the stage has trained; its evaluation and saving come next).
"""

import sys
import time
from pathlib import Path

from transformers import TrainerCallback

from mssr_hf.cli import build_runner, parse_train_args


class PauseAt(TrainerCallback):
    def __init__(self, stage: str, event: str, step: int, flag: Path):
        self.stage, self.event, self.step, self.flag = stage, event, step, flag

    def _pause(self, event, args, state):
        if event == self.event and f"/{self.stage}" in args.output_dir and state.global_step == self.step:
            self.flag.write_text(f"{self.stage}:{event}:{self.step}")
            while True:
                time.sleep(1)

    def on_save(self, args, state, control, **kwargs):
        self._pause("on_save", args, state)

    def on_step_begin(self, args, state, control, **kwargs):
        self._pause("on_step_begin", args, state)

    def on_train_end(self, args, state, control, **kwargs):
        self._pause("on_train_end", args, state)


def main(flag: str, pause: str, argv: list[str]) -> None:
    runner = build_runner(*parse_train_args(argv))
    if pause != "none":
        stage, event, step = pause.split(":")
        runner.callbacks.append(PauseAt(stage, event, int(step), Path(flag)))
    runner.run()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
