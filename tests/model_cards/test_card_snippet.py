"""The card's loading snippet, run verbatim as a Hub user would: in a fresh process where compact-bert cannot be
imported, with a terminal on stdin (where transformers asks before running remote code), on the folder the main
job ships. Also what the shipped tokenizer files hold."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import time

from transformers import AutoTokenizer

from compact_bert.distillation.data import packaged_teacher_dir
from compact_bert.model_cards import build_model_card
from compact_bert.model_cards.model_card import tokenizer_type
from compact_bert.training.compat import LOAD_TIME_TOKENIZER_KEYS
from tests.remote_code_helpers import BLOCK_COMPACT_BERT

PROMPT = "Do you wish to run the custom code"


def _snippet(card_text: str) -> str:
    (code,) = re.findall(r"```python\n(.*?)```", card_text, flags=re.S)[:1]
    return code


def test_card_snippet_loads_model_and_tokenizer_without_any_prompt(main_job_run, tmp_path):
    _, finetuned = main_job_run
    code = _snippet(build_model_card(finetuned, repo_id=str(finetuned)).text)
    assert 'tokenizer_type="bert"' in code
    script = tmp_path / "user.py"
    script.write_text(
        BLOCK_COMPACT_BERT + code + "\nprint('LOADED', type(model).__name__, type(tokenizer).__name__)\n"
    )
    controller, terminal = pty.openpty()  # stdin is a terminal: transformers would prompt and wait 15 s there
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")}
    environment.pop("PYTHONPATH", None)
    started = time.perf_counter()
    try:
        result = subprocess.run(
            [sys.executable, str(script)],
            stdin=terminal,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=environment,
            timeout=300,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    elapsed = time.perf_counter() - started
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert PROMPT not in output and "to instantiate a model of type" not in output, output[-3000:]
    assert "LOADED MiniMoEForSequenceClassification" in result.stdout
    assert elapsed < 15, f"{elapsed:.1f} s: something waited for an answer"


def test_shipped_tokenizer_carries_no_load_time_settings_and_tokenizes_as_the_teacher(main_job_run):
    _, finetuned = main_job_run
    config = json.loads((finetuned / "tokenizer_config.json").read_text())
    assert not set(LOAD_TIME_TOKENIZER_KEYS) & set(config), config
    backend = json.loads((finetuned / "tokenizer.json").read_text())
    assert backend["truncation"] is None and backend["padding"] is None
    assert tokenizer_type(finetuned) == "bert"
    shipped, teacher = AutoTokenizer.from_pretrained(finetuned), AutoTokenizer.from_pretrained(packaged_teacher_dir())
    texts = ["A gripping, funny film.", "word " * 300, "Ünïcödé and punctuation?!"]
    for options in (
        {},
        {"truncation": True, "max_length": 16},
        {"padding": "max_length", "max_length": 24},
        {"padding": True},
    ):
        assert shipped(texts, **options)["input_ids"] == teacher(texts, **options)["input_ids"], options
