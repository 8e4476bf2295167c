"""Runtime truth on a live host (``--runtime``): the GPU libraries mapped into each process.

`procfs` walks ``/proc/*/maps``, `cgroup` tells each process's container and pod, `loaded`
hashes the bytes as loaded and compares them with the disk. The pipeline turns the result into
each library's ``loaded_by`` and the loaded-* findings.
"""
