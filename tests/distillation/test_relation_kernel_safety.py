"""The relation kernels refuse what they cannot compute (the same error under every backend), and the native one loads
only a library this user built."""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import threading

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


# --- The cached library ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory):
    """One build for the module's cache tests, copied into each test's own cache folder."""
    folder = tmp_path_factory.mktemp("relation_kernel_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COMPACT_BERT_CACHE", str(folder))
        native.load_native_library.cache_clear()
        try:
            _native_or_skip()
        finally:
            native.load_native_library.cache_clear()
    return folder / "kernels"


@pytest.fixture
def cache(built_cache, tmp_path, monkeypatch):
    """A cache folder holding the built library, and the loader made to look there afresh."""
    monkeypatch.setenv("COMPACT_BERT_CACHE", str(tmp_path))
    shutil.copytree(built_cache, tmp_path / "kernels", ignore=shutil.ignore_patterns("build.lock"))
    native.load_native_library.cache_clear()
    yield tmp_path / "kernels"
    native.load_native_library.cache_clear()


def _library(folder):
    (library,) = folder.glob("relation_kl-*.so")
    return library


def test_a_fresh_build_is_private_and_recorded(built_cache):
    library = _library(built_cache)
    assert stat.S_IMODE(built_cache.stat().st_mode) == 0o700
    for path in (library, native._checksum_path(library)):
        assert path.stat().st_uid == os.getuid() and not path.stat().st_mode & 0o022
    assert native._checksum_path(library).read_text().strip() == native._sha256(library)
    assert native._distrust(library) is None


def _replace_bytes(path, data):
    """Replace ``path`` by a new file (a new inode): rewriting a library that this process has mapped in place
    would change the code under its feet."""
    scratch = path.with_name(path.name + ".new")
    scratch.write_bytes(data)
    os.replace(scratch, path)


def _truncate(library):
    _replace_bytes(library, library.read_bytes()[:4096])


def _flip_a_byte(library):
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0xFF
    _replace_bytes(library, bytes(data))


def _garbled_checksum(library):
    _replace_bytes(native._checksum_path(library), bytes(range(256)))


def _world_writable(library):
    library.chmod(library.stat().st_mode | stat.S_IWOTH)


def _group_writable_checksum(library):
    checksum = native._checksum_path(library)
    checksum.chmod(checksum.stat().st_mode | stat.S_IWGRP)


def _a_link(library):
    elsewhere = library.with_name("elsewhere.so")
    os.replace(library, elsewhere)
    library.symlink_to(elsewhere)


def _another_owner(library):
    if os.getuid() != 0:
        pytest.skip("only root can give a file to another user")
    os.chown(library, 65534, -1)


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (_truncate, "SHA-256 is .* recorded when it was built: corrupt or replaced"),
        (_flip_a_byte, "SHA-256 is .* recorded when it was built: corrupt or replaced"),
        (_garbled_checksum, "SHA-256 is .* recorded when it was built: corrupt or replaced"),
        (_world_writable, "is writable by other users"),
        (_group_writable_checksum, r"\.so\.sha256 is writable by other users"),
        (_a_link, "is not a regular file"),
        (_another_owner, r"belongs to user id 65534, not to this user"),
    ],
    ids=[
        "truncated",
        "a-byte-flipped",
        "checksum-garbled",
        "world-writable",
        "checksum-group-writable",
        "a-link",
        "another-owner",
    ],
)
def test_a_cached_library_that_fails_a_check_is_rebuilt_with_a_warning(cache, tamper, reason, caplog):
    """Not loaded (its code would run), not replaced silently by the slower portable build: rebuilt with the same
    flags, with a warning that names the file."""
    library = _library(cache)
    tamper(library)
    with caplog.at_level(logging.WARNING, logger=native.logger.name):
        native.load_native_library()
    (record,) = [record for record in caplog.records if record.name == native.logger.name]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(f"Rebuilding the native relation kernel {library}: ")
    assert re.search(reason, record.getMessage()), record.getMessage()
    assert _library(cache) == library and native._distrust(library) is None
    assert sorted(path.name for path in cache.iterdir()) == sorted(
        [library.name, library.name + ".sha256", "build.lock"] + (["elsewhere.so"] if tamper is _a_link else [])
    )


def test_a_library_without_a_recorded_checksum_is_rebuilt(cache, caplog):
    """A cache from before checksums were recorded: rebuilt once, said at INFO (nothing is wrong with it)."""
    library = _library(cache)
    native._checksum_path(library).unlink()
    with caplog.at_level(logging.INFO, logger=native.logger.name):
        native.load_native_library()
    assert [record.levelno for record in caplog.records if record.name == native.logger.name] == [logging.INFO]
    assert "no checksum was recorded" in caplog.text and native._distrust(library) is None


def test_another_users_cache_folder_is_refused(cache, monkeypatch, caplog):
    monkeypatch.setattr(native, "_current_uid", lambda: os.getuid() + 1)
    refused = pytest.raises(NativeKernelUnavailable, match=f"{cache} belongs to user id {os.getuid()}, not to this")
    with caplog.at_level(logging.WARNING, logger=native.logger.name), refused:
        native.load_native_library()
    assert f"The native relation kernel is not loaded: the kernel cache folder {cache}" in caplog.text


def test_a_cache_folder_others_can_write_is_made_private(cache, caplog):
    cache.chmod(0o777)
    with caplog.at_level(logging.WARNING, logger=native.logger.name):
        native.load_native_library()
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert f"{cache} was writable by other users; it is now private" in caplog.text


def test_concurrent_first_uses_build_once(tmp_path, monkeypatch):
    """The folder's lock: a second process (here a thread with its own descriptor) waits for the first build and
    loads it, instead of compiling the same library next to it."""
    _native_or_skip()
    monkeypatch.setenv("COMPACT_BERT_CACHE", str(tmp_path))
    builds, build = [], native._build
    monkeypatch.setattr(native, "_build", lambda *args: (builds.append(args[-1]), build(*args)))
    outcomes = []
    threads = [threading.Thread(target=lambda: outcomes.append(native._build_and_load())) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(outcomes) == 2 and len(builds) == 1
