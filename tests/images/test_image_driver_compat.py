"""Submission refuses an image whose minimum NVIDIA driver no node of the cluster has."""

from __future__ import annotations

import pytest

from images.compat import driver_incompatibility, newest_driver, parse_driver_version


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("535.104.05", (535, 104, 5)),
        ("550.54", (550, 54)),
        ("550.54.0", (550, 54)),
        (" 470.82.01 ", (470, 82, 1)),
        ("", None),
        (None, None),
        ("N/A", None),
        ("535.", None),
        ("v535.54", None),
    ],
)
def test_it_parses_dotted_driver_versions_and_rejects_anything_else(text, expected) -> None:
    assert parse_driver_version(text) == expected


def test_it_compares_driver_parts_as_numbers_not_text() -> None:
    # As text "535.54.03" > "535.104.05"; as numbers 104 > 54.
    newer, older = parse_driver_version("535.104.05"), parse_driver_version("535.54.03")
    assert newer is not None and older is not None
    assert newer > older
    assert newest_driver(["535.54.03", "535.104.05", "470.82.01"]) == "535.104.05"


def test_it_accepts_an_image_when_one_node_is_new_enough() -> None:
    assert driver_incompatibility("550.54.15", ["535.104.05", "550.54.15"]) is None
    assert driver_incompatibility("550.54.15", ["560.35.03"]) is None


def test_it_treats_missing_trailing_parts_as_zero() -> None:
    assert driver_incompatibility("550.54", ["550.54.0"]) is None
    assert driver_incompatibility("550.54.1", ["550.54"]) is not None


def test_it_refuses_an_image_newer_than_every_nodes_driver_with_an_actionable_reason() -> None:
    reason = driver_incompatibility(
        "550.54.15", ["535.104.05", "470.82.01", "535.54.03"], image="gpu-platform/pytorch:2.5.1"
    )
    assert reason is not None
    assert "gpu-platform/pytorch:2.5.1" in reason
    assert ">= 550.54.15" in reason
    # It names the newest driver available, so the user knows which image floor would fit.
    assert "535.104.05" in reason
    assert "older CUDA" in reason and "CPU image" in reason and "upgrade" in reason


def test_it_ignores_nodes_whose_driver_is_unknown() -> None:
    assert driver_incompatibility("550.54.15", ["", None, "N/A", "560.28.03"]) is None
    reason = driver_incompatibility("550.54.15", ["", None, "535.104.05"])
    assert reason is not None and "535.104.05" in reason


def test_it_does_not_refuse_when_no_node_reports_a_driver() -> None:
    assert driver_incompatibility("550.54.15", []) is None
    assert driver_incompatibility("550.54.15", ["", None]) is None


def test_an_image_without_a_minimum_driver_runs_anywhere() -> None:
    assert driver_incompatibility("", ["470.82.01"]) is None
    assert driver_incompatibility("  ", []) is None


def test_a_malformed_minimum_driver_is_refused_as_a_catalog_error() -> None:
    reason = driver_incompatibility("latest", ["560.35.03"], image="custom:1")
    assert reason is not None
    assert "custom:1" in reason and "invalid minimum NVIDIA driver" in reason


def test_it_accepts_any_iterable_of_drivers() -> None:
    assert driver_incompatibility("550.54.15", (d for d in ["535.104.05", "555.42.06"])) is None
