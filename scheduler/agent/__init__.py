"""GPU node agent: reads the node's GPUs through NVML and publishes them on its Kubernetes Node.

``inventory`` reads (through any pynvml-like module, so tests replay recorded readings), ``publish``
turns a reading into Node labels and annotations (the contract in scheduler.backends.kubernetes.contract)
and ``python -m scheduler.agent`` runs it on a period, as the node-agent DaemonSet does.
"""
