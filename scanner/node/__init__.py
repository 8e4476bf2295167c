"""Node facts of a host root: driver and GPUs (`driver`), NVIDIA Container Toolkit injection
(`cdi`), Jetson L4T/JetPack (`tegra`), their sourced tables (`tables`); `reader.read_node`
composes them for a host scan, with `inputs.NodeInputs` saying where to read."""
