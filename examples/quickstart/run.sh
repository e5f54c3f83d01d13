#!/usr/bin/env bash
# Quickstart: a table, a materialized view kept up to date, changes flowing through it.
source "$(dirname "$0")/../lib.sh"

start_swell
say "running examples/quickstart/quickstart.sql"
out=$(sql -f examples/quickstart/quickstart.sql)
echo "$out"

# the view before and after the DELETE / UPDATE / overwriting INSERT
expected='a|2|15|5|10|7.5
b|1|7|7|7|7
a|1|6|6|6|6
b|1|50|50|50|50'
[ "$out" = "$expected" ] || fail "the view's rows differ from the expected ones"
say "OK: the view followed every change"
