"""The built-in model's raw speed on this CPU: which instruction sets and how many parallel
sequences pay off. It decides two things: whether scripts/setup-llama-cpp builds llama.cpp with
AVX-512 when the CPU has it (yes), and whether the built-in model should decode several requests
at once in parallel slots (not worth a second runtime on 2 cores: see the table).

A script, not a test: it measures and prints, it never asserts on time.

    .venv/bin/python benchmarks/bench_llama_cpu.py            # prints the table
    .venv/bin/python benchmarks/bench_llama_cpu.py --write    # also replaces its section in docs/benchmarks.md

It downloads the pinned llama-cpp-python source (PyPI), builds llama.cpp's own `llama-batched-bench`
from the llama.cpp it vendors, once with the portable flags (AVX2) and once with AVX-512 added when
this CPU lists it, and runs each on the bundled model: a prompt of PP tokens then TG generated
tokens, for B sequences decoded together. The builds take about 10 minutes each on 2 cores and are
kept in --work (default /tmp/thoughtmap-llama-cpu) for a rerun. Stop other work on the machine
first: anything else on the cores lowers every number.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402
from engine.config import LocalModelSettings  # noqa: E402
from engine.llm.local_model import resolve_model_file  # noqa: E402

VERSION = "0.3.36"  # scripts/setup-llama-cpp's pin
SECTION = "llama_cpu"
AVX512_FLAGS = ["-DGGML_AVX512=ON", "-DGGML_AVX512_VBMI=ON", "-DGGML_AVX512_VNNI=ON", "-DGGML_AVX512_BF16=ON"]
AVX512_CPU_FLAGS = (
    "avx512f",
    "avx512cd",
    "avx512vl",
    "avx512dq",
    "avx512bw",
    "avx512vbmi",
    "avx512_vnni",
    "avx512_bf16",
)
ROW = re.compile(
    r"^\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*\d+\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|"
    r"\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|"
)


def cpu_has_avx512() -> bool:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    flags = set(next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []))
    return all(flag in flags for flag in AVX512_CPU_FLAGS)


def source_tree(work: Path) -> Path:
    tree = work / f"llama_cpp_python-{VERSION}" / "vendor" / "llama.cpp"
    if tree.exists():
        return tree
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"llama-cpp-python=={VERSION}",
            "-d",
            str(work),
        ],
        check=True,
    )
    with tarfile.open(work / f"llama_cpp_python-{VERSION}.tar.gz") as archive:
        archive.extractall(work, filter="data")
    return tree


def build(tree: Path, name: str, extra_flags: list[str]) -> Path:
    binary = tree / f"build-{name}" / "bin" / "llama-batched-bench"
    if binary.exists():
        return binary
    subprocess.run(
        [
            "cmake",
            "-S",
            str(tree),
            "-B",
            str(tree / f"build-{name}"),
            "-G",
            "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DGGML_NATIVE=OFF",
            "-DLLAMA_CURL=OFF",
            "-DLLAMA_OPENSSL=OFF",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_BUILD_SERVER=OFF",
            *extra_flags,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        ["cmake", "--build", str(tree / f"build-{name}"), "-j2", "--target", "llama-batched-bench"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return binary


def run(binary: Path, model: Path, prompt: int, generated: int, parallel: str, threads: int) -> list[tuple]:
    result = subprocess.run(
        [
            str(binary),
            "-m",
            str(model),
            "-c",
            "16384",
            "-b",
            "2048",
            "-ub",
            "512",
            "-npp",
            str(prompt),
            "-ntg",
            str(generated),
            "-npl",
            parallel,
            "-t",
            str(threads),
            "-fa",
            "on",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in result.stdout.splitlines():
        match = ROW.match(line)
        if match:
            pp, tg, b, t_pp, s_pp, t_tg, s_tg, t_all, s_all = match.groups()
            rows.append((int(pp), int(tg), int(b), float(s_pp), float(s_tg), float(t_all)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="replace the section in docs/benchmarks.md")
    parser.add_argument("--work", type=Path, default=Path("/tmp/thoughtmap-llama-cpu"))
    parser.add_argument("--prompt", type=int, default=700, help="prompt tokens per sequence (a typical call here)")
    parser.add_argument("--generated", type=int, default=200, help="generated tokens per sequence")
    parser.add_argument("--parallel", default="1,2,4,8", help="sequences decoded together")
    parser.add_argument("--threads", type=int, default=LocalModelSettings().threads)
    args = parser.parse_args()

    model = resolve_model_file(LocalModelSettings())
    tree = source_tree(args.work)
    variants = [("AVX2 (portable)", [])] + ([("AVX-512", AVX512_FLAGS)] if cpu_has_avx512() else [])
    measured = []
    single = {}
    for name, flags in variants:
        binary = build(tree, "avx512" if flags else "avx2", flags)
        for pp, tg, b, s_pp, s_tg, t_all in run(
            binary, model, args.prompt, args.generated, args.parallel, args.threads
        ):
            per_request = t_all / b
            single.setdefault(name, per_request if b == 1 else None)
            measured.append((name, b, s_pp, s_tg, per_request))
    baseline = single.get("AVX2 (portable)") or measured[0][4]
    rows = [
        [name, b, f"{s_pp:.0f}", f"{s_tg:.1f}", f"{per_request:.2f} s", f"{baseline / per_request:.2f}x"]
        for name, b, s_pp, s_tg, per_request in measured
    ]
    command = "benchmarks/bench_llama_cpu.py" + (" --write" if args.write else "")
    body = (
        "## Built-in model: CPU instruction sets and parallel decoding (`bench_llama_cpu.py`)\n\n"
        + facts_block(command, machine_facts())
        + f"\nllama.cpp as vendored by llama-cpp-python {VERSION}, its `llama-batched-bench`, the bundled "
        f"{model.name}, {args.threads} threads, flash attention. Each of B sequences: a {args.prompt}-token "
        f'prompt, then {args.generated} generated tokens. "Per request" is the whole batch\'s time over B; '
        '"speed-up" is against one AVX2 request at a time (what the built-in model did before AVX-512).\n\n'
        + table(
            ["build", "B", "prompt tokens/s", "generation tokens/s (all sequences)", "per request", "speed-up"], rows
        )
    )
    publish(SECTION, body, args.write)


if __name__ == "__main__":
    main()
