#!/usr/bin/env bash
# bg.sh NAME CMD...: run CMD in /tmp/book detached from this call (a plain `nohup ... &` dies when the call ends),
# its output in /tmp/logs/NAME.out. Poll it with calls less than 30 s apart: an idle host is recycled.
set -eu
name=$1; shift
mkdir -p /tmp/logs; cd /tmp/book
setsid nohup "$@" > "/tmp/logs/$name.out" 2>&1 < /dev/null &
echo "started $name: $*"
