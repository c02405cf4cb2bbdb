"""Attributes the samples of a `perf record --call-graph dwarf` of edgegate to the parts of a
request, and scales them to µs per request.

    python3 bench/perf/attribute.py perf.data CPU_US_PER_REQUEST

Each sample is charged to the leaf-most frame that belongs to a known crate (libc and std
frames are passed over, so a memcpy is charged to whoever called it, and a system call to the
code that made it); Wasmtime's frames are split by what the stack was doing (instantiating,
dropping the store and resetting the pool slot, or calling the guest). Samples with no user
frame at all are the kernel's own work (interrupts, the network stack's softirqs).
"""
import collections
import re
import subprocess
import sys

CRATES = re.compile(r"\b(edgegate_runtime|edgegate_host|edgegate_kv|edgegate_abi|edgegate_sdk|"
                    r"edgegate_bench|wasmtime\w*|hyper_util|hyper|http_body_util|h2|tokio|tracing)"
                    r"::")


def category(comm, frames):
    if comm.startswith("edgegate-epoc"):
        return "epoch ticker thread"
    if frames and frames[0] == "JIT":
        return "guest code (Wasm)"
    for frame in frames:
        if frame == "JIT":
            return "guest code (Wasm)"
        m = CRATES.search(frame)
        if not m:
            continue
        crate, rest = m.group(1), frame[m.start():]
        if crate.startswith("wasmtime"):
            stack = " ".join(frames)
            if "instantiate" in stack:
                return "instantiate"
            if "drop_in_place<wasmtime" in stack or "deallocate" in stack or "pagemap" in stack:
                return "store drop and pool slot reset"
            return "guest call machinery (fiber, trampolines, epoch check)"
        if rest.startswith("edgegate_runtime::cpu"):
            return "CPU metering"
        if rest.startswith(("edgegate_runtime::hostcalls::kv", "edgegate_kv")):
            return "KV hostcalls"
        if rest.startswith(("edgegate_runtime::hostcalls::jws", "edgegate_runtime::keys")):
            return "JWT hostcall"
        if rest.startswith("edgegate_runtime::hostcalls"):
            return "other hostcalls"
        if rest.startswith(("edgegate_runtime::request::decode", "edgegate_abi::outcome")):
            return "decode the outcome"
        if rest.startswith("edgegate_abi"):
            return "encode the request"
        if crate == "edgegate_runtime":
            return "runtime: store setup, limits, request state"
        if rest.startswith(("edgegate_host::listener", "edgegate_host::connection")):
            return "HTTP (hyper), connection"
        if crate in ("edgegate_host", "tracing"):
            return "gateway (routing, body, ids, metrics, logs)"
        if crate in ("hyper", "hyper_util", "http_body_util", "h2"):
            return "HTTP (hyper), connection"
        if crate == "tokio":
            return "sockets and TCP (kernel), epoll, tokio"
        if crate == "edgegate_bench":
            return "native handler"
    return "kernel only (interrupts, network softirqs)" if all(f.endswith("[k]") for f in frames) \
        else "other user code"


def samples(path):
    text = subprocess.run(["perf", "script", "-i", path, "-F", "comm,ip,sym,dso"],
                          capture_output=True, text=True, check=True).stdout
    comm, frames = None, []
    for line in text.splitlines() + [""]:
        if not line.strip():
            if frames:
                yield comm, frames
            comm, frames = None, []
        elif not line.startswith((" ", "\t")):
            comm = line.split()[0]
        else:
            parts = line.strip().split(None, 1)
            rest = parts[1] if len(parts) > 1 else ""
            if not frames and rest.startswith("[unknown]") and not parts[0].startswith("ffffffff"):
                frames.append("JIT")  # Cranelift's code has no symbols here: the guest
                continue
            kernel = "kernel.kallsyms" in rest
            frames.append(re.sub(r" \(.*\)$", "", rest) + (" [k]" if kernel else ""))


def main():
    path, per_request = sys.argv[1], float(sys.argv[2])
    counts, kernel = collections.Counter(), collections.Counter()
    for comm, frames in samples(path):
        name = category(comm, frames)
        counts[name] += 1
        kernel[name] += frames[0].endswith("[k]")
    total = sum(counts.values())
    print(f"{total} samples, {per_request:.2f} CPU µs per request\n")
    print("| part | share | µs per request | of it in the kernel |")
    print("|---|---|---|---|")
    for name, n in counts.most_common():
        print(f"| {name} | {100 * n / total:.1f} % | {per_request * n / total:.2f} | "
              f"{per_request * kernel[name] / total:.2f} |")


if __name__ == "__main__":
    main()
