#!/usr/bin/env bash
# collect.sh TAG: what a batch made, into $OUT/TAG.tgz: its logs, the records (runs/*.json), the executed notebooks
# and the records a chapter reads (chapters/*.json: chapter 6's command-line records, made on the host just before
# its execution, belong with its outputs). Collect after each mark: the session's device time may end first.
# Exits with tar's status, and lists the records in the archive, so a partial archive does not pass for a whole one.
set -u
cd /tmp/book
files=(runs/*.json chapters/*.ipynb chapters/*.json)
tar -czf "$OUT/$1.tgz" -C / tmp/logs -C /tmp/book "${files[@]}"
rc=$?
echo "tar EXIT=$rc"
tar -tzf "$OUT/$1.tgz" | grep -E '(ecg_cli_.*\.json|chapter_runs\.json|claims\.json)$' || true
ls -la "$OUT"
exit $rc
