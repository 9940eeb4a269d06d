"""Every private upstream name and internal call order MSSRTrainer relies on, pinned in one place.

Checked against transformers 5.23.0 and trl 1.16.0 (``mssr_hf.mssr_trainer.TESTED_VERSIONS``). The rest of
MSSRTrainer uses public hooks only (``get_train_dataloader``, ``compute_loss``, ``log``, ``train`` and the callback
events ``on_step_end`` / ``on_save``). When an upgrade breaks a pin, the failing test names what to revisit.
"""

import inspect

import transformers
import trl
from transformers import Trainer
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import SFTTrainer

from mssr_hf.mssr_trainer import TESTED_VERSIONS, MSSRTrainer

VERSIONS = (
    f"installed transformers {transformers.__version__}, trl {trl.__version__}; pinned against transformers "
    f"{TESTED_VERSIONS['transformers']}, trl {TESTED_VERSIONS['trl']}"
)


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def source(function) -> str:
    return inspect.getsource(function)


def test_signature_columns_hook():
    """MSSRTrainer._set_signature_columns_if_needed appends the id column to ``self._signature_columns`` after the
    parent set it, so HF's unused-column removal keeps the ids."""
    assert parameters(SFTTrainer._set_signature_columns_if_needed) == ["self"], VERSIONS
    assert "self._signature_columns = " in source(SFTTrainer._set_signature_columns_if_needed), VERSIONS
    remove = source(Trainer._remove_unused_columns)
    assert "self._set_signature_columns_if_needed()" in remove and "self._signature_columns" in remove, VERSIONS


def test_train_sampler_hook():
    """get_train_dataloader (overridden: it builds the replay sampler first) hands ``_get_train_sampler`` to the
    loader factory as its sampler; MSSRTrainer's version returns the sampler already built. The training loop builds
    the loader through get_train_dataloader, also on resume."""
    assert parameters(Trainer._get_train_sampler) == ["self", "train_dataset"], VERSIONS
    assert parameters(Trainer.get_train_dataloader) == ["self"], VERSIONS
    assert "sampler_fn=self._get_train_sampler" in source(Trainer.get_train_dataloader), VERSIONS
    assert "sampler_fn(dataset)" in source(Trainer._get_dataloader), VERSIONS
    assert "self.get_train_dataloader()" in source(Trainer._inner_training_loop), VERSIONS


def test_prepare_dataset_for_the_replay_bank():
    """MSSRTrainer tokenizes a raw replay bank with the parent's own ``_prepare_dataset`` (the way the parent
    tokenized the task, with the formatting function it kept) unless the parent skips preparation."""
    assert parameters(SFTTrainer._prepare_dataset) == ["self", "dataset", "processing_class", "args", "packing",
                                                       "formatting_func", "dataset_name"], VERSIONS  # fmt: skip
    init = source(SFTTrainer.__init__)
    assert "self._formatting_func = formatting_func" in init and "self._skip_prepare_dataset = (" in init, VERSIONS


def test_prepare_inputs():
    """The ``loss`` baseline's probe forwards move their batches to the device with ``_prepare_inputs``."""
    assert parameters(Trainer._prepare_inputs) == ["self", "inputs"], VERSIONS


def test_fused_forward_in_compute_loss():
    """Per-sample losses come from the forward trl's compute_loss runs with ``fused_lm_head=True`` (its output has
    ``log_probs`` and ``label_mask``); MSSRTrainer raises at training time if that forward is missing."""
    loss = source(SFTTrainer.compute_loss)
    assert "fused_lm_head=True" in loss and "outputs.log_probs" in loss and "outputs.label_mask" in loss, VERSIONS


def test_on_save_follows_the_checkpoint_folder():
    """The replay state is written by an ``on_save`` callback into ``output_dir/checkpoint-N``: the parent must have
    written that folder just before it fires."""
    assert PREFIX_CHECKPOINT_DIR == "checkpoint", VERSIONS
    assert 'f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"' in source(Trainer._save_checkpoint), VERSIONS
    trainer_source = inspect.getsource(transformers.trainer)
    save = trainer_source.index("self._save_checkpoint(model, trial)")
    assert trainer_source.index("self.callback_handler.on_save(", save) - save < 200, VERSIONS


def test_epoch_and_summary_loss_after_a_resume():
    """MSSRTrainer's ``on_step_end`` sets ``state.epoch`` from the global step right after the parent set it (before
    the step is logged or saved); its ``log`` turns the summary ``train_loss``, the parent's mean over the steps of one
    ``train()`` call, into the mean over every logged step of the run."""
    trainer_source = inspect.getsource(transformers.trainer)
    set_epoch = trainer_source.index("self.state.epoch = epoch + (step + 1) / steps_in_epoch")
    step_end = trainer_source.index("self.callback_handler.on_step_end(", set_epoch)
    assert step_end - set_epoch < 100, VERSIONS
    assert trainer_source.index("self._maybe_log_save_evaluate(", step_end) - step_end < 200, VERSIONS
    assert "train_loss = self._total_loss_scalar / max(num_steps_trained, 0.001)" in trainer_source, VERSIONS
    assert 'metrics["train_loss"] = train_loss' in trainer_source, VERSIONS


def test_own_private_names_do_not_shadow_the_parents():
    """MSSRTrainer's private methods and attributes are its own: a parent attribute of the same name would be
    silently replaced. Only the two hooks above override on purpose."""
    overrides = {"_set_signature_columns_if_needed", "_get_train_sampler"}
    own = {name for name in vars(MSSRTrainer) if name.startswith("_") and not name.startswith("__")} - overrides
    own |= {"_stage_started", "_restored_sampler_state", "_resumed_losses"}  # instance attributes
    parents = inspect.getsource(transformers.trainer) + inspect.getsource(trl.trainer.sft_trainer)
    clashes = sorted(name for name in own if hasattr(SFTTrainer, name) or f"self.{name}" in parents)
    assert clashes == [], f"{clashes} exist upstream ({VERSIONS})"


def test_progress_callbacks_a_trainer_adds():
    """ContinualRunner(progress_label=...) removes the progress bar or log printer transformers adds to every trainer
    (mssr_hf.progress.StageProgressBar.replace_trainer_output): ``DEFAULT_PROGRESS_CALLBACK``, or ``PrinterCallback``
    with ``disable_tqdm``."""
    import transformers.trainer

    assert transformers.trainer.DEFAULT_PROGRESS_CALLBACK is not None, VERSIONS
    added = "self.add_callback(PrinterCallback if self.args.disable_tqdm else DEFAULT_PROGRESS_CALLBACK)"
    assert added in source(Trainer.__init__), VERSIONS
