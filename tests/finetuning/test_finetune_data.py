"""Fine-tuning data: label alignment on real CoNLL sentences, label sets, and early errors naming file/line/column."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest

from compact_bert.distillation.data import default_tokenizer
from compact_bert.finetuning.data import (
    GLUE_TASKS,
    FinetuneDataArguments,
    align_labels_with_words,
    check_tag_scheme,
    load_finetuning_data,
    load_unlabeled_examples,
    read_conll,
    sort_tags,
    tokenize_sequence_dataset,
    tokenize_token_dataset,
)
from tests.conftest import SHARED_DATA, needs_shared_data

CONLL_VALIDATION = SHARED_DATA / "conll2003" / "validation.txt"
needs_conll_validation = needs_shared_data("conll2003/validation.txt")


def _conll_slice(tmp_path: Path, sentences: int, name: str = "slice.txt", docstart: bool = True) -> Path:
    """The first ``sentences`` sentences of the real CoNLL-2003 dev file, with a -DOCSTART- header and extra
    blank lines as the original distribution has them."""
    blocks = CONLL_VALIDATION.read_text(encoding="utf-8").split("\n\n")[:sentences]
    text = ("-DOCSTART- -X- -X- O\n\n" if docstart else "") + "\n\n\n".join(blocks) + "\n\n"
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_align_labels_first_sub_token_only():
    # [CLS] w0 w1a w1b w1c w2 [SEP]
    assert align_labels_with_words([None, 0, 1, 1, 1, 2, None], [5, 3, 0]) == [-100, 5, 3, -100, -100, 0, -100]


@needs_conll_validation
def test_real_conll_sentences_align_to_first_sub_tokens(tmp_path):
    path = _conll_slice(tmp_path, 40)
    words, tags = read_conll(path)
    assert len(words) == 40 and all(word != "-DOCSTART-" for sentence in words for word in sentence)
    arguments = FinetuneDataArguments(task_name="ner", train_file=str(path), validation_file=str(path))
    splits = load_finetuning_data(arguments)
    assert splits.label_names[0] == "O" and "B-PER" in splits.label_names
    tokenizer = default_tokenizer()
    tokenized = tokenize_token_dataset(splits.train, tokenizer, max_length=512)
    split_words = 0
    for sentence, sentence_tags, example in zip(words, tags, tokenized):
        encoding = tokenizer(sentence, is_split_into_words=True)
        word_ids = encoding.word_ids()
        labels = example["labels"]
        # Exactly one labelled position per word, carrying that word's tag; every other position is ignored.
        labelled = [position for position, label in enumerate(labels) if label != -100]
        assert [word_ids[position] for position in labelled] == list(range(len(sentence)))
        assert [splits.label_names[labels[position]] for position in labelled] == sentence_tags
        assert labels[0] == labels[-1] == -100  # [CLS], [SEP]
        split_words += sum(1 for word in range(len(sentence)) if word_ids.count(word) > 1)
    assert split_words > 10  # the slice does exercise words split into several sub-tokens


@needs_conll_validation
def test_truncated_sentence_keeps_alignment(tmp_path):
    path = _conll_slice(tmp_path, 5)
    splits = load_finetuning_data(FinetuneDataArguments(task_name="ner", train_file=str(path)))
    tokenized = tokenize_token_dataset(splits.train, default_tokenizer(), max_length=8)
    assert all(len(example["labels"]) <= 8 and example["labels"][-1] == -100 for example in tokenized)


@needs_conll_validation
def test_eval_tags_unseen_in_training_are_an_error_unless_listed(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("Paris B-LOC\nis O\nnice O\n\n", encoding="utf-8")
    dev = _conll_slice(tmp_path, 30, "dev.txt")
    arguments = FinetuneDataArguments(task_name="ner", train_file=str(train), validation_file=str(dev))
    with pytest.raises(ValueError, match=r"dev\.txt: labels .*B-PER.*training never shows them.*--label_list"):
        load_finetuning_data(arguments)
    names = "O,B-LOC,I-LOC,B-MISC,I-MISC,B-ORG,I-ORG,B-PER,I-PER"
    arguments = FinetuneDataArguments(
        task_name="ner", train_file=str(train), validation_file=str(dev), label_list=names
    )
    splits = load_finetuning_data(arguments)
    assert splits.label_names == names.split(",")


def test_conll_line_without_tag_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("-DOCSTART- O\n\nEU B-ORG\nrejects O\n\nGerman B-MISC\ncall\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.txt:7: expected 'token TAG'"):
        read_conll(path)


def test_conll_extra_columns_take_first_and_last(tmp_path):
    path = tmp_path / "four.txt"
    path.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n", encoding="utf-8")
    assert read_conll(path) == ([["EU", "rejects"]], [["B-ORG", "O"]])


def test_unlabeled_conll_sentences_take_their_words_and_placeholder_tags(tmp_path):
    """An unlabeled CoNLL file: one word per line (a tag after it ignored), sentences cut to the model's length as
    the training data is, and every word's placeholder the ``O`` tag's id, in the training split's features."""
    train = tmp_path / "train.txt"
    train.write_text("EU B-ORG\nrejects O\n\nPeter B-PER\nBlackburn I-PER\n", encoding="utf-8")
    unlabeled = tmp_path / "unlabeled.txt"
    unlabeled.write_text("-DOCSTART-\n\nGerman\ncall B-MISC\nto\n\nBrussels\n", encoding="utf-8")
    arguments = FinetuneDataArguments(task_name="ner", train_file=str(train), max_seq_length=2)
    splits = load_finetuning_data(arguments)
    examples = load_unlabeled_examples(unlabeled, arguments, splits)
    outside = splits.label_names.index("O")
    assert examples["tokens"] == [["German", "call"], ["Brussels"]]
    assert examples["label"] == [[outside, outside], [outside]]
    assert examples.features == splits.train.features
    assert read_conll(unlabeled, tagged=False)[0] == [["German", "call", "to"], ["Brussels"]]


def test_an_unlabeled_conll_file_of_a_sentence_a_line_is_refused_naming_the_line(tmp_path):
    """Unlabeled CoNLL text is one word per line: a sentence a line would keep only its first word (and, without
    blank lines, make the whole file one sentence), so such a line is refused with its number."""
    plain = tmp_path / "sentences.txt"
    plain.write_text("German\nEU rejects German call to boycott British lamb .\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"sentences\.txt:2: expected one word per line .*blank line between"):
        read_conll(plain, "--unlabeled_file", tagged=False)
    tagged = tmp_path / "tagged.txt"  # CoNLL-2003's columns: word, part of speech, chunk, entity tag
    tagged.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n", encoding="utf-8")
    assert read_conll(tagged, "--unlabeled_file", tagged=False)[0] == [["EU", "rejects"]]


def test_unknown_scheme_letter_is_an_error():
    check_tag_scheme({"O", "B-PER", "I-PER", "E-LOC", "S-LOC"}, "x")
    with pytest.raises(ValueError, match="X-PER"):
        check_tag_scheme({"O", "X-PER"}, "f.txt")
    assert sort_tags(["I-PER", "O", "B-PER", "B-LOC"]) == ["O", "B-LOC", "B-PER", "I-PER"]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_tsv_labels_become_sorted_label_names(tmp_path):
    train = _write(tmp_path / "train.tsv", "sentence\tlabel\ngood\tpos\nbad\tneg\nfine\tpos\n")
    dev = _write(tmp_path / "dev.tsv", "sentence\tlabel\nmeh\tneg\n")
    splits = load_finetuning_data(FinetuneDataArguments(train_file=str(train), validation_file=str(dev)))
    assert splits.task_type == "classification" and splits.label_names == ["neg", "pos"]
    assert splits.train["label"] == [1, 0, 1] and splits.validation["label"] == [0]


def test_numeric_labels_sort_numerically_and_pairs_use_glue_columns(tmp_path):
    rows = "".join(f"s{index}\tt{index}\t{label}\n" for index, label in enumerate([10, 2, 1]))
    train = _write(tmp_path / "train.tsv", "sentence1\tsentence2\tlabel\n" + rows)
    splits = load_finetuning_data(FinetuneDataArguments(task_name="rte", train_file=str(train)))
    assert splits.label_names == ["1", "2", "10"] and splits.text_columns == ("sentence1", "sentence2")
    tokenized = tokenize_sequence_dataset(splits.train, default_tokenizer(), splits.text_columns, 16)
    assert 1 in tokenized[0]["token_type_ids"]  # the pair is encoded as a pair


@pytest.mark.parametrize(
    ("task", "labels", "expected"),
    [
        ("sst2", "0,1", ["negative", "positive"]),
        ("mnli", "2,0,1", ["entailment", "neutral", "contradiction"]),
        ("sst2", "1,1", ["positive"]),  # the id keeps its name even when the other class is absent
        ("rte", "entailment,not_entailment", ["entailment", "not_entailment"]),  # GLUE's RTE file: names already
        ("sst2", "0,7", ["0", "7"]),  # not the task's ids: kept as they are
    ],
)
def test_glue_label_ids_get_the_tasks_names(tmp_path, task, labels, expected):
    columns = GLUE_TASKS[task].text_columns
    rows = "".join(
        "\t".join([*(f"{column} {index}" for column in columns), label]) + "\n"
        for index, label in enumerate(labels.split(","))
    )
    train = _write(tmp_path / "train.tsv", "\t".join([*columns, "label"]) + "\n" + rows)
    splits = load_finetuning_data(FinetuneDataArguments(task_name=task, train_file=str(train)))
    assert splits.label_names == expected
    raw = list(dict.fromkeys(labels.split(",")))
    given = load_finetuning_data(
        FinetuneDataArguments(task_name=task, train_file=str(train), label_list=",".join(raw))
    )
    assert given.label_names == raw  # --label_list is the user's word


GLUE_ORIGINAL_FILES = {  # the first lines of GLUE's original downloads (gluebenchmark.com), as they are written
    "mrpc": (
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        '1\t702876\t702977\tAmrozi accused his brother , whom he called " the witness " .\tReferring to him as '
        'only " the witness " , Amrozi accused his brother .\n'
        "0\t2108705\t2108831\tYucaipa owned Dominick 's .\tYucaipa bought Dominick 's in 1995 .\n"
    ),
    "qqp": (
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
        "133273\t213221\t213222\tHow is the life of a math student?\tWhich level of prepration is enough?\t0\n"
        "402555\t536040\t536041\tHow do I control my horny emotions?\tHow do you control your horniness?\t1\n"
    ),
    "stsb": (
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
        "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is taking off.\tAn air plane is taking "
        "off.\t5.000\n"
    ),
    "mnli": (
        "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tlabel1\tgold_label\n"
        "0\t31193\t31193n\tgovernment\tConceptually cream skimming has two basic dimensions.\tProduct and "
        "geography are what make cream skimming work.\tneutral\tneutral\n"
        "1\t101457\t101457e\ttelephone\tyou know during the season.\tYou lose the things.\tentailment\tentailment\n"
    ),
    "cola": (
        "gj04\t1\t\tOur friends won't buy this analysis, let alone the next one we propose.\n"
        "gj04\t0\t*\tOne more pseudo generalization and I'm giving up.\n"
    ),
}


@pytest.mark.parametrize("task", list(GLUE_ORIGINAL_FILES))
def test_glues_original_files_load_by_task_name(tmp_path, task):
    train = _write(tmp_path / "train.tsv", GLUE_ORIGINAL_FILES[task])
    splits = load_finetuning_data(FinetuneDataArguments(task_name=task, train_file=str(train)))
    columns = GLUE_TASKS[task].text_columns
    assert splits.train.column_names == [*columns, "label"]
    first = splits.train[0]
    assert all(first[column] for column in columns)
    expected = {
        "mrpc": (["not_equivalent", "equivalent"], 1),
        "qqp": (["not_duplicate", "duplicate"], 0),
        "stsb": (None, 5.0),
        "mnli": (["entailment", "neutral", "contradiction"], 1),
        "cola": (["unacceptable", "acceptable"], 1),
    }[task]
    assert (splits.label_names, first["label"]) == expected
    if task == "mrpc":
        assert '" the witness "' in first["sentence1"]  # quotes are text, not CSV quoting


def test_a_four_column_file_with_its_own_header_is_not_taken_for_colas_headerless_one(tmp_path):
    train = _write(tmp_path / "train.tsv", "id\ttext\ttarget\tnotes\n1\tfine\t1\t\n")
    with pytest.raises(ValueError, match="has no column 'sentence'"):
        load_finetuning_data(FinetuneDataArguments(task_name="cola", train_file=str(train)))


def test_csv_and_jsonl_with_named_columns(tmp_path):
    csv_file = _write(tmp_path / "train.csv", 'text,y\n"hello, world",a\nbye,b\n')
    jsonl_file = _write(tmp_path / "dev.jsonl", '{"text": "hi", "y": "a"}\n\n{"text": "yo", "y": "b"}\n')
    arguments = FinetuneDataArguments(
        train_file=str(csv_file), validation_file=str(jsonl_file), text_columns="text", label_column="y"
    )
    splits = load_finetuning_data(arguments)
    assert splits.train["text"] == ["hello, world", "bye"] and splits.validation["label"] == [0, 1]


def test_regression_labels_must_be_numeric(tmp_path):
    train = _write(tmp_path / "train.tsv", "sentence1\tsentence2\tlabel\na\tb\t3.5\nc\td\tfive\n")
    with pytest.raises(ValueError, match=r"train\.tsv:3: column 'label' holds 'five', not a finite number"):
        load_finetuning_data(FinetuneDataArguments(task_name="stsb", train_file=str(train)))
    good = _write(tmp_path / "good.tsv", "sentence1\tsentence2\tlabel\na\tb\t3.5\nc\td\t1\n")
    splits = load_finetuning_data(FinetuneDataArguments(task_name="stsb", train_file=str(good)))
    assert splits.task_type == "regression" and splits.label_names is None and splits.train["label"] == [3.5, 1.0]


def test_missing_column_names_file_and_columns(tmp_path):
    train = _write(tmp_path / "train.tsv", "text\tlabel\na\t1\n")
    with pytest.raises(ValueError, match=r"train\.tsv has no column 'sentence'; its columns: \['text', 'label'\]"):
        load_finetuning_data(FinetuneDataArguments(task_name="sst2", train_file=str(train)))
    with pytest.raises(ValueError, match=r"no column 'gold'"):
        load_finetuning_data(FinetuneDataArguments(train_file=str(train), text_columns="text", label_column="gold"))


def test_unknown_task_and_empty_file(tmp_path):
    with pytest.raises(ValueError, match=r"--task_name 'sst3' is unknown; valid: cola, sst2"):
        FinetuneDataArguments(task_name="sst3", train_file="x.tsv")
    empty = _write(tmp_path / "empty.tsv", "")
    with pytest.raises(ValueError, match=r"empty\.tsv is empty"):
        load_finetuning_data(FinetuneDataArguments(task_name="sst2", train_file=str(empty)))
    header_only = _write(tmp_path / "header.tsv", "sentence\tlabel\n")
    with pytest.raises(ValueError, match=r"header\.tsv has no data rows"):
        load_finetuning_data(FinetuneDataArguments(task_name="sst2", train_file=str(header_only)))


def test_saved_dataset_folder_with_class_labels(tmp_path):
    features = datasets.Features(
        {
            "tokens": datasets.Sequence(datasets.Value("string")),
            "ner_tags": datasets.Sequence(datasets.ClassLabel(names=["O", "B-PER", "I-PER"])),
        }
    )
    split = datasets.Dataset.from_dict(
        {"tokens": [["Ada", "Lovelace", "wrote"]], "ner_tags": [[1, 2, 0]]}, features=features
    )
    datasets.DatasetDict({"train": split, "validation": split}).save_to_disk(str(tmp_path / "ner"))
    splits = load_finetuning_data(FinetuneDataArguments(dataset_name=str(tmp_path / "ner"), task_type="ner"))
    assert splits.label_names == ["O", "B-PER", "I-PER"] and splits.train["label"] == [[1, 2, 0]]
    classification = datasets.Dataset.from_dict({"sentence": ["a", "b"], "label": [1, 0]})
    datasets.DatasetDict({"train": classification}).save_to_disk(str(tmp_path / "cls"))
    splits = load_finetuning_data(FinetuneDataArguments(dataset_name=str(tmp_path / "cls"), task_name="sst2"))
    assert splits.label_names == ["negative", "positive"] and splits.validation is None  # sst2's names for its ids


def test_the_shared_sts_benchmark_loads_by_task_name():
    from tests.conftest import shared_data

    folder = shared_data("stsb")
    arguments = FinetuneDataArguments(
        task_name="stsb", train_file=str(folder / "train.tsv"), validation_file=str(folder / "validation.tsv")
    )
    splits = load_finetuning_data(arguments)
    assert splits.task_type == "regression" and (len(splits.train), len(splits.validation)) == (5749, 1500)
    assert all(0.0 <= score <= 5.0 for score in splits.validation["label"])


@pytest.mark.parametrize(
    "name,text,message",
    [
        (
            "train.json",
            '[{"text": "a", "y": 1}, {"text": "b", "y": 1.0}, {"text": "c", "y": 0}]',
            r"column 'y' mixes label kinds: integer 1 \(line 1\), decimal 1.0 \(line 2\)",
        ),
        ("train.json", '[{"text": "a", "y": true}, {"text": "b", "y": "1"}]', "mixes label kinds: boolean True"),
        (
            "train.json",
            '[{"text": "a", "y": null}, {"text": "b", "y": "x"}]',
            r"train\.json:1: column 'y' is missing or null",
        ),
        (
            "train.json",
            '[{"text": null, "y": "a"}, {"text": "b", "y": "x"}]',
            r"train\.json:1: column 'text' is missing or null",
        ),
        ("train.csv", "text,y\na,pos\nb\n", r"train\.csv:3: column 'y' is missing or null"),
        ("train.tsv", "text\ty\n \tpos\nb\tneg\n", r"train\.tsv:2: column 'text' holds ' ', not a non-empty text"),
        ("train.jsonl", '{"text": "a", "y": "p"}\n["b", "n"]\n', r"train\.jsonl:2: a JSON list, not an object"),
        ("train.json", '[{"text": "a", "y": "p"}, ["b", "n"]]', "record 2 is a JSON list, not an object"),
    ],
)
def test_rows_that_are_not_data_are_refused_with_file_and_line(tmp_path, name, text, message):
    path = _write(tmp_path / name, text)
    with pytest.raises(ValueError, match=message):
        load_finetuning_data(FinetuneDataArguments(train_file=str(path), text_columns="text", label_column="y"))


def test_regression_labels_may_mix_integers_and_decimals(tmp_path):
    path = _write(tmp_path / "train.json", '[{"text": "a", "y": 3}, {"text": "b", "y": 3.5}]')
    splits = load_finetuning_data(
        FinetuneDataArguments(train_file=str(path), text_columns="text", label_column="y", task_type="regression")
    )
    assert splits.train["label"] == [3.0, 3.5]


def test_byte_order_marks_crlf_long_fields_and_bad_bytes(tmp_path):
    bom = tmp_path / "train.csv"
    bom.write_bytes("\ufefftext,y\r\n".encode() + ("a" * 200_000).encode() + b",pos\r\nb,neg\r\n")
    splits = load_finetuning_data(FinetuneDataArguments(train_file=str(bom), text_columns="text", label_column="y"))
    assert splits.train["label"] == [1, 0] and len(splits.train["text"][0]) == 200_000
    conll = tmp_path / "train.txt"
    conll.write_bytes("\ufeff-DOCSTART- -X- O\n\nEU B-ORG\nrejects O\n".encode())
    sentences, tags = read_conll(conll)
    assert sentences == [["EU", "rejects"]] and tags == [["B-ORG", "O"]]
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"text\ty\nok\tpos\ncaf\xe9\tneg\n")
    with pytest.raises(ValueError, match=r"bad\.tsv:3: byte b'\\xe9' is not UTF-8"):
        load_finetuning_data(FinetuneDataArguments(train_file=str(bad), text_columns="text", label_column="y"))


@pytest.mark.parametrize("labels,message", [("0,1,1", r"duplicate label\(s\) \['1'\]"), ("a,,b", "an empty label")])
def test_label_list_with_duplicates_or_empty_entries_is_refused(tmp_path, labels, message):
    with pytest.raises(ValueError, match=message):
        FinetuneDataArguments(train_file=str(tmp_path / "x.tsv"), label_list=labels)


@pytest.mark.parametrize(
    "task_type,labels,glue,good",
    [
        ("classification", ["neg", "pos"], "sst2", "accuracy"),
        ("regression", None, "stsb", "eval_spearmanr"),
        ("ner", ["O", "B-PER", "I-PER"], None, "overall_f1"),
    ],
)
def test_metric_for_best_model_is_checked_against_the_tasks_metrics(task_type, labels, glue, good):
    from compact_bert.finetuning.finetune_trainer import check_metric_name
    from compact_bert.training.run_errors import RunSettingsError

    check_metric_name(good, task_type, labels, glue)
    check_metric_name("loss", task_type, labels, glue)
    with pytest.raises(RunSettingsError, match="--metric_for_best_model 'bogus' is not a metric .* valid: .*loss"):
        check_metric_name("bogus", task_type, labels, glue)


def test_a_huge_text_field_is_cut_at_load_to_what_the_tokenizer_keeps(tmp_path):
    """A field far longer than the model's positions is cut at load, before copies are made of it or it is
    tokenized: the token ids are those of the whole field (truncation keeps the same first tokens), the memory is
    that of a short field."""
    import resource
    import subprocess
    import sys

    from transformers import AutoTokenizer

    from compact_bert.distillation.data import packaged_teacher_dir
    from compact_bert.finetuning.data import FinetuneDataArguments, load_finetuning_data, tokenize_sequence_dataset

    words = " ".join(f"word{index % 97} , and" for index in range(4000))  # 12,000 words
    (tmp_path / "train.tsv").write_text(f"sentence\tlabel\n{words}\t1\na short one\t0\n")
    arguments = FinetuneDataArguments(task_name="sst2", train_file=str(tmp_path / "train.tsv"), max_seq_length=64)
    splits = load_finetuning_data(arguments)
    kept = splits.train["sentence"][0]
    assert len(kept.split()) == 2 * 64 + 16 and words.startswith(kept)
    tokenizer = AutoTokenizer.from_pretrained(packaged_teacher_dir())
    tokenized = tokenize_sequence_dataset(splits.train, tokenizer, ("sentence",), 64)
    assert tokenized["input_ids"][0] == tokenizer(words, truncation=True, max_length=64)["input_ids"]
    # peak memory of reading a table with one 50 MB field stays within 2x that of the same table without it
    script = (
        "import resource, sys\n"
        "from compact_bert.finetuning.data import FinetuneDataArguments, load_finetuning_data\n"
        "load_finetuning_data(FinetuneDataArguments(task_name='sst2', train_file=sys.argv[1], max_seq_length=128))\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    huge, small = tmp_path / "huge.tsv", tmp_path / "small.tsv"
    rows = "".join(f"sentence {index} of the table\t{index % 2}\n" for index in range(200))
    huge.write_text("sentence\tlabel\n" + "a b " * 12_500_000 + "\t1\n" + rows)
    small.write_text("sentence\tlabel\na b\t1\n" + rows)
    peaks = {}
    for name, path in (("huge", huge), ("small", small)):
        result = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        peaks[name] = int(result.stdout.split()[-1])
    assert peaks["huge"] <= 2 * peaks["small"], peaks
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0
