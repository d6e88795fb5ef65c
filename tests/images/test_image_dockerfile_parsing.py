"""The catalog reads FROM, ARG, ENV and LABEL the way Docker's builder does."""

from __future__ import annotations

import pytest

from images.dockerfile import DockerfileError, logical_lines, parse_dockerfile, words


def test_it_joins_continuation_lines_and_skips_comments_inside_them() -> None:
    text = "FROM a:1\nRUN echo one \\\n# a comment in the middle\n    two \\\n\n    three\nLABEL x=y\n"
    assert logical_lines(text) == [(1, "FROM a:1"), (2, "RUN echo one two three"), (7, "LABEL x=y")]


def test_it_splits_words_with_quotes_escapes_and_substitution() -> None:
    scope = {"V": "2.5.1", "EMPTY": ""}
    assert words("a=\"b c\" d='$V' e=$V f=${V}-x", scope) == ["a=b c", "d=$V", "e=2.5.1", "f=2.5.1-x"]
    assert words(r"g=\$V h=${EMPTY:-fallback} i=${V:+set} j=${EMPTY:+set}", scope) == [
        "g=$V",
        "h=fallback",
        "i=set",
        "j=",
    ]
    assert words('k=""', scope) == ["k="]


def test_it_refuses_unterminated_quotes() -> None:
    with pytest.raises(DockerfileError, match="unterminated"):
        words('a="b', {})


def test_arg_defaults_reach_labels_only_when_redeclared_in_the_stage() -> None:
    parsed = parse_dockerfile(
        "ARG BASE=ubuntu:22.04\nARG VERSION=1.0\nFROM ${BASE}\nARG VERSION\n"
        'LABEL version="$VERSION" base="${BASE}"\n'
    )
    assert parsed.base_image == "ubuntu:22.04"
    # BASE was not redeclared after FROM, so Docker leaves it empty inside the stage.
    assert parsed.labels == {"version": "1.0", "base": ""}


def test_build_args_override_arg_defaults() -> None:
    text = "ARG BASE=gpu-platform/base:1\nFROM $BASE\nARG TORCH=2.5.1\nLABEL v=${TORCH}\n"
    parsed = parse_dockerfile(text, build_args={"BASE": "reg.io/gpu-platform/base:1", "TORCH": "2.6.0"})
    assert parsed.base_image == "reg.io/gpu-platform/base:1"
    assert parsed.labels == {"v": "2.6.0"}


def test_env_wins_over_an_arg_of_the_same_name() -> None:
    parsed = parse_dockerfile("FROM a:1\nARG X=from-arg\nENV X=from-env\nLABEL x=$X\n")
    assert parsed.labels == {"x": "from-env"}


def test_it_reads_both_env_forms_and_several_labels_per_line() -> None:
    parsed = parse_dockerfile(
        'FROM a:1\nENV LEGACY some value\nENV A=1 B="two words"\nLABEL "quoted.key"="v" other=w\n'
    )
    assert parsed.env == {"LEGACY": "some value", "A": "1", "B": "two words"}
    assert parsed.labels == {"quoted.key": "v", "other": "w"}


def test_a_later_label_overrides_an_earlier_one() -> None:
    assert parse_dockerfile("FROM a:1\nLABEL x=1\nLABEL x=2\n").labels == {"x": "2"}


def test_the_final_stage_inherits_labels_from_an_earlier_stage_it_builds_on() -> None:
    parsed = parse_dockerfile(
        "FROM python:3.11 AS builder\nLABEL stage=builder kept=yes\n"
        "FROM builder AS final\nLABEL stage=final\nEXPOSE 8888 6006\n"
    )
    assert parsed.base_image == "python:3.11"
    assert parsed.labels == {"stage": "final", "kept": "yes"}
    assert parsed.exposed_ports == ("8888", "6006")


@pytest.mark.parametrize(("accelerator", "labels"), [("gpu", {"cuda": "12"}), ("cpu", {"cpu": "yes"})])
def test_a_build_argument_in_the_final_from_picks_the_stage_it_builds_on(accelerator, labels) -> None:
    text = (
        "ARG ROOT=ubuntu:22.04\nARG ACCELERATOR=gpu\nFROM ${ROOT} AS common\nENV SHARED=1\n"
        "FROM common AS variant-gpu\nLABEL cuda=12\nFROM common AS variant-cpu\nLABEL cpu=yes\n"
        "FROM variant-${ACCELERATOR}\n"
    )
    parsed = parse_dockerfile(text, build_args={"ACCELERATOR": accelerator})
    assert (parsed.base_image, parsed.labels, parsed.env) == ("ubuntu:22.04", labels, {"SHARED": "1"})


def test_only_the_final_stage_labels_count() -> None:
    parsed = parse_dockerfile(
        "FROM a:1 AS one\nLABEL first=1\nFROM --platform=linux/amd64 b:2\nLABEL second=2\n"
    )
    assert parsed.base_image == "b:2"
    assert parsed.labels == {"second": "2"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("LABEL x=1\n", "before the first FROM"),
        ("ARG X=1\n", "no FROM"),
        ("FROM a:1\nLABEL novalue\n", "key=value"),
        ("FROM a:1\nRUN <<EOF\nLABEL fake=1\nEOF\n", "heredoc"),
        ("FROM a:1\nLABEL x=${Y:?required}\n", "unsupported substitution"),
    ],
)
def test_it_refuses_what_it_cannot_read_with_the_line_number(text: str, message: str) -> None:
    with pytest.raises(DockerfileError, match=message):
        parse_dockerfile(text)


def test_errors_name_the_line() -> None:
    with pytest.raises(DockerfileError, match=r"^line 3: "):
        parse_dockerfile("FROM a:1\n# comment\nLABEL broken\n")
