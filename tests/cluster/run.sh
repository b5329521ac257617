#!/usr/bin/env bash
# Suite entry for the project's test command: build (or reuse) the control-plane binaries in
# the machine-level cache, then prove the harness with smoke.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bash "$here/build.sh" >/dev/null
exec bash "$here/smoke.sh"
