#!/usr/bin/env bash
# contrib/prometheus: the rules parse (promtool check rules) and do what their
# unit tests say (promtool test rules), on series as mlmond writes them.
set -euo pipefail
dir=$1
command -v promtool >/dev/null || { echo "SKIP: needs prometheus: promtool is not installed (Debian package prometheus)"; exit 77; }
cd "$dir"
promtool check rules mlmond.rules.yml
promtool test rules mlmond.rules.test.yml
