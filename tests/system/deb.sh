#!/usr/bin/env bash
# Usage: tests/system/deb.sh SOURCEDIR BUILDDIR
#
# The Debian package, the way an operator installs it: builds it from SOURCEDIR with
# tools/build-deb.sh (into BUILDDIR/deb, once per run), checks it with lintian, and installs it
# with apt into a Debian 12 booted under systemd-nspawn (lib.sh's cached debootstrap, with the
# libraries mlmond needs removed first, so that only the package's Depends can bring them
# back). Then: the service runs and is enabled, the user and directories exist, the API answers,
# mlmonctl registers a process, python3 imports mlmon; an upgrade (the same package as a newer
# version) restarts mlmond and keeps the database and the live run; apt remove stops it and
# keeps the data; apt purge removes it.
#
# apt in the container reads a local repository (the container has no network): the packages
# the installation needs beyond the container's, which apt-get on this machine works out and
# downloads from Debian's archive once (cached in $MLMOND_TEST_CACHE/debs), or, where the
# archive cannot be reached, takes from this machine's apt cache or rebuilds with dpkg-repack
# from what is installed here.
#
# Exit status: 0 all checks passed, 1 a check failed, 77 this machine cannot run the container
# (see lib.sh).
#
# Environment: those of lib.sh; DEB_BUILD_OPTIONS (nocheck is added: the unit tests run in the
# suite itself).
# shellcheck disable=SC2317 # functions called through check/wait_for/trap
# shellcheck disable=SC2016 # dpkg-query's ${Field} and sh -c's "$1", not the shell's
set -uo pipefail

srcdir=$(cd "${1:?usage: deb.sh SOURCEDIR BUILDDIR}" && pwd)
builddir=$(cd "${2:?usage: deb.sh SOURCEDIR BUILDDIR}" && pwd)
# shellcheck source=tests/system/lib.sh
. "$(dirname "$0")/lib.sh"

need_containers
for tool in dpkg-buildpackage dh lintian dpkg-scanpackages dpkg-repack apt-get; do
    command -v "$tool" >/dev/null || { echo "FAIL: no $tool here (tools/setup.sh installs it)"; exit 1; }
done

# --- the package: built once, checked by lintian ------------------------------------------------

out=$builddir/deb
version=$(tr -d '[:space:]' <"$srcdir/VERSION")
t0=$SECONDS
if ! DEB_BUILD_OPTIONS="nocheck ${DEB_BUILD_OPTIONS:-}" "$srcdir/tools/build-deb.sh" "$out" >"$builddir/deb.log" 2>&1; then
    tail -n 30 "$builddir/deb.log"
    echo "FAIL: tools/build-deb.sh failed (log: $builddir/deb.log)"
    exit 1
fi
deb=$(tail -n 1 "$builddir/deb.log")
ok "tools/build-deb.sh built $(basename "$deb") in $(elapsed "$t0") s"
arch=$(dpkg-deb -f "$deb" Architecture)
note "Depends: $(dpkg-deb -f "$deb" Depends)"

t0=$SECONDS
lint=$(lintian "$deb" 2>&1 | grep -v '^running with root privileges')
printf '%s\n' "$lint" | sed '/^$/d; s/^/# lintian: /'
check "lintian: no error ($(elapsed "$t0") s)" sh -c '! printf "%s\n" "$1" | grep -q "^E:"' _ "$lint"
undocumented=
for tag in $(printf '%s\n' "$lint" | sed -n 's/^W: [^ ]*: \([a-z0-9-]*\).*/\1/p' | sort -u); do
    grep -q "\`$tag\`" "$srcdir/doc/install.md" || undocumented="$undocumented $tag"
done
check "every lintian warning is one doc/install.md lists and explains${undocumented:+ (not there:$undocumented)}" \
    test -z "$undocumented"

# A newer build for the upgrade: the same package with a higher version.
upgrade_version=$version+test1
mkdir -p "$builddir/deb/upgrade"
rm -rf "$builddir/deb/upgrade/tree"
dpkg-deb -R "$deb" "$builddir/deb/upgrade/tree"
sed -i "s/^Version: .*/Version: $upgrade_version/" "$builddir/deb/upgrade/tree/DEBIAN/control"
upgrade_deb=$builddir/deb/upgrade/mlmond_${upgrade_version}_$arch.deb
dpkg-deb -b --root-owner-group "$builddir/deb/upgrade/tree" "$upgrade_deb" >/dev/null
rm -rf "$builddir/deb/upgrade/tree"

# --- a bare Debian 12 under systemd ------------------------------------------------------------

use_rootfs
make_root
t_run=$SECONDS
# its own network namespace: nothing to reach but its loopback, where the package's default
# ports (9477, 8125) are free whatever this machine runs
boot --private-network

# The libraries mlmond links that the cached root file system holds for nspawn.sh: gone, unless
# something of the base system needs them too.
removed=
for p in libmicrohttpd12 libinih1 libsqlite3-0 libjson-c5; do
    ct dpkg --purge "$p" >/dev/null 2>&1 && removed="$removed $p"
done
note "removed from the container first:$removed"
check "the container lacks libmicrohttpd12 and libinih1" test "$(ct dpkg-query -W -f='${db:Status-Status}' \
    libmicrohttpd12 libinih1 2>/dev/null | grep -c '^installed')" = 0

# --- the packages the installation needs, in a local repository ---------------------------------

# What apt would install onto the container's packages: asked here, with this machine's lists.
needed=$(apt-get -s -o Dir::State::status="$root/var/lib/dpkg/status" -o Debug::NoLocking=1 \
    -o APT::Install-Recommends=true install "$deb" 2>&1 |
    sed -n 's/^Inst \([^ ]*\) \(\[[^]]*\] \)\{0,1\}(\([^ ]*\) .*\[\([a-z0-9]*\)\])$/\1 \3 \4/p' | grep -v '^mlmond ')
if [ -z "$needed" ]; then
    apt-get -s -o Dir::State::status="$root/var/lib/dpkg/status" install "$deb" 2>&1 | tail -n 20 | sed 's/^/# apt: /'
    echo "FAIL: apt-get -s finds nothing to install with the package"
    exit 1
fi
note "needed: $(printf '%s\n' "$needed" | awk '{print $1}' | tr '\n' ' ')"

# fetch NAME VERSION ARCH: NAME_VERSION_ARCH.deb into $cache/debs (the epoch's ':' is %3a).
fetch() {
    local file tmp
    file="${1}_${2/:/%3a}_$3.deb"
    [ -f "$cache/debs/$file" ] && return 0
    tmp=$(mktemp -d "$cache/debs/.fetch.XXXXXX")
    if (cd "$tmp" && apt-get -qq download "$1=$2" >/dev/null 2>&1) && [ -f "$tmp/$file" ]; then
        :
    elif [ -f "/var/cache/apt/archives/$file" ]; then
        cp "/var/cache/apt/archives/$file" "$tmp/"
    elif [ "$(dpkg-query -W -f='${Version}' "$1:$3" 2>/dev/null || dpkg-query -W -f='${Version}' "$1" 2>/dev/null)" = "$2" ]; then
        (cd "$tmp" && dpkg-repack "$1" >/dev/null 2>&1)
    fi
    [ -f "$tmp/$file" ] && mv "$tmp/$file" "$cache/debs/$file"
    rm -rf "$tmp"
    [ -f "$cache/debs/$file" ]
}

repo=/var/local/mlmond-repo
mkdir -p "$cache/debs" "$root$repo"
exec 8>"$cache/.debs.lock"
flock 8
missing=
while read -r name ver a; do
    if fetch "$name" "$ver" "$a"; then
        cp "$cache/debs/${name}_${ver/:/%3a}_$a.deb" "$root$repo/"
    else
        missing="$missing $name=$ver"
    fi
done <<<"$needed"
flock -u 8
check "the dependencies, from Debian's archive or this machine${missing:+ (none to be had for:$missing)}" test -z "$missing"
cp "$deb" "$upgrade_deb" "$root$repo/"
(cd "$root$repo" && dpkg-scanpackages -m . 2>/dev/null >Packages)
printf 'deb [trusted=yes] file:%s ./\n' "$repo" >"$root/etc/apt/sources.list"
rm -rf "$root/var/lib/apt/lists/"*
ct apt-get -qq update >/dev/null 2>&1

# --- install -----------------------------------------------------------------------------------

apt_in_ct() { ct env DEBIAN_FRONTEND=noninteractive sh -c "cd $repo && apt-get -y $*" >>"$run/apt.log" 2>&1; }
t0=$SECONDS
check "apt-get install ./$(basename "$deb") ($(find "$root$repo" -name '*.deb' | wc -l) packages in the repository)" \
    apt_in_ct install "./$(basename "$deb")"
note "apt took $(elapsed "$t0") s; it installed: $(sed -n 's/^Setting up \([^ ]*\) .*/\1/p' "$run/apt.log" | tr '\n' ' ')"
check "the libraries removed before are back (Depends:)" test "$(ct dpkg-query -W -f='${db:Status-Status}\n' \
    libmicrohttpd12 libinih1 2>/dev/null | grep -c '^installed')" = 2
missing=$(ct ldd /usr/bin/mlmond /usr/bin/mlmonctl 2>&1 | grep 'not found')
check "every library of mlmond and mlmonctl is there${missing:+ (missing: $missing)}" test -z "$missing"

check "systemctl is-active mlmond: $(ct systemctl is-active mlmond)" test "$(ct systemctl is-active mlmond)" = active
check "systemctl is-enabled mlmond: $(ct systemctl is-enabled mlmond 2>&1)" test "$(ct systemctl is-enabled mlmond 2>&1)" = enabled
check "its socket units are active" test "$(ct systemctl is-active mlmond-http.socket mlmond-statsd.socket | tr '\n' ' ')" = "active active "
check "the user mlmond (sysusers)" ct id mlmond
check "/run/mlmond owned by mlmond, 0755 (tmpfiles)" test "$(ct stat -c %U:%a /run/mlmond 2>/dev/null)" = mlmond:755
check "/var/lib/mlmond owned by mlmond, 0750, with the database" \
    test "$(ct stat -c %U:%a /var/lib/mlmond 2>/dev/null)/$(ct test -f /var/lib/mlmond/mlmond.db && echo db)" = mlmond:750/db
check "/etc/mlmond/mlmond.conf is a conffile" sh -c "nsenter -t $ct_pid -a dpkg-query -W -f='\${Conffiles}' mlmond | grep -q '/etc/mlmond/mlmond.conf '"

ct env SYSTEMD_COLORS=0 systemctl status --no-pager --lines=0 mlmond | sed 's/^/# status: /'
health=$(ct curl -s 127.0.0.1:9477/v1/health)
note "health: $health"
check "curl 127.0.0.1:9477/v1/health: ok, version $version" /usr/bin/python3 -c 'import json, sys
h = json.loads(sys.argv[1])
sys.exit(0 if h["status"] == "ok" and h["version"] == sys.argv[2] else 1)' "$health" "$version"
check "the web page's charts: libjs-dygraphs (Recommends:) served" \
    test "$(ct curl -s -o /dev/null -w '%{http_code}' 127.0.0.1:9477/javascript/dygraphs/dygraph.min.js)" = 200

ct systemd-run -q --unit=mlmond-test-sleeper sleep 1000
sleeper=$(prop mlmond-test-sleeper MainPID)
run_id=$(ct mlmonctl register "$sleeper" --name sleeper 2>&1)
check "mlmonctl register $sleeper -> run '$run_id'" test "$run_id" -ge 1 2>/dev/null
running() { ct mlmonctl list | grep -Eq "^ *$run_id +$sleeper +sleeper +running"; }
check "mlmonctl list: run $run_id running" wait_for 5 running
ct mlmonctl list | sed 's/^/# mlmonctl list: /'
py=$(ct python3 -c 'import mlmon; print(mlmon.__version__, mlmon.__file__)' 2>&1)
check "python3 -c 'import mlmon': $py" test "$py" = "$version /usr/lib/python3/dist-packages/mlmon/__init__.py"
check "the wheel for other environments: /usr/share/mlmond/mlmon-$version-py3-none-any.whl" \
    ct test -f "/usr/share/mlmond/mlmon-$version-py3-none-any.whl"

# --- upgrade: restarted, the database and the live run kept --------------------------------------

pid_before=$(prop mlmond MainPID)
registered=$(ct curl -s "127.0.0.1:9477/v1/runs/$run_id" | sed -n 's/.*"registered_ts":\([0-9]*\).*/\1/p')
t0=$SECONDS
check "apt-get install ./$(basename "$upgrade_deb") (an upgrade)" apt_in_ct install "./$(basename "$upgrade_deb")"
note "the upgrade took $(elapsed "$t0") s"
check "the installed version is $upgrade_version" \
    test "$(ct dpkg-query -W -f='${Version}' mlmond)" = "$upgrade_version"
pid_after=$(prop mlmond MainPID)
check "mlmond restarted: active, MainPID $pid_before -> $pid_after" \
    test "$(ct systemctl is-active mlmond)" = active -a "$pid_after" != "$pid_before" -a "$pid_after" != 0
check "run $run_id is still running after the upgrade (mlmonctl list)" wait_for 5 running
after=$(ct curl -s "127.0.0.1:9477/v1/runs/$run_id" | sed -n 's/.*"registered_ts":\([0-9]*\).*/\1/p')
check "the same run, from the same database: registered_ts $registered = $after" test -n "$after" -a "$after" = "$registered"
latest_ts() {
    ct curl -s "127.0.0.1:9477/v1/runs/$run_id" |
        /usr/bin/python3 -c 'import json, sys; print((json.load(sys.stdin).get("latest") or {}).get("ts") or 0)'
}
ts_after=$(latest_ts)
sampled_since() { [ "$(latest_ts)" -gt "$1" ]; }
check "and sampled by the new mlmond (its latest sample moves on from $ts_after)" wait_for 5 sampled_since "$ts_after"

# --- remove: stopped, data kept; purge: gone ----------------------------------------------------

check "apt-get remove mlmond" apt_in_ct remove mlmond
check "stopped: mlmond $(ct systemctl is-active mlmond), port 9477 closed" \
    sh -c "! nsenter -t $ct_pid -a systemctl -q is-active mlmond && ! nsenter -t $ct_pid -a curl -s 127.0.0.1:9477/v1/health"
check "the database and the configuration are kept" ct test -f /var/lib/mlmond/mlmond.db -a -f /etc/mlmond/mlmond.conf
check "apt-get purge mlmond" apt_in_ct purge mlmond
check "purged: /var/lib/mlmond, /etc/mlmond and /run/mlmond are gone" \
    ct sh -c '! test -e /var/lib/mlmond && ! test -e /etc/mlmond && ! test -e /run/mlmond'
check "the unit files are gone: $(prop mlmond LoadState)" test "$(prop mlmond LoadState)" = not-found
check "the user mlmond stays, as Debian keeps system users" ct id mlmond

note "run took $(elapsed "$t_run") s (boot to checks done)"
[ "$failures" -eq 0 ] || tail -n 40 "$run/apt.log" | sed 's/^/# apt: /'
finish mlmond mlmond-http.socket mlmond-statsd.socket
