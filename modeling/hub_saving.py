"""Saving that writes the Hub remote code before anything is uploaded.

transformers' ``save_pretrained(..., push_to_hub=True)`` uploads from inside its own body, so files a subclass
writes after ``super().save_pretrained`` (our remote code and the ``auto_map`` in ``config.json``) would miss
the commit and the pushed repo would not load. ``push_to_hub`` itself saves into a folder and uploads after
``save_pretrained`` returns, on both transformers lines (4.57: a temporary or the working folder, uploading files
modified since the save started; 5.x: a temporary folder, uploading all of it), so it only needs
``save_pretrained`` to write everything.

This module is package-only: the remote-code bundler drops ``SavesRemoteCode`` from the bases of the shipped
classes, whose saving goes through transformers' own custom-code copying. Model code must not use anything here
but that base.
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import create_repo
from transformers.utils.hub import create_and_tag_model_card

from .remote_code import write_remote_code

__all__ = ["SavesRemoteCode"]

# The keyword arguments transformers' ``save_pretrained`` hands to its push (4.57 and 5.x) plus the two its
# ``push_to_hub`` adds (``revision``, ``commit_description``); none of them affects what is written to disk.
_PUSH_ARGUMENTS = ("repo_id", "commit_message", "commit_description", "private", "create_pr", "revision")


class SavesRemoteCode:
    """Mixin placed before ``PreTrainedModel``: save with transformers, add the remote code, then push.

    Accepts the push keywords of transformers' ``save_pretrained`` on both lines: ``repo_id`` (default: the
    folder's name), ``commit_message``, ``private``, ``token``, ``create_pr``, and, as ``push_to_hub`` does,
    ``revision`` and ``commit_description``. The upload reuses ``PushToHubMixin``'s own helpers, so the commit
    holds what transformers would push (the files this save wrote or rewrote, and the model card).
    """

    def save_pretrained(self, save_directory, *args, push_to_hub: bool = False, **kwargs) -> None:
        if push_to_hub and kwargs.get("distributed_checkpoint"):
            raise ValueError(
                "`push_to_hub=True` with `distributed_checkpoint=True` is not supported for compact-bert models: "
                "save the distributed checkpoint, consolidate it, then push the consolidated model."
            )
        push_arguments = {name: kwargs.pop(name) for name in _PUSH_ARGUMENTS if name in kwargs}
        # ``is_main_process`` is the first positional parameter of ``save_pretrained`` on both lines.
        is_main_process = args[0] if args else kwargs.get("is_main_process", True)
        should_save = getattr(self, "should_save_on_this_rank", None)  # 5.x: also rank 0 of torch.distributed
        writes_here = should_save(is_main_process) if should_save is not None else is_main_process
        token = kwargs.get("token")

        if push_to_hub and writes_here:
            # Created before saving, as transformers does, so that a bad repo id or token fails before a long save.
            repo_id = create_repo(
                push_arguments.get("repo_id", Path(save_directory).name),
                private=push_arguments.get("private"),
                token=token,
                exist_ok=True,
            ).repo_id
            save_directory_exists = Path(save_directory).is_dir()
            files_timestamps = self._get_files_timestamps(save_directory) if save_directory_exists else {}

        super().save_pretrained(save_directory, *args, push_to_hub=False, **kwargs)
        if not writes_here:
            return
        write_remote_code(type(self), save_directory)
        if push_to_hub:
            model_card = create_and_tag_model_card(repo_id, self.model_tags, token=token)
            model_card.save(Path(save_directory) / "README.md")
            self._upload_modified_files(
                save_directory,
                repo_id,
                files_timestamps,
                commit_message=push_arguments.get("commit_message"),
                token=token,
                create_pr=push_arguments.get("create_pr", False),
                revision=push_arguments.get("revision"),
                commit_description=push_arguments.get("commit_description"),
            )
