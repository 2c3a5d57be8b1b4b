"""Each distillation loss: zero for teacher == student, equal to numpy, correct masking."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from compact_bert.distillation.losses import (
    attention_transfer_loss,
    feature_map_transfer_loss,
    mlm_distillation_loss,
    pretraining_distillation_loss,
)


def _mask():
    mask = torch.ones(2, 5, dtype=torch.long)
    mask[1, 3:] = 0
    return mask


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("decomposed", [False, True])
def test_feature_map_loss_is_zero_for_identical_maps(decomposed):
    hidden = torch.randn(2, 5, 8)
    assert feature_map_transfer_loss(hidden, hidden.clone(), _mask(), decomposed).item() == pytest.approx(
        0.0, abs=1e-10
    )


def test_feature_map_loss_equals_numpy_and_ignores_padding():
    student, teacher, mask = torch.randn(2, 5, 8), torch.randn(2, 5, 8), _mask()
    s, t, m = student.numpy(), teacher.numpy(), mask.numpy().astype(bool)
    expected = np.mean(((s - t) ** 2)[m])  # eq. 2 over the real tokens
    assert feature_map_transfer_loss(student, teacher, mask).item() == pytest.approx(expected, rel=1e-5)
    garbage = teacher.clone()
    garbage[1, 3:] = 1e6
    assert feature_map_transfer_loss(student, garbage, mask).item() == pytest.approx(expected, rel=1e-5)


def test_decomposed_feature_map_loss_equals_numpy():
    student, teacher, mask = torch.randn(2, 5, 8) * 3 + 1, torch.randn(2, 5, 8), _mask()
    s, t, m = student.numpy().astype(np.float64), teacher.numpy().astype(np.float64), mask.numpy().astype(bool)

    def normalize(x):
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-6)

    per_token = (
        ((normalize(s) - normalize(t)) ** 2).mean(-1) + (s.mean(-1) - t.mean(-1)) ** 2 + (s.var(-1) - t.var(-1)) ** 2
    )
    got = feature_map_transfer_loss(student, teacher, mask, normalized_decomposition=True).item()
    assert got == pytest.approx(per_token[m].mean(), rel=1e-4)


def test_attention_transfer_equals_numpy_kl_and_ignores_padded_queries():
    logits_s, logits_t = torch.randn(2, 3, 5, 5), torch.randn(2, 3, 5, 5)
    student, teacher, mask = torch.softmax(logits_s, -1), torch.softmax(logits_t, -1), _mask()
    p, q = teacher.numpy().astype(np.float64), student.numpy().astype(np.float64)
    kl = (p * (np.log(p) - np.log(q))).sum(-1).mean(1)  # KL per head and query, mean over heads
    expected = kl[mask.numpy().astype(bool)].mean()
    assert attention_transfer_loss(student, teacher, mask).item() == pytest.approx(expected, rel=1e-5)
    assert attention_transfer_loss(teacher, teacher.clone(), mask).item() == pytest.approx(0.0, abs=1e-7)


def test_attention_transfer_handles_zero_probabilities_and_shape_mismatch():
    teacher = torch.zeros(1, 1, 2, 3)
    teacher[..., 0] = 1.0  # one-hot rows: 0·log 0 terms must vanish
    assert attention_transfer_loss(teacher, teacher.clone()).item() == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ValueError, match="equal head counts"):
        attention_transfer_loss(torch.rand(1, 2, 3, 3), torch.rand(1, 4, 3, 3))


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_mlm_distillation_equals_numpy_over_masked_positions(temperature):
    student, teacher = torch.randn(2, 5, 11), torch.randn(2, 5, 11)
    labels = torch.full((2, 5), -100)
    labels[0, 1], labels[1, 4] = 3, 7
    selected = labels.numpy() != -100
    p = _softmax(teacher.numpy().astype(np.float64)[selected] / temperature)
    q = _softmax(student.numpy().astype(np.float64)[selected] / temperature)
    expected = (p * (np.log(p) - np.log(q))).sum(-1).mean() * temperature**2
    assert mlm_distillation_loss(student, teacher, labels, temperature).item() == pytest.approx(expected, rel=1e-5)
    assert mlm_distillation_loss(teacher, teacher.clone(), labels, temperature).item() == pytest.approx(0.0, abs=1e-6)
    assert mlm_distillation_loss(student, teacher, torch.full((2, 5), -100)).item() == 0.0


def test_pretraining_distillation_mix():
    mlm, kd, nsp = torch.tensor(2.0), torch.tensor(4.0), torch.tensor(0.5)
    assert pretraining_distillation_loss(mlm, kd, nsp).item() == pytest.approx(0.5 * 2 + 0.5 * 4 + 0.5)
    assert pretraining_distillation_loss(mlm, kd, None, alpha=0.25).item() == pytest.approx(0.25 * 2 + 0.75 * 4)
    with pytest.raises(ValueError, match="alpha"):
        pretraining_distillation_loss(mlm, kd, alpha=1.5)
