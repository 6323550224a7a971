#!/usr/bin/env bash
# docs/api.md shows docs/examples/two_layer.cc verbatim (the program the
# api_example tests build and run).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
python3 - "$root/docs/api.md" "$root/docs/examples/two_layer.cc" <<'PY'
import sys
doc, code = open(sys.argv[1]).read(), open(sys.argv[2]).read()
if "```cpp\n" + code + "```" not in doc:
    sys.exit("docs/api.md does not show docs/examples/two_layer.cc as it is")
print("docs/api.md shows the example as built")
PY
