"""Installed as ``optimum/commands/register/compact_bert_onnx.py``: ``optimum-cli`` imports every module of that
namespace at start-up (how optimum-intel and others plug in), so ``optimum-cli export onnx`` knows compact-bert's
model types without extra arguments. It adds no command."""

from compact_bert.export.optimum_import_hook import register_when_optimum_is_imported

register_when_optimum_is_imported()

REGISTER_COMMANDS = []
