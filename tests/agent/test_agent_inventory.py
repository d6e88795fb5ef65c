"""The node agent reads GPUs and links through NVML (recorded readings, tests/agent/data)."""

from __future__ import annotations

import pytest
from fake_nvml import FakeNvml, pcie_only

from scheduler.agent.inventory import NoNvidiaDriver, cuda_version, read_inventory, start
from scheduler.datapaths import default_data_dir
from scheduler.topology.graph import Topology

TOPOLOGIES = default_data_dir() / "topologies"


def test_it_reads_identity_memory_versions_and_utilisation_of_every_gpu() -> None:
    nvml = FakeNvml.load("nvml_dgx1_v100.json")
    start(nvml)

    inventory = read_inventory(nvml)

    assert (inventory.driver_version, inventory.cuda_version) == ("535.104.05", "12.2")
    assert len(inventory.gpus) == 8
    gpu4 = inventory.gpus[4]
    assert gpu4.uuid == nvml.recording["devices"][4]["uuid"]
    assert gpu4.model == "Tesla V100-SXM2-32GB"
    assert (gpu4.memory_mib, gpu4.memory_used_mib) == (32768, 15360)
    assert (gpu4.utilization_pct, gpu4.memory_utilization_pct) == (98, 61)
    assert gpu4.pci_bus_id == "0000:85:00.0"


def test_nvlink_counts_per_pair_match_the_nvidia_smi_matrix_of_the_same_machine() -> None:
    nvml = FakeNvml.load("nvml_dgx1_v100.json")
    start(nvml)

    topology = read_inventory(nvml).topology

    assert topology is not None
    assert topology["links"] == nvml.recording["expected_links"]
    assert topology["links"][0][3] == "NV2" and topology["links"][0][5] == "SYS"
    # The PCIe path hidden behind an NVLink pair is kept (topo -mp): GPU0-GPU1 share a switch.
    assert topology["pcie"][0][1] == "PIX" and topology["pcie"][0][4] == "SYS"
    assert Topology.from_dict(topology).is_nvswitch is False


@pytest.mark.skipif(not (TOPOLOGIES / "dgx1_v100.txt").exists(), reason="../shared/data/topologies is absent")
def test_the_published_matrix_parses_into_the_same_topology_as_nvidia_smi_output() -> None:
    from scheduler.topology.parser import read_topology_file

    nvml = FakeNvml.load("nvml_dgx1_v100.json")
    start(nvml)

    ours = Topology.from_dict(read_inventory(nvml).topology or {})
    theirs = read_topology_file(str(TOPOLOGIES / "dgx1_v100.txt"))

    assert ours.classes == theirs.classes
    assert ours.nvlinks == theirs.nvlinks


def test_gpus_behind_nvswitches_see_each_other_over_all_their_links() -> None:
    nvml = FakeNvml.load("nvml_dgx_a100.json")
    start(nvml)

    topology = read_inventory(nvml).topology

    assert topology is not None
    assert topology["links"] == nvml.recording["expected_links"]
    assert Topology.from_dict(topology).is_nvswitch is True
    assert topology["pcie"][0][2] == "SYS"


def test_a_pcie_only_machine_gets_its_pcie_classes_and_survives_unsupported_calls() -> None:
    classes = [
        ["X", "PIX", "NODE", "SYS"],
        ["PIX", "X", "NODE", "SYS"],
        ["NODE", "NODE", "X", "SYS"],
        ["SYS", "SYS", "SYS", "X"],
    ]
    nvml = FakeNvml(pcie_only(classes))
    start(nvml)

    inventory = read_inventory(nvml)

    assert inventory.topology is not None
    assert inventory.topology["links"] == classes
    assert [g.utilization_pct for g in inventory.gpus] == [0, 0, 0, 0]  # NotSupported -> 0, not a crash


def test_without_a_driver_it_says_so_in_one_line() -> None:
    with pytest.raises(NoNvidiaDriver) as caught:
        start(FakeNvml.load("nvml_dgx_a100.json", driver_loaded=False))

    assert str(caught.value) == "no NVIDIA driver available (NVML: NVML Shared Library Not Found)"


def test_cuda_driver_versions_are_decoded_like_nvidia_smi_prints_them() -> None:
    assert (cuda_version(12020), cuda_version(11080), cuda_version(0)) == ("12.2", "11.8", "")
