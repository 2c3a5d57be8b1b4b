"""What a user typed never rewrites the card: run names, file names and command lines with code fences, newlines,
headings, links or HTML stay literal; local data folders never reach the card's metadata."""

from __future__ import annotations

import json
import re

import yaml

from compact_bert.model_cards import build_model_card
from compact_bert.model_cards.model_card import code, code_block, plain_text
from compact_bert.modeling import AUTO_CLASSES_BY_CONFIG
from tests.conftest import tiny_configs

INJECTION = "x\n```\n# Injected heading\n[click](https://evil.example) <script>alert(1)</script>\n```"


def _folder(tmp_path, name: str, summary: dict):
    folder = tmp_path / name
    config = tiny_configs()["minimoe"]
    AUTO_CLASSES_BY_CONFIG[type(config)]["AutoModel"](config).save_pretrained(folder)
    (folder / "run_summary.json").write_text(json.dumps(summary))
    return folder


def _outside_code(card: str) -> str:
    """The card's Markdown without its fenced blocks and inline code spans."""
    text = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1\s*$", "", card)
    return re.sub(r"(`+)(?:(?!\1).)*?\1", "", text)


def test_user_strings_stay_literal(tmp_path):
    summary = {
        "command_line": f"compact-bert distill minimoe --run_name '{INJECTION}'",
        "teacher": "all-MiniLM-L6-v2",
        "data": {"train_file": f"/data/{INJECTION.replace(chr(10), ' ')}.tsv", "task_name": "my task"},
        "eval_accuracy": 0.5,
    }
    card = str(build_model_card(_folder(tmp_path, "model", summary), repo_id="user/model"))
    body = card.split("---", 2)[2]
    outside = _outside_code(body)
    assert (
        "# Injected heading" not in outside and "<script>" not in outside and "](https://evil.example)" not in outside
    )
    assert "````bash\ncompact-bert distill minimoe" in body  # a fence longer than the one in the command
    fences = re.findall(r"(?m)^(`{3,})", body)
    assert len(fences) % 2 == 0  # every block that opens also closes


def test_local_dataset_folder_is_named_by_its_folder_name_and_never_in_metadata(tmp_path):
    local = tmp_path / "home" / "alice" / "private_customer_reviews"
    local.mkdir(parents=True)
    summary = {"data": {"dataset_name": str(local), "corpus": []}, "teacher": "all-MiniLM-L6-v2", "eval_loss": 1.0}
    card = str(build_model_card(_folder(tmp_path, "student", summary)))
    metadata = yaml.safe_load(card.split("---")[1])
    assert str(local) not in card and "/home/alice" not in card
    assert "datasets" not in metadata
    assert "private_customer_reviews (local)" in card


def test_escaping_helpers():
    assert code("a`b") == "``a`b``" and code("`x`") == "`` `x` ``" and code("a\nb") == "`a b`"
    assert code_block("```\nx", "bash").startswith("````bash\n") and code_block("```\nx").endswith("\n````")
    assert plain_text("# title <b>[x](y)</b>") == "\\# title &lt;b&gt;\\[x\\]\\(y\\)&lt;/b&gt;"


def test_a_hand_edited_card_is_kept_unless_forced(tmp_path):
    """compact-bert marks the cards it writes; a rewrite (benchmark --write_latency, push) of a card a person edited
    since is refused without --force, before anything is measured or uploaded."""
    import pytest
    import transformers

    from compact_bert.cli.main import main
    from compact_bert.model_cards.model_card import card_was_edited, write_model_card
    from tests.conftest import tiny_configs

    folder = tmp_path / "model"
    transformers.AutoModel.from_config(tiny_configs()["minimoe"]).save_pretrained(folder)
    card = write_model_card(folder)
    assert not card_was_edited(card)
    card.write_text(card.read_text().replace("## Architecture", "## Architecture\n\nMy own note."))
    assert card_was_edited(card)
    with pytest.raises(SystemExit, match=r"--write_latency: .*README\.md was edited .*--force"):
        main(["benchmark", str(folder), "--write_latency", "--runtimes", "eager", "--rounds", "1"])
    from compact_bert.jobs.push import print_upload_listing

    with pytest.raises(SystemExit, match=r"push: .*README\.md was edited .*--keep-card .*--force"):
        print_upload_listing(folder, "user/model", dry_run=False)  # push's step before any upload
    assert "My own note." in card.read_text()
    assert (
        main(
            [
                "benchmark",
                str(folder),
                "--write_latency",
                "--force",
                "--runtimes",
                "eager",
                "--rounds",
                "1",
                "--sequence_lengths",
                "16",
            ]
        )
        == 0
    )
    assert "My own note." not in card.read_text() and not card_was_edited(card)
