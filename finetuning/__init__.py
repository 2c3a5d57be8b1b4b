"""Fine-tuning support: PEFT adapter configs and PEFT's default targets for our model types.

``peft_registration`` needs nothing but the standard library (``import compact_bert`` runs it);
``peft_support`` imports PEFT, so it is imported only by those who ask for it.
"""

from __future__ import annotations

from .peft_registration import COMPACT_BERT_MODEL_TYPES, register_peft_default_targets

__all__ = ["COMPACT_BERT_MODEL_TYPES", "register_peft_default_targets"]
