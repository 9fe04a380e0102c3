#!/usr/bin/env bash
# Makes the hostile stand-ins for a file argument in directory $1:
#   dir     a directory
#   fifo    a FIFO nobody writes to or reads from (opening it would block)
#   locked  a file with mode 000 (unreadable to %unprivileged)
#   growing a link to /proc/self/status: its size reads 0, its content is not
#           (the reading process sees a file that changes size while read)
set -euo pipefail
mkdir -p "$1/dir"
mkfifo "$1/fifo"
echo "secret" > "$1/locked" && chmod 000 "$1/locked"
ln -s /proc/self/status "$1/growing"
