"""Pure scoring: per-request samples -> metrics, targets ("ttft<1s") -> constraint margins."""
