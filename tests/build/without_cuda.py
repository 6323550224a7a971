"""The build without CUDA must compile with -Werror as well.

A machine with the CUDA toolkit never builds ddp without it, yet users without
CUDA (the `cuda` feature off, or no toolkit found) do, with -Werror on: code
that only the CUDA branch of `#if DDP_WITH_CUDA` uses (a helper left unused
without it) breaks their build alone. This compiles every source that tests
DDP_WITH_CUDA again as that build would: its command from the build's
compile_commands.json, with a ddp_config.h saying 0 found first, at -O0 (the
warnings do not depend on optimisation) and writing nothing.

  python3 without_cuda.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile


def main():
    build, source = (os.path.abspath(p) for p in sys.argv[1:3])
    config = open(os.path.join(build, "ddp_config.h")).read()
    off, n = re.subn(r"#define DDP_WITH_CUDA 1\b", "#define DDP_WITH_CUDA 0", config)
    if n != 1:
        sys.exit("this build's ddp_config.h does not set DDP_WITH_CUDA 1: nothing to check")
    commands = {}
    for entry in json.load(open(os.path.join(build, "compile_commands.json"))):
        path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
        commands.setdefault(path, entry)  # a source in several targets: its first
    checked = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "ddp_config.h"), "w") as f:
            f.write(off)
        for path, entry in sorted(commands.items()):
            if not path.endswith(".cc") or not path.startswith(source + os.sep):
                continue
            if "DDP_WITH_CUDA" not in open(path).read():
                continue
            words = shlex.split(entry["command"])
            args, skip = [words[0], "-I" + tmp], False
            for word in words[1:]:
                if skip:
                    skip = False
                elif word in ("-o", "-MQ", "-MF"):
                    skip = True
                elif word != "-MD" and not re.fullmatch(r"-O[0-3s]", word):
                    args.append(word)
            result = subprocess.run(args + ["-O0", "-o", os.devnull], cwd=entry["directory"],
                                    capture_output=True, text=True)
            relative = os.path.relpath(path, source)
            if result.returncode != 0:
                print(result.stderr)
                sys.exit(f"{relative} does not compile without CUDA")
            checked.append(relative)
    if not checked:
        sys.exit("no source tests DDP_WITH_CUDA: the check checked nothing")
    print(f"{len(checked)} sources compile without CUDA: {', '.join(checked)}")


if __name__ == "__main__":
    main()
