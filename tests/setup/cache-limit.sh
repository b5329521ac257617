#!/usr/bin/env bash
# Keeps the build cache from filling the disk. Every CI run builds from a new clone, so
# cargo keeps adding artifacts for changed sources and never removes old ones; left alone the
# cache grew past 36 GB here and the disk filled. Removing it only costs the next build's time.
# Usage: cache-limit.sh <target dir>   (limit: KBNG_CACHE_MAX_GB, default 30; and at least
# KBNG_DISK_MIN_FREE_GB, default 20, free on its file system)
set -euo pipefail
target=${1:?usage: cache-limit.sh <target dir>}
max_gb=${KBNG_CACHE_MAX_GB:-30}
min_free_gb=${KBNG_DISK_MIN_FREE_GB:-20}
if [[ ! -d $target ]]; then
    echo "cache: $target absent: this build starts cold"
    exit 0
fi

size_gb=$(( $(du -sk "$target" | cut -f1) / 1024 / 1024 ))
free_gb=$(( $(df -Pk "$target" | awk 'NR == 2 { print $4 }') / 1024 / 1024 ))
if ((size_gb < max_gb && free_gb >= min_free_gb)); then
    echo "cache: $target is $size_gb GB (limit $max_gb), $free_gb GB free: kept"
    exit 0
fi
echo "cache: $target is $size_gb GB (limit $max_gb), $free_gb GB free (want $min_free_gb):" \
    "removing it; this build starts cold"
rm -rf "$target"
