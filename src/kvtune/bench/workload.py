"""What load a trial drives at the server: the shape of each request and how many at once.

The default is the issue's demo workload: 8 concurrent users (closed loop), prompts of about 200
tokens, 64 output tokens forced with ``ignore_eos``, and enough requests for four rounds, after
one warm-up round of the same shape that is left out of the metrics.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from kvtune.errors import SpecError


@dataclass(frozen=True)
class Workload:
    concurrency: int = 8
    prompt_tokens: int = 200
    output_tokens: int = 64
    num_requests: int = 32
    warmup_requests: int = 8
    # Seconds one request may take before it counts as failed (a hung server is a failure).
    request_timeout_s: float = 120.0
    seed: int = 0

    @property
    def request_tokens(self) -> int:
        """Context one request occupies: prompt + output. A server slot must hold at least this."""
        return self.prompt_tokens + self.output_tokens

    def validate(self) -> "Workload":
        for name in ("concurrency", "prompt_tokens", "output_tokens", "num_requests"):
            if getattr(self, name) < 1:
                raise SpecError(f"workload.{name} must be at least 1, got {getattr(self, name)}")
        if self.warmup_requests < 0:
            raise SpecError(f"workload.warmup_requests must be >= 0, got {self.warmup_requests}")
        if not (self.request_timeout_s > 0 and math.isfinite(self.request_timeout_s)):
            raise SpecError(f"workload.request_timeout_s must be a positive number, got {self.request_timeout_s}")
        if not 0 <= self.seed < 2**32:
            raise SpecError(f"workload.seed must be between 0 and 2**32-1, got {self.seed}")
        return self

    def to_dict(self) -> dict:
        return asdict(self)
