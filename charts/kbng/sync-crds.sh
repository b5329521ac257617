#!/usr/bin/env bash
# Copy the generated CRDs (crds/yaml, produced by `cargo run -p kbng-crds --bin crdgen`)
# into the chart. Helm installs charts/kbng/crds/ before any template. A test
# (operator/tests/chart.rs) fails when the copies differ, so run this after crdgen.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
rm -f "$here"/crds/*.yaml
cp "$root"/crds/yaml/*.yaml "$here/crds/"
echo "copied $(ls "$root"/crds/yaml/*.yaml | wc -l) CRDs into charts/kbng/crds/"
