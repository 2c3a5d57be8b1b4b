"""MiniLMv2 relation loss and paper 003's cosine relations against numpy; sampling; masking."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from compact_bert.distillation.losses import (
    cosine_relation_loss,
    query_key_relation_loss,
    sample_token_groups,
    self_attention_relation_loss,
)


def _numpy_relation_kl(student, teacher, heads, mask):
    """Σ over Q/K/V of mean KL(teacher relation ‖ student relation), written out with numpy loops."""
    total = []
    for name in ("query", "key", "value"):
        values = []
        for b in range(mask.shape[0]):
            real = np.flatnonzero(mask[b])
            for r in range(heads):

                def relation(states, b=b, r=r, real=real):
                    x = states[b].reshape(states.shape[1], heads, -1)[:, r, :].astype(np.float64)
                    scores = x @ x.T / np.sqrt(x.shape[-1])
                    scores = scores[:, real]
                    scores = scores - scores.max(-1, keepdims=True)
                    return np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)

                p, q = relation(teacher[name]), relation(student[name])
                for t in real:
                    values.append((p[t] * (np.log(p[t]) - np.log(q[t]))).sum())
        # mean over heads then over tokens == mean over (token, head) pairs when every row has all heads
        total.append(np.mean(values))
    return float(np.mean(total))


def _states(width, seed):
    generator = torch.Generator().manual_seed(seed)
    return {name: torch.randn(2, 6, width, generator=generator) for name in ("query", "key", "value")}


def test_relation_loss_is_zero_for_identical_states():
    states = _states(16, 0)
    copy = {name: tensor.clone() for name, tensor in states.items()}
    assert self_attention_relation_loss(states, copy, 4).item() == pytest.approx(0.0, abs=1e-6)


def test_relation_loss_equals_numpy_with_different_widths_and_padding():
    student, teacher = _states(16, 1), _states(24, 2)  # different hidden sizes (and so head sizes)
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    got = self_attention_relation_loss(student, teacher, num_relation_heads=4, attention_mask=mask).item()
    expected = _numpy_relation_kl(
        {k: v.numpy() for k, v in student.items()}, {k: v.numpy() for k, v in teacher.items()}, 4, mask.numpy()
    )
    assert got == pytest.approx(expected, rel=1e-4)
    # Padding contributes nothing: changing padded positions leaves the loss unchanged.
    noisy = {name: tensor.clone() for name, tensor in teacher.items()}
    for tensor in noisy.values():
        tensor[1, 4:] = 100.0
    assert self_attention_relation_loss(student, noisy, 4, mask).item() == pytest.approx(got, rel=1e-5)


def test_relation_heads_must_divide_both_sides():
    with pytest.raises(ValueError, match=r"must divide the teacher's query size \(24\)"):
        self_attention_relation_loss(_states(16, 0), _states(24, 1), num_relation_heads=16)


def test_cosine_relation_equals_numpy_and_zero_for_scaled_copies():
    student, teacher = torch.randn(2, 5, 8), torch.randn(2, 5, 12)
    groups = torch.tensor([[0, 3, 7], [9, 1, 4]])

    def cosines(x, idx):
        v = x.reshape(-1, x.shape[-1]).numpy()[idx].astype(np.float64)
        v = v / np.linalg.norm(v, axis=-1, keepdims=True)
        return v @ v.T

    expected = np.mean([np.mean((cosines(student, g) - cosines(teacher, g)) ** 2) for g in groups.numpy()])
    assert cosine_relation_loss(student, teacher, groups).item() == pytest.approx(expected, rel=1e-5)
    # Relations ignore scale: a scaled copy has the same cosines.
    assert cosine_relation_loss(student * 3.0, student, groups).item() == pytest.approx(0.0, abs=1e-10)


def test_query_key_relation_equals_numpy_over_real_pairs():
    q_s, k_s, q_t, k_t = (torch.randn(2, 4, 8) for _ in range(4))
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])

    def cosines(q, k, b, h):
        qh = q[b].numpy().reshape(4, 2, 4)[:, h].astype(np.float64)
        kh = k[b].numpy().reshape(4, 2, 4)[:, h].astype(np.float64)
        qh /= np.linalg.norm(qh, axis=-1, keepdims=True)
        kh /= np.linalg.norm(kh, axis=-1, keepdims=True)
        return qh @ kh.T

    values = []
    for b in range(2):
        real = np.flatnonzero(mask[b].numpy())
        for h in range(2):
            diff = (cosines(q_s, k_s, b, h) - cosines(q_t, k_t, b, h))[np.ix_(real, real)]
            values.extend((diff**2).ravel())
    got = query_key_relation_loss(q_s, k_s, q_t, k_t, num_heads=2, attention_mask=mask).item()
    assert got == pytest.approx(np.mean(values), rel=1e-5)
    assert query_key_relation_loss(q_s, k_s, q_s.clone(), k_s.clone(), 2, mask).item() == pytest.approx(0.0, abs=1e-10)


def test_token_sampling_respects_the_mask_and_is_deterministic():
    mask = torch.zeros(4, 10, dtype=torch.long)
    mask[:, :6] = 1
    first = sample_token_groups(mask, 16, 4, torch.Generator().manual_seed(5))
    again = sample_token_groups(mask, 16, 4, torch.Generator().manual_seed(5))
    other = sample_token_groups(mask, 16, 4, torch.Generator().manual_seed(6))
    assert first.shape == (4, 4) and torch.equal(first, again) and not torch.equal(first, other)
    assert bool(mask.reshape(-1)[first].all()) and first.unique().numel() == 16
    with pytest.raises(ValueError, match="holds 24 real tokens but 32 are sampled"):
        sample_token_groups(mask, 32, 4)
    with pytest.raises(ValueError, match="multiple of `group_size`"):
        sample_token_groups(mask, 10, 4)


def _autograd_relation_loss(student_states, teacher_states, heads, mask):
    """The relation loss as compact-bert computed it before the fused ``_RelationKL`` (autograd through
    ``log_softmax`` and ``xlogy``): the fused loss must give the same values and gradients."""
    from torch.nn import functional as F

    def log_relation(states):
        batch, seq, width = states.shape
        split = states.float().view(batch, seq, heads, width // heads).transpose(1, 2)
        scores = split @ split.transpose(-1, -2) / (width // heads) ** 0.5
        scores = scores.masked_fill(~mask.bool()[:, None, None, :], torch.finfo(scores.dtype).min)
        return F.log_softmax(scores, dim=-1)

    losses = []
    for name in ("query", "key", "value"):
        teacher = log_relation(teacher_states[name]).exp()
        divergence = (torch.xlogy(teacher, teacher) - teacher * log_relation(student_states[name])).sum(-1).mean(1)
        weights = mask.to(divergence.dtype)
        losses.append((divergence * weights).sum() / weights.sum())
    return torch.stack(losses).mean()


def _relation_case(seq, generator_seed):
    generator = torch.Generator().manual_seed(generator_seed)
    student = {
        name: torch.randn(3, seq, 24, generator=generator, requires_grad=True) for name in ("query", "key", "value")
    }
    teacher = {name: torch.randn(3, seq, 48, generator=generator) for name in ("query", "key", "value")}
    mask = torch.ones(3, seq, dtype=torch.long)
    mask[1, seq // 2 :] = 0  # right padding
    mask[2, : seq // 3] = 0  # left padding
    return student, teacher, mask


def _assert_same_loss_and_gradients(student, teacher, mask, kernel, rtol=1e-5):
    expected = _autograd_relation_loss(student, teacher, 4, mask)
    expected_grads = torch.autograd.grad(expected, list(student.values()))
    got = self_attention_relation_loss(student, teacher, 4, mask, kernel=kernel)
    got_grads = torch.autograd.grad(got, list(student.values()))
    torch.testing.assert_close(got, expected, rtol=rtol, atol=1e-6)
    for got_grad, expected_grad in zip(got_grads, expected_grads):
        torch.testing.assert_close(got_grad, expected_grad, rtol=rtol, atol=1e-8)


@pytest.mark.parametrize("saved_gradient_bytes", [256 << 20, 0], ids=["kept-gradient", "recomputed-gradient"])
@pytest.mark.parametrize("seq", [7, 40])
def test_eager_relation_kernel_matches_the_autograd_formulation(seq, saved_gradient_bytes, monkeypatch):
    from compact_bert.distillation.relation_kernels import eager

    monkeypatch.setattr(eager, "CHUNK_ELEMENTS", 5 * seq * seq)  # chunks of 5 of 12 rows: the last one partial
    monkeypatch.setattr(eager, "SAVED_GRADIENT_BYTES", saved_gradient_bytes)  # both backward paths
    _assert_same_loss_and_gradients(*_relation_case(seq, seq), kernel="eager", rtol=1e-6)


@pytest.mark.parametrize("seq", [1, 7, 40, 128])
def test_native_relation_kernel_matches_the_autograd_formulation(seq):
    pytest.importorskip("ctypes")
    from compact_bert.distillation.relation_kernels.native import NativeKernelUnavailable, load_native_library

    try:
        load_native_library()
    except NativeKernelUnavailable as error:
        pytest.skip(f"no C compiler builds the native relation kernel here: {error}")
    student, teacher, mask = _relation_case(seq, seq)
    _assert_same_loss_and_gradients(student, teacher, mask, kernel="native")
    # A larger scale of scores (sharper relations) and one thread or several give the same result.
    sharp = {name: (states * 4).detach().requires_grad_(True) for name, states in student.items()}
    _assert_same_loss_and_gradients(sharp, {name: states * 4 for name, states in teacher.items()}, mask, "native")
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = self_attention_relation_loss(student, teacher, 4, mask, kernel="native")
    finally:
        torch.set_num_threads(threads)
    assert single.item() == self_attention_relation_loss(student, teacher, 4, mask, kernel="native").item()


@pytest.mark.parametrize("kernel", ["eager", "native"])
def test_a_sequence_without_real_tokens_adds_nothing(kernel):
    student, teacher, mask = _relation_case(9, 0)
    with_empty = mask.clone()
    with_empty[0] = 0
    loss = self_attention_relation_loss(student, teacher, 4, with_empty, kernel=kernel)
    reference = _autograd_relation_loss(student, teacher, 4, with_empty)
    torch.testing.assert_close(loss, reference, rtol=1e-5, atol=1e-7)
    assert torch.isfinite(torch.autograd.grad(loss, student["query"])[0]).all()


def test_relation_kernel_names_are_checked(monkeypatch):
    student, teacher, mask = _relation_case(5, 0)
    with pytest.raises(ValueError, match="Relation kernel 'fast' is not one of auto, native, eager"):
        self_attention_relation_loss(student, teacher, 4, mask, kernel="fast")
    monkeypatch.setenv("COMPACT_BERT_RELATION_KERNEL", "fused")
    with pytest.raises(ValueError, match=r"\$COMPACT_BERT_RELATION_KERNEL 'fused' is not one of"):
        self_attention_relation_loss(student, teacher, 4, mask)


def test_auto_falls_back_to_pytorch_operations_without_a_compiler(monkeypatch, tmp_path):
    """Where no C compiler exists (Windows, slim containers) the loss is still computed, by the eager backend."""
    from compact_bert.distillation.relation_kernels import native, resolve_relation_kernel

    native.load_native_library.cache_clear()
    monkeypatch.setenv("COMPACT_BERT_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", "no-such-compiler")
    monkeypatch.setenv("PATH", str(tmp_path))
    try:
        assert resolve_relation_kernel("auto", torch.device("cpu")) == "eager"
        with pytest.raises(native.NativeKernelUnavailable, match="no C compiler found"):
            native.load_native_library()
        student, teacher, mask = _relation_case(6, 1)
        _assert_same_loss_and_gradients(student, teacher, mask, kernel="auto", rtol=1e-6)
        probes = []
        monkeypatch.setattr(native, "_compiler", lambda: probes.append(1))
        assert resolve_relation_kernel("auto", torch.device("cpu")) == "eager"
        assert probes == [], "the compiler is probed once per process, not at every loss call"
    finally:
        native.load_native_library.cache_clear()
