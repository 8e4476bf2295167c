"""gpuprov scanner: finds, identifies, hashes and verifies GPU libraries in hosts and images."""

__version__ = "0.1.0"
