"""Load saved folders in a fresh process where compact-bert cannot be imported: through ``trust_remote_code`` (the
compact-bert families), or as plain transformers folders with remote code refused (dense students are BERT)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

# The first lines of every child script: compact-bert cannot be imported after them.
BLOCK_COMPACT_BERT = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class BlockCompactBert(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "compact_bert" or name.startswith("compact_bert."):
                raise ModuleNotFoundError(f"{name} is blocked in this test")

    sys.meta_path.insert(0, BlockCompactBert())
    """
)

CHILD = BLOCK_COMPACT_BERT + textwrap.dedent(
    """
    import torch, transformers

    plain = sys.argv[2] == "plain"
    cases = json.load(open(sys.argv[1]))
    for case in cases:
        # A plain folder must load with remote code refused: no prompt, no code of the folder's run.
        model = getattr(transformers, case["auto_name"]).from_pretrained(case["folder"], trust_remote_code=not plain)
        model.eval()
        reference = torch.load(case["reference"])
        with torch.no_grad():
            output = getattr(model(**reference["inputs"]), case["output"])
        torch.testing.assert_close(output, reference["expected"])
        if "labels" in reference:  # a classifier's accuracy, recomputed here from its own predictions
            accuracy = float((output.argmax(-1) == reference["labels"]).double().mean())
            assert abs(accuracy - reference["accuracy"]) < 5e-5, (accuracy, reference["accuracy"])  # reported: 4 digits
        expected_module = "transformers.models." if plain else "transformers_modules"
        assert type(model).__module__.startswith(expected_module), type(model).__module__
    assert not any(name.startswith("compact_bert") for name in sys.modules)
    print("loaded", len(cases))
    """
)


def load_in_fresh_process(
    cases: list[dict],
    work_dir: Path,
    environment: dict[str, str] | None = None,
    python: str = sys.executable,
    plain: bool = False,
) -> None:
    """Each case: ``folder`` (or a repo id), ``auto_name``, ``output`` (field to compare) and ``reference`` (a
    torch.save of ``{"inputs": ..., "expected": ...}``, and for a classifier optionally ``labels`` and the
    ``accuracy`` its predictions must give). Fails unless every case loads and matches in one process
    of ``python`` (another interpreter, e.g. with the other transformers line, checks folders across lines).

    ``environment`` overrides the child's variables, e.g. to load by repo id from a test Hub (``HF_ENDPOINT``).
    ``plain``: the folders are transformers' own models, loaded with ``trust_remote_code=False``."""
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "cases.json").write_text(json.dumps(cases))
    (work_dir / "child.py").write_text(CHILD)
    environment = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_MODULES_CACHE": str(work_dir / "modules"),
        **(environment or {}),
    }
    environment.pop("PYTHONPATH", None)
    result = subprocess.run(
        [python, str(work_dir / "child.py"), str(work_dir / "cases.json"), "plain" if plain else "remote"],
        cwd=work_dir,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert f"loaded {len(cases)}" in result.stdout


def load_classifier_without_compact_bert(folder: Path, reference: Path, work_dir: Path) -> None:
    """``folder`` (a plain transformers classifier) loads with remote code refused and reproduces ``reference`` in
    a process without compact-bert — on this transformers line and, where ``COMPACT_BERT_OTHER_PYTHON`` names an
    interpreter of the other line, on that one too."""
    case = {
        "folder": str(folder),
        "auto_name": "AutoModelForSequenceClassification",
        "output": "logits",
        "reference": str(reference),
    }
    load_in_fresh_process([case], work_dir / "plain", plain=True)
    other_python = os.environ.get("COMPACT_BERT_OTHER_PYTHON")
    if other_python:
        load_in_fresh_process([case], work_dir / "plain-other-line", python=other_python, plain=True)
