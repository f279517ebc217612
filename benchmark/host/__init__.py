"""Host-side (CPU) benchmarks of the plugin's per-decode-step hook overhead."""
