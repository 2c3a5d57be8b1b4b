"""The student-selection recipe's candidates: every one's flags fill in and parse as `compact-bert finetune` flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compact_bert.cli import finetune_command
from examples.student_selection import CANDIDATES, candidate_flags


@pytest.mark.parametrize("name", list(CANDIDATES))
def test_every_candidates_flags_fill_in_and_parse(name, tmp_path):
    """The split candidate's JSON override once crashed the recipe (``str.format`` read its braces as fields)."""
    model, flags = CANDIDATES[name]
    (tmp_path / "teacher").mkdir()
    filled = candidate_flags(flags, tmp_path / "teacher", "all-MiniLM-L6-v2")
    assert "{teacher}" not in " ".join(filled) and "{pretrained}" not in " ".join(filled)
    if "--model_overrides" in filled:
        json.loads(filled[filled.index("--model_overrides") + 1])
    train = Path(__file__).parents[2] / "finetuning" / "sst2_slice" / "train.tsv"
    arguments = ["--model_name_or_path", model, *filled, "--task_name", "sst2", "--train_file", str(train)]
    finetune_command.parse_finetune_arguments([*arguments, "--output_dir", str(tmp_path / "out")])
