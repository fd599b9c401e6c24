#!/usr/bin/env bash
# On a lab GPU host, from the run's copy of the working tree: copy the tree (not the staged wheels, not .git) to
# /tmp/book, where runs/nbval/gpu_batch.sh runs and which outlives the call. Records merged into the working tree
# before this call are the ones the host's `make compare` reads as the book's.
set -eu
mkdir -p /tmp/book
tar --exclude=./.gpu-wheels --exclude=./.git -cf - . | tar -xf - -C /tmp/book
echo "synced $(find /tmp/book -type f | wc -l) files to /tmp/book"
