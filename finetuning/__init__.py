"""Fine-tuning of compact-bert models (and any BERT-like transformers model) on classification, regression and
NER: data loading (``data``), training arguments (``finetune_config``) and the trainer (``finetune_trainer``).
The command is ``compact-bert finetune`` (``cli/finetune_command.py``)."""
