"""The relation kernels refuse what they cannot compute: the same error under every backend (issue 35, item 4)."""

from __future__ import annotations

import re

import pytest
import torch

from compact_bert.distillation.losses import self_attention_relation_loss
from compact_bert.distillation.relation_kernels import native, relation_kl
from compact_bert.distillation.relation_kernels.eager import eager_relation_kl
from compact_bert.distillation.relation_kernels.native import NativeKernelUnavailable, native_relation_kl

ROWS, SEQ = 4, 8


def _inputs(student=(ROWS, SEQ, 6), teacher=(ROWS, SEQ, 12), mask=(ROWS, SEQ), weight=(ROWS, SEQ), dtypes=None):
    dtypes = dtypes or {}
    generator = torch.Generator().manual_seed(0)
    return (
        torch.randn(student, generator=generator, dtype=dtypes.get("student", torch.float32)).requires_grad_(True),
        torch.randn(teacher, generator=generator, dtype=dtypes.get("teacher", torch.float32)),
        torch.ones(mask, dtype=dtypes.get("mask", torch.float32)),
        torch.full(weight, 1 / (ROWS * SEQ), dtype=dtypes.get("weight", torch.float32)),
    )


def _errors(inputs, error=ValueError) -> set[str]:
    """The messages of ``relation_kl`` under each backend and of the native entry point called directly."""
    calls = (
        lambda: relation_kl(*inputs, kernel="eager"),
        lambda: relation_kl(*inputs, kernel="native"),
        lambda: native_relation_kl(*inputs),
    )
    messages = set()
    for call in calls:
        with pytest.raises(error) as raised:
            call()
        messages.add(str(raised.value))
    return messages


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (
            _inputs(teacher=(ROWS, SEQ - 3, 12)),
            r"teacher_heads must be .*\[4, 8, d_t ≥ 1\]; got teacher_heads \[4, 5, 12\]",
        ),
        (_inputs(teacher=(ROWS, SEQ + 2, 12)), r"got teacher_heads \[4, 10, 12\] float32 on cpu for student_heads"),
        (_inputs(teacher=(ROWS - 1, SEQ, 12)), r"teacher_heads must be .* got teacher_heads \[3, 8, 12\]"),
        (_inputs(teacher=(ROWS, SEQ, 0)), r"teacher_heads must be .* got teacher_heads \[4, 8, 0\]"),
        (
            _inputs(student=(ROWS, SEQ, 0)),
            r"student_heads must be \[rows, seq ≥ 1, d_s ≥ 1\]; got student_heads \[4, 8, 0\]",
        ),
        (_inputs(student=(ROWS * SEQ, 6)), r"student_heads must be .* got student_heads \[32, 6\]"),
        (_inputs(mask=(ROWS, SEQ - 3)), r"key_mask must be \[rows, seq\] = \[4, 8\], .* got key_mask \[4, 5\]"),
        (_inputs(weight=(SEQ, ROWS)), r"row_weight must be \[rows, seq\] = \[4, 8\], .* got row_weight \[8, 4\]"),
    ],
    ids=[
        "teacher-shorter",
        "teacher-longer",
        "teacher-fewer-rows",
        "teacher-no-width",
        "student-no-width",
        "student-2d",
        "key-mask",
        "row-weight",
    ],
)
def test_mismatched_shapes_raise_the_same_error_under_both_backends(inputs, message):
    """Before, a teacher shorter than the student made ``eager`` fail inside ``baddbmm`` and ``native`` return
    ``nan`` (it read past the teacher's end); no compiler is needed: the check comes before the library is built."""
    (text,) = _errors(inputs)
    assert re.search(message, text), text


@pytest.mark.parametrize(
    ("dtypes", "message"),
    [
        ({"student": torch.float64}, r"student_heads must be float32 .* got student_heads \[4, 8, 6\] float64"),
        ({"teacher": torch.bfloat16}, r"teacher_heads must be float32 .* got teacher_heads \[4, 8, 12\] bfloat16"),
        ({"weight": torch.float64}, r"row_weight must be float32; got row_weight \[4, 8\] float64"),
        ({"mask": torch.complex64}, r"key_mask must be bool, integer or real .* complex64"),
    ],
    ids=["student-float64", "teacher-bfloat16", "row-weight-float64", "key-mask-complex"],
)
def test_wrong_dtypes_raise_the_same_error_under_both_backends(dtypes, message):
    (text,) = _errors(_inputs(dtypes=dtypes))
    assert re.search(message, text), text


def test_a_non_tensor_is_a_type_error():
    student, teacher, mask, _ = _inputs()
    (text,) = _errors((student, teacher, mask, [1.0] * ROWS), error=TypeError)
    assert text == "row_weight must be a torch.Tensor, got list."


def test_the_native_entry_point_refuses_tensors_off_the_cpu():
    """``relation_kl`` refuses ``native`` off the CPU when it resolves the name; called directly, the entry point
    checks itself (the meta device has no data, so no pointer could be read)."""
    inputs = [tensor.detach().to("meta") for tensor in _inputs()]
    with pytest.raises(ValueError, match="The native relation kernel runs on CPU tensors only, got meta"):
        native_relation_kl(*inputs)
    with pytest.raises(ValueError, match="must be on one device; got student_heads .* on cpu and teacher_heads"):
        relation_kl(_inputs()[0], *inputs[1:], kernel="eager")


@pytest.mark.parametrize("kernel", ["eager", "native"])
def test_the_loss_names_a_teacher_shorter_than_the_student(kernel):
    generator = torch.Generator().manual_seed(0)
    student = {name: torch.randn(2, 8, 16, generator=generator) for name in ("query", "key", "value")}
    teacher = {name: torch.randn(2, 6, 16, generator=generator) for name in ("query", "key", "value")}
    with pytest.raises(
        ValueError, match=r"got teacher_heads \[8, 6, 4\] float32 on cpu for student_heads \[8, 8, 4\]"
    ):
        self_attention_relation_loss(student, teacher, 4, kernel=kernel)


def _native_or_skip():
    try:
        return native.load_native_library()
    except NativeKernelUnavailable as error:
        pytest.skip(f"no C compiler builds the native relation kernel here: {error}")


def test_native_equals_eager_for_strided_inputs_and_a_non_binary_mask():
    """A C loop walks dense memory: strided views are copied first, not read with the wrong strides; a mask is a key
    mask whatever its values (nonzero: real), as in ``eager``, not a weight on the keys."""
    _native_or_skip()
    generator = torch.Generator().manual_seed(3)
    student = torch.randn(SEQ, 6, ROWS, generator=generator).permute(2, 0, 1).requires_grad_(True)
    teacher = torch.randn(ROWS, 12, SEQ, generator=generator).transpose(1, 2)
    mask = torch.tensor([[2, 1, 1, 0, 3, 1, 1, 1]] * ROWS)
    weight = torch.rand(SEQ, ROWS, generator=generator).t()
    assert not (student.is_contiguous() or teacher.is_contiguous() or weight.is_contiguous())
    results = {}
    for kernel in ("native", "eager"):
        loss = relation_kl(student, teacher, mask, weight, kernel=kernel)
        results[kernel] = (loss, *torch.autograd.grad(loss, student))
    expected = eager_relation_kl(student.detach().contiguous(), teacher.contiguous(), mask.bool(), weight.contiguous())
    torch.testing.assert_close(results["eager"][0], expected)
    torch.testing.assert_close(results["native"][0], results["eager"][0], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(results["native"][1], results["eager"][1], rtol=1e-5, atol=1e-7)


def test_no_pointer_reaches_c_from_a_strided_or_mis_sized_tensor():
    """The guard inside the native backend, behind ``native_relation_kl``'s copies: were a caller inside this module
    to skip them, the C loop is still not called (the library is not even loaded)."""
    student, teacher, mask, weight = (tensor.detach() for tensor in _inputs())
    divergence = torch.empty(ROWS, SEQ)
    with pytest.raises(RuntimeError, match=r"teacher reached the native relation kernel with strides \(96, 1, 8\)"):
        native._run(student, teacher.transpose(1, 2).contiguous().transpose(1, 2), mask, weight, divergence, None)
    with pytest.raises(RuntimeError, match=r"grad reached the native relation kernel as \[4, 8, 5\] float32 on cpu"):
        native._run(student, teacher, mask, weight, divergence, torch.empty(ROWS, SEQ, 5))
