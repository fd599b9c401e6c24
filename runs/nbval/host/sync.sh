#!/usr/bin/env bash
# On a lab GPU host, from the run's copy of the working tree: copy the tree (not the staged wheels, not .git) to a
# fresh /tmp/book, where runs/nbval/gpu_batch.sh runs and which outlives the call. Records merged into the working
# tree before this call are the ones the host's `make compare` reads as the book's. /tmp/book is emptied first, so
# nothing removed from the tree survives there to be collected as if a batch had made it.
set -euo pipefail
rm -rf /tmp/book
mkdir -p /tmp/book
tar --exclude=./.gpu-wheels --exclude=./.git --exclude=./.venv --exclude=./_build -cf - . | tar -xf - -C /tmp/book
echo "synced $(find /tmp/book -type f | wc -l) files to /tmp/book"
