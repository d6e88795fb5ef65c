"""The ``nvidia-smi topo -m`` parser on every shared matrix, odd layouts and garbage."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.topology import topology_from_any
from scheduler.topology.graph import Topology
from scheduler.topology.parser import TopologyParseError, parse_topology
from tests.scheduler.topology.topo_helpers import TOPOLOGY_DIR, load, matrix_files, needs_data

pytestmark = pytest.mark.data

# file -> (GPU count, {(i, j): printed link}, count of each GPU-pair class from the README)
EXPECTED: dict[str, tuple[int, dict[tuple[int, int], str], dict[str, int]]] = {
    "dgx1_v100": (
        8,
        {(0, 3): "NV2", (0, 1): "NV1", (0, 5): "SYS", (4, 7): "NV2"},
        {"NV1": 8, "NV2": 8, "SYS": 12},
    ),
    "dgx1_pcie_only_topo_mp": (
        8,
        {(0, 1): "PIX", (0, 2): "PHB", (3, 4): "SYS"},
        {"PIX": 4, "PHB": 8, "SYS": 16},
    ),
    "dgx_a100": (8, {(0, 7): "NV12", (3, 4): "NV12"}, {"NV12": 28}),
    "hgx_h100_8gpu_nvswitch": (8, {(0, 1): "NV18", (2, 6): "NV18"}, {"NV18": 28}),
    "hgx_h100_8gpu_nonic_ht": (8, {(0, 7): "NV18"}, {"NV18": 28}),
    "hgx_h100_4gpu_nv6": (4, {(0, 3): "NV6"}, {"NV6": 6}),
    "dell_c4140_v100x4_nv2_mesh": (4, {(1, 2): "NV2"}, {"NV2": 6}),
    "ibm_ac922_v100x4_nv3pairs": (4, {(0, 1): "NV3", (2, 3): "NV3", (1, 2): "SYS"}, {"NV3": 2, "SYS": 4}),
    "a100_pcie_8x_nv12_bridge_pairs": (
        8,
        {(0, 1): "NV12", (0, 2): "NODE", (3, 4): "SYS", (6, 7): "NV12"},
        {"NV12": 4, "NODE": 8, "SYS": 16},
    ),
    "rtx_a6000x3_nv4_bridge_pair": (3, {(0, 1): "NV4", (0, 2): "NODE"}, {"NV4": 1, "NODE": 2}),
    "gpu3_nv4_pair_plus_pcie": (3, {(0, 1): "NV4", (1, 2): "NODE"}, {"NV4": 1, "NODE": 2}),
    "l40s_8x_pcie_2socket": (8, {(0, 3): "NODE", (3, 4): "SYS"}, {"NODE": 12, "SYS": 16}),
    "l40s_4x_pcie_2socket": (4, {(0, 1): "NODE", (1, 2): "SYS"}, {"NODE": 2, "SYS": 4}),
    "pcie_8gpu_pix_pairs_2socket": (
        8,
        {(2, 3): "PIX", (1, 2): "PHB", (0, 7): "SYS"},
        {"PIX": 4, "PHB": 8, "SYS": 16},
    ),
    "t4_4x_pcie_2socket": (4, {(0, 1): "SYS", (1, 3): "NODE"}, {"NODE": 3, "SYS": 3}),
    "pcie_5gpu_mixed_phb_node_sys": (
        5,
        {(1, 2): "PHB", (1, 3): "NODE", (0, 4): "SYS"},
        {"PHB": 2, "NODE": 4, "SYS": 4},
    ),
}


@needs_data
def test_every_shared_matrix_has_an_expectation() -> None:
    assert {p.stem for p in matrix_files()} == set(EXPECTED)


@needs_data
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_it_reads_gpu_count_and_link_classes_of_each_shared_matrix(name: str) -> None:
    count, pairs, histogram = EXPECTED[name]
    topo = load(name)
    assert topo.gpu_count == count
    for (i, j), link in pairs.items():
        assert topo.link(i, j) == link
        assert topo.link(j, i) == link
    seen: dict[str, int] = {}
    for i in range(count):
        for j in range(i + 1, count):
            seen[topo.link(i, j)] = seen.get(topo.link(i, j), 0) + 1
    assert seen == histogram


@needs_data
def test_it_keeps_nic_names_from_the_nic_legend_and_cpu_numa_affinity() -> None:
    topo = load("gpu3_nv4_pair_plus_pcie")
    assert topo.nics == ("mlx5_0", "mlx5_1")
    assert topo.gpu_nic[2] == ("PHB", "PHB")
    assert topo.cpu_affinity == ("64-71", "64-71", "64-71")
    assert topo.numa == ("1", "1", "1")


@needs_data
def test_it_reads_affinity_after_an_empty_cell_and_truncated_nic_rows() -> None:
    topo = load("hgx_h100_8gpu_nvswitch")
    assert topo.numa == ("0",) * 4 + ("1",) * 4
    assert topo.cpu_affinity[5] == "80-159"
    assert len(topo.nics) == 9
    assert topo.gpu_nic[0][8] == "PIX"


@needs_data
def test_it_detects_nvswitch_boards_but_not_direct_meshes() -> None:
    assert load("dgx_a100").is_nvswitch
    assert load("hgx_h100_8gpu_nvswitch").is_nvswitch
    assert not load("hgx_h100_4gpu_nv6").is_nvswitch  # 3 x NV6 = 18 links: a direct mesh
    assert not load("dell_c4140_v100x4_nv2_mesh").is_nvswitch


def test_tabs_and_spaces_give_the_same_topology() -> None:
    crlf_bom = "\ufeff\tGPU0\tGPU1\tCPU Affinity\r\nGPU0\t X \tPIX\t0-7\r\nGPU1\tPIX\t X \t0-7\r\n"
    tabs = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPIX\t0-7\nGPU1\tPIX\t X \t0-7\n"
    spaces = (
        "        GPU0    GPU1    CPU Affinity\nGPU0     X      PIX     0-7\nGPU1    PIX      X      0-7\n"
    )
    assert parse_topology(tabs) == parse_topology(spaces) == parse_topology(crlf_bom)


def test_gpu_rows_that_lost_their_nic_cells_keep_their_affinity() -> None:
    text = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV4\t0-7\t0\nGPU1\tNV4\t X \tPIX\t0-7\t0\n"
    topo = parse_topology(text)
    assert topo.link(0, 1) == "NV4"
    assert topo.gpu_nic == (("",), ("PIX",))
    assert topo.cpu_affinity == ("0-7", "0-7") and topo.numa == ("0", "0")
    with pytest.raises(TopologyParseError, match="line 2: unknown link code 'BAD' in column NIC0"):
        parse_topology(text.replace("NV4\t0-7", "NV4\tBAD\t0-7"))


def test_it_accepts_the_legacy_soc_code_and_a_shell_prompt_line() -> None:
    text = "$ nvidia-smi topo -m\n\tGPU0\tGPU1\nGPU0\t X \tSOC\nGPU1\tSOC\t X \n\nLegend:\n  SOC  = path"
    topo = parse_topology(text)
    assert topo.link(0, 1) == "SYS"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "line 1: empty input"),
        ("hello world\n", "line 1: expected the header row"),
        ("\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tPIX\t X \n", "line 2: unknown link code 'FOO' in column GPU1"),
        ("\tGPU0\tGPU1\nGPU0\t X \tPIX\n", "matrix ends without row GPU1"),
        ("\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPHB\t X \n", "line 3: GPU1->GPU0 is PHB but GPU0->GPU1 is PIX"),
        ("\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU7\tPIX\t X \n", "line 3: row 'GPU7' is not a column"),
        ("\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\n", "line 3: row GPU1 has 1 cells, the header has 2 GPUs"),
        ("\tGPU0\tGPU1\nGPU0\tPIX\tPIX\nGPU1\tPIX\t X \n", "line 2: cell GPU0/GPU0 is 'PIX'"),
    ],
)
def test_garbage_gives_one_clear_error_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(TopologyParseError) as info:
        parse_topology(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@needs_data
@pytest.mark.parametrize("path", matrix_files(), ids=lambda p: p.stem)
def test_the_dict_form_round_trips(path: Path) -> None:
    topo = load(path.stem)
    again = Topology.from_dict(topo.to_dict())
    assert again == topo
    assert topology_from_any(topo.to_dict()) == topo


def test_a_malformed_dict_gives_one_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown link code 'ZZ'"):
        Topology.from_dict({"links": [["X", "ZZ"], ["ZZ", "X"]]})
    with pytest.raises(ValueError, match="malformed topology dict"):
        Topology.from_dict({"nics": []})


@needs_data
def test_matrix_text_in_node_topology_is_parsed() -> None:
    text = (TOPOLOGY_DIR / "dgx1_v100.txt").read_text()
    topo = topology_from_any(text)
    assert topo is not None and topo.link(0, 3) == "NV2"
