"""Which server `kvtune bench` is talking to, and the prompt-cache policy it measures under.

`kvtune run` sends llama-server ``cache_prompt: false`` so every request pays for its own
prefill; a bench of the same server that let the slot cache serve the chat template's shared
prefix would report a faster TTFT than the study measured (seen here: 2.7-3.1 s against
3.5-3.8 s). So the bench finds out whether the server is llama-server (its ``/props`` answers
with ``total_slots`` / ``default_generation_settings``), applies the same policy as the tuner
unless told otherwise, and says which policy it used. Workloads that reuse prefixes
(``Workload.reuses_prefixes``: conversations, a trace, a shared system prompt) are the exception:
the tuner measures them with the cache on, as a user's server would, and so does the bench. vLLM's prefix cache is a server flag
(``--enable-prefix-caching``), not a per-request field: the bench can only report it.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from kvtune.kinds import StrEnum
from kvtune.workload import Workload


class PromptCache(StrEnum):
    OFF = "off"  # defeat the server's prompt cache (what `kvtune run` measures for unrelated prompts)
    ON = "on"  # let the server reuse cached prompt prefixes
    SERVER = "server"  # send nothing: whatever the server's own default is


@dataclass(frozen=True)
class ServerKind:
    name: str  # "llama-server", "vllm" or "unknown"
    detail: str = ""

    def cache_body(self, policy: PromptCache) -> dict:
        """Extra request fields that apply `policy` on this server."""
        if self.name == "llama-server" and policy is not PromptCache.SERVER:
            return {"cache_prompt": policy is PromptCache.ON}
        return {}

    def describe_policy(self, policy: PromptCache, workload: Workload) -> str:
        """The policy in words. kvtune run measures a workload that reuses prefixes (a trace,
        conversations, a shared system prompt) with the cache on, synthetic prompts without."""
        if self.name == "llama-server":
            if policy is PromptCache.SERVER:
                return "prompt cache: the server's default (cache_prompt not sent)"
            measured = PromptCache.ON if workload.reuses_prefixes else PromptCache.OFF
            return (
                f"prompt cache: {policy.value} (cache_prompt={'true' if policy is PromptCache.ON else 'false'} "
                f"sent{', as kvtune run measures' if policy is measured else ''})"
            )
        if workload.multiturn:
            shared = "each conversation has a unique nonce, its turns share their history"
        elif workload.reuses_prefixes:
            shared = "requests share prefixes as the workload does"
        else:
            shared = "each prompt has a unique nonce"
        if self.name == "vllm":
            return f"prompt cache: set by the server (vLLM --enable-prefix-caching); {shared}"
        return f"prompt cache: unknown server; {shared}"


def detect_server(
    base_url: str, *, api_key: str | None = None, transport: httpx.BaseTransport | None = None
) -> ServerKind:
    """llama-server from /props, vLLM from /version; "unknown" when neither answers. Never raises."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    base = base_url.rstrip("/")
    try:
        with httpx.Client(timeout=5.0, headers=headers, transport=transport) as c:
            props = _json(c, base + "/props")
            if isinstance(props, dict) and ("total_slots" in props or "default_generation_settings" in props):
                return ServerKind("llama-server", str(props.get("build_info") or ""))
            version = _json(c, base + "/version")
            if isinstance(version, dict) and "version" in version:
                return ServerKind("vllm", str(version["version"]))
    except httpx.HTTPError:
        pass
    return ServerKind("unknown")


def _json(client: httpx.Client, url: str) -> object:
    r = client.get(url)
    if r.status_code != 200:
        return None
    try:
        return r.json()
    except ValueError:
        return None
