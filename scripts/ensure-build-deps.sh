#!/usr/bin/env bash
# Debian packages that `pip install -r requirements.txt` needs to build, installed with apt when absent
#: python-ldap is published as source only and compiles against OpenLDAP's and Cyrus SASL's
# headers. With --test-servers also slapd and ldap-utils, the OpenLDAP server the directory tests start
# (tests/directory/), and Slurm with its accounting daemon (tests/slurm/). Run by the Makefile's venv rule and
# by scripts/ensure-services.sh; does nothing when
# everything is there, so a machine without apt (or without root) only fails when something is missing.
set -eu
packages=(libldap2-dev libsasl2-dev)
# ...and a C compiler and Python's headers, which a Debian Python without python3-dev lacks.
command -v cc >/dev/null 2>&1 || packages+=(gcc)
python="${PYTHON:-python3}"
include="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null || true)"
[ -n "$include" ] && [ ! -f "$include/Python.h" ] && packages+=(python3-dev)
if [ "${1:-}" = "--test-servers" ]; then
  packages+=(slapd ldap-utils gettext)  # gettext: makemessages and msgfmt in tests/i18n
  # poppler-utils reads the review pack's PDF back in its tests; WenQuanYi Micro Hei sets its Chinese text
  packages+=(poppler-utils fonts-wqy-microhei)
  # Slurm 22.05 for tests/slurm/: the controller, node daemons, the REST API with its JWT plugin, accounting
  # (slurmdbd on a private MariaDB) and munge; the tests start their own daemons with their own configuration
  packages+=(munge slurmctld slurmd slurmrestd slurm-client slurm-wlm-jwt-plugin slurmdbd slurm-wlm-mysql-plugin
             mariadb-server)
fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing Debian packages: ${missing[*]}"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
# slapd's package scripts would ask for an admin password and start a system-wide server: neither is wanted,
# the tests run their own slapd with a configuration of their own.
echo "slapd slapd/no_configuration boolean true" | $SUDO debconf-set-selections 2>/dev/null || true
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
