"""Security advisories: the pure parts (feed readers, NVIDIA version texts, matching)."""
