"""Randomized inputs for the data readers and the command line: whatever a user hands over, a
command either works or ends with exit status 1 and one ``compact-bert:`` line that is not an internal error —
never a traceback, never another exception.

The generator is this file's own, seeded, so a failure reproduces: each case prints its seed and input. Data files
are built from pieces real files are made of (headers, separators, labels, quotes, NUL bytes, a byte-order mark,
invalid UTF-8, CRLF, blank lines, very long fields) in every format ``finetune`` reads; argument lists mix real
flags with values of every kind. Training itself never starts: the command's work after parsing and reading is
replaced by a stub, so the test takes seconds.
"""

from __future__ import annotations

import json
import random

import pytest

from compact_bert.cli import finetune_command
from compact_bert.cli.main import main
from compact_bert.finetuning.data import FinetuneDataArguments, load_finetuning_data

CASES = 120
PIECES = [
    "sentence",
    "label",
    "tokens",
    "ner_tags",
    "sentence1",
    "sentence2",
    "\t",
    ",",
    ";",
    '"',
    "'",
    "\n",
    "\r\n",
    " ",
    "",
    "0",
    "1",
    "2",
    "-1",
    "0.5",
    "nan",
    "inf",
    "B-PER",
    "I-LOC",
    "O",
    "-DOCSTART- -X- O O",
    "a gripping film",
    "x" * 3000,
    "\x00",
    "\ufeff",
    "{",
    "}",
    "[",
    "]",
    ":",
    "null",
    "true",
    '{"sentence": "fine", "label": 1}',
    '{"sentence": null, "label": "pos"}',
]
INVALID_UTF8 = b"\xff\xfe\x80"
SUFFIXES = [".tsv", ".csv", ".json", ".jsonl", ".txt", ".tsv.gz", ""]


def _random_text(generator: random.Random) -> bytes:
    text = "".join(generator.choice(PIECES) for _ in range(generator.randint(0, 60)))
    data = text.encode("utf-8")
    if generator.random() < 0.1:
        position = generator.randint(0, len(data))
        data = data[:position] + INVALID_UTF8 + data[position:]
    if generator.random() < 0.3:  # a plausible header and rows, then noise
        header = generator.choice(["sentence\tlabel\n", "sentence,label\n", "sentence1\tsentence2\tlabel\n", ""])
        rows = "".join(f"{generator.choice(PIECES)}\t{generator.choice(PIECES)}\n" for _ in range(5))
        data = (header + rows).encode("utf-8") + data
    return data


def _write(path, data: bytes):
    if path.name.endswith(".gz"):
        import gzip

        data = gzip.compress(data)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("seed", range(CASES))
def test_the_data_readers_read_a_file_or_name_what_is_wrong_with_it(tmp_path, seed):
    """``finetune`` turns ValueError / FileNotFoundError from the readers into its one-line message: nothing else
    may escape them."""
    generator = random.Random(seed)
    suffix = generator.choice(SUFFIXES)
    train = _write(tmp_path / f"train{suffix}", _random_text(generator))
    task = generator.choice([None, "sst2", "stsb", "ner", "mrpc"])
    fields = {"train_file": str(train), "task_name": task}
    if generator.random() < 0.5:
        fields["validation_file"] = str(_write(tmp_path / f"dev{suffix}", _random_text(generator)))
    if generator.random() < 0.3:
        fields["text_columns"] = generator.choice(["sentence", "a,b", "", "sentence1,sentence2"])
    try:
        arguments = FinetuneDataArguments(**fields)
        load_finetuning_data(arguments)
    except (ValueError, FileNotFoundError):
        return
    except Exception as error:  # the point of the test: nothing else may escape
        pytest.fail(f"seed {seed}, {fields}, {train.read_bytes()[:300]!r}: {type(error).__name__}: {error}")


FLAGS = {
    "--model_name_or_path": ["minilm-3l-384h", "no-such-preset", "", "/dev/null", "all-MiniLM-L6-v2"],
    "--task_name": ["sst2", "ner", "stsb", "bogus", ""],
    "--task_type": ["classification", "regression", "ner", "maybe"],
    "--max_seq_length": ["64", "0", "-3", "100000", "x", "1.5"],
    "--learning_rate": ["1e-4", "-1", "nan", "abc", "0"],
    "--num_train_epochs": ["1", "-1", "x"],
    "--per_device_train_batch_size": ["8", "0", "-2", "many"],
    "--seeds": ["0 1", "x", "-1"],
    "--model_overrides": ['{"num_hidden_layers": 2}', "{", '{"bogus": 1}', "[]", '{"num_experts": 0}'],
    "--augment_copies": ["2", "-1", "x"],
    "--augment_pair_sentences": ["one", "both", "either"],
    "--augment_pair_swap": ["true", "false", "maybe"],
    "--augment_word_neighbours": ["0", "3", "-1"],
    "--distillation_attention_weight": ["0", "1", "-1", "x"],
    "--distillation_alpha": ["0.5", "1.5", "x"],
    "--distillation_temperature": ["2", "0", "x"],
    "--capacity_factor": ["none", "checkpoint", "0", "-1", "x", "1.25"],
    "--teacher": ["/no/such/teacher", ""],
    "--label_list": ["a,b", "", ","],
    "--max_train_samples": ["10", "0", "-5"],
    "--metric_for_best_model": ["accuracy", "bogus"],
    "--unknown_flag": ["1"],
}


@pytest.mark.parametrize("seed", range(CASES))
def test_the_command_line_works_or_ends_in_one_line(tmp_path, seed, monkeypatch, capsys):
    generator = random.Random(10_000 + seed)
    argv = ["--train_file", str(_write(tmp_path / "train.tsv", b"sentence\tlabel\ngood\t1\nbad\t0\n"))]
    for flag in generator.sample(sorted(FLAGS), generator.randint(1, 6)):
        argv.append(flag)
        value = generator.choice(FLAGS[flag])
        argv.extend(value.split(" ") if flag == "--seeds" else [value])
    argv.extend(["--output_dir", str(tmp_path / "out"), "--report_to", "none"])
    reached = []
    monkeypatch.setattr(finetune_command, "finetune", lambda *arguments, **keywords: reached.append(True) or [])
    try:
        status = main(["finetune", *argv])
    except SystemExit as exit_:
        message = exit_.code
        if message in (0, None):
            return
        if message == 2:  # argparse's usage error: it printed "usage: ... error: ..." on stderr itself
            assert "error:" in capsys.readouterr().err
            return
        text = str(message)
        assert text.startswith("compact-bert: ") and "\n" not in text.strip(), (seed, argv, text)
        assert "internal error" not in text, (seed, argv, text)
        return
    except Exception as error:  # the point of the test: nothing else may escape
        pytest.fail(f"seed {seed}, {json.dumps(argv)}: {type(error).__name__}: {error}")
    assert status == 0 and reached, (seed, argv)


# Load keywords: a value reaches a config through its constructor, its config.json or a from_pretrained keyword; the
# same validation must decide in all three ways. Values of every kind, for every field of every family.
KEYWORD_VALUES = [-1, 0, 1, 3, 7, 2**40, 0.5, -0.5, 1.5, float("nan"), float("inf"), "8", "true", "gelu", "top1"]
KEYWORD_VALUES += ["bogus", True, False, None, [], {}]


@pytest.fixture(scope="module")
def saved_configs(tmp_path_factory):
    """A saved tiny config of each compact-bert family: ``(config class, folder)``."""
    from compact_bert.configuration import CompactMobileBertConfig, IBBertConfig, MiniMoEConfig, MoEBertConfig

    folder = tmp_path_factory.mktemp("configs")
    saved = []
    for config_class in (MiniMoEConfig, MoEBertConfig, IBBertConfig, CompactMobileBertConfig):
        path = folder / config_class.model_type
        config_class().save_pretrained(path)
        saved.append((config_class, path))
    return saved


def _outcome(build) -> str | None:
    """``None`` when ``build()`` gives a config, else the message of the ``ValueError`` it raised (any other
    exception fails the test: it would reach a user as a traceback)."""
    try:
        build()
    except ValueError as error:
        return str(error)
    return None


@pytest.mark.parametrize("seed", range(CASES))
def test_a_load_keyword_is_validated_as_the_constructor_and_config_json_validate_it(saved_configs, tmp_path, seed):
    import inspect

    from transformers import AutoConfig

    generator = random.Random(seed)
    config_class, folder = generator.choice(saved_configs)
    fields = [name for name in inspect.signature(config_class.__init__).parameters if name not in ("self", "kwargs")]
    field, value = generator.choice(fields), generator.choice(KEYWORD_VALUES)
    saved = json.loads((folder / "config.json").read_text())
    as_json = tmp_path / "as-json"
    as_json.mkdir()
    (as_json / "config.json").write_text(json.dumps({**saved, field: value}))  # nan / inf as NaN / Infinity
    outcomes = {
        "constructor": _outcome(lambda: config_class(**{**config_class().to_diff_dict(), field: value})),
        "from_pretrained keyword": _outcome(lambda: AutoConfig.from_pretrained(folder, **{field: value})),
        "config.json": _outcome(lambda: AutoConfig.from_pretrained(as_json)),
    }
    accepted = {way for way, message in outcomes.items() if message is None}
    assert accepted in (set(), set(outcomes)), f"seed {seed}: {config_class.__name__}.{field}={value!r}: {outcomes}"
    for way, message in outcomes.items():
        assert message is None or f"`{field}`" in message or field in message, (seed, way, message)


# Model calls: the arguments of a compact-bert model's forward, of every kind a caller gets wrong (a float tensor of
# ids, a 3-d batch, no token, more positions than the model has, ids past the vocabulary, a mask of another shape).
def _call_arguments(generator: random.Random, vocab_size: int, positions: int, width: int) -> dict:
    import torch

    batch, length = generator.choice([1, 2]), generator.choice([1, 5, positions, positions + 3, 0])
    ids = torch.randint(0, vocab_size, (batch, length))
    arguments = {}
    kind = generator.choice(["ids", "float ids", "3-d ids", "ids past the vocabulary", "negative ids", "embeds"])
    if kind == "ids":
        arguments["input_ids"] = ids
    elif kind == "float ids":
        arguments["input_ids"] = ids.float()
    elif kind == "3-d ids":
        arguments["input_ids"] = ids.unsqueeze(0)
    elif kind == "ids past the vocabulary":
        arguments["input_ids"] = ids + vocab_size
    elif kind == "negative ids":
        arguments["input_ids"] = ids - vocab_size
    else:
        arguments["inputs_embeds"] = torch.randn(batch, length, generator.choice([width, width + 1]))
    if generator.random() < 0.5:
        mask_length = generator.choice([length, length + 1])
        arguments["attention_mask"] = torch.ones(batch, mask_length, dtype=generator.choice([torch.long, torch.float]))
    if generator.random() < 0.3:
        arguments["token_type_ids"] = torch.full((batch, length), generator.choice([0, 1, 2, 5, -1]))
    if generator.random() < 0.2:
        arguments["position_ids"] = torch.arange(length).unsqueeze(0) + generator.choice([0, positions])
    return arguments


@pytest.fixture(scope="module")
def tiny_models():
    """A tiny model of each compact-bert family (MoE FFN and attention experts included)."""
    from compact_bert.configuration import MiniMoEConfig, MoEBertConfig
    from compact_bert.modeling import CompactMobileBertModel, IBBertModel, MiniMoEModel, MoEBertModel
    from tests.distillation.helpers import tiny_ib_bert_config, tiny_mobilebert_config

    sparse = {"vocab_size": 50, "max_position_embeddings": 16, "num_hidden_layers": 2, "hidden_size": 32}
    sparse.update(num_attention_heads=2, intermediate_size=64)
    return [
        MiniMoEModel(MiniMoEConfig(**sparse, num_experts=2, num_attention_experts=2)).eval(),
        MoEBertModel(MoEBertConfig(**sparse, num_experts=4)).eval(),
        IBBertModel(tiny_ib_bert_config()).eval(),
        CompactMobileBertModel(tiny_mobilebert_config()).eval(),
    ]


@pytest.mark.parametrize("seed", range(CASES))
def test_a_model_call_works_or_names_the_argument_at_fault(tiny_models, seed):
    import torch

    generator = random.Random(seed)
    model = generator.choice(tiny_models)
    config = model.config
    width = getattr(config, "embedding_size", config.hidden_size)  # a bottleneck model embeds narrower
    arguments = _call_arguments(generator, config.vocab_size, config.max_position_embeddings, width)
    try:
        with torch.no_grad():
            model(**arguments)
    except (ValueError, TypeError) as error:
        named = [name for name in arguments if f"`{name}`" in str(error) or name in str(error)]
        shapes = {name: (tuple(value.shape), str(value.dtype)) for name, value in arguments.items()}
        assert named, f"seed {seed}: {type(model).__name__}{shapes}: the message names no argument: {error}"
    except Exception as error:  # the point of the test: a shape error deep in forward reaches no caller
        shapes = {name: (tuple(value.shape), str(value.dtype)) for name, value in arguments.items()}
        pytest.fail(f"seed {seed}: {type(model).__name__}{shapes}: {type(error).__name__}: {error}")
