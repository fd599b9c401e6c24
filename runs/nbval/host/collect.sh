#!/usr/bin/env bash
# collect.sh TAG: what a batch made, into $OUT/TAG.tgz: its logs, the records (runs/*.json), the executed notebooks
# and the records a chapter reads (chapters/*.json: chapter 6's command-line records, made on the host just before
# its execution, belong with its outputs). Collect after each mark: the session's device time may end first.
set -u
cd /tmp/book
tar czf "$OUT/$1.tgz" /tmp/logs runs/*.json chapters/*.ipynb chapters/*.json 2>/dev/null
ls -la "$OUT"
