#!/usr/bin/env bash
# What every kraftlab cluster file (aws.yaml, gcp.yaml, local.yaml) runs on its nodes, kept in one
# place so the three files cannot drift apart. `ray up` syncs infra/ to ~/kraftlab/infra on every
# node (file_mounts) before it runs any command, so this script is there when they run.
#
#   node.sh install WHEEL            every node: Java 17, a Python venv with kraftlab from WHEEL
#   node.sh monitoring [--grafana]   the head: Prometheus, and Grafana (--grafana: from Grafana's
#                                    apt repository; without it, only when already installed)
#   node.sh start-monitoring         the head, after `ray start`: (re)start them
#
# Assumes Debian 12 (bookworm): its python3 is 3.11 and it packages openjdk-17-jre-headless and
# Prometheus, the versions kraftlab's pins were verified with (pyproject.toml).
set -euo pipefail

VENV="$HOME/kraftlab-venv"
INFRA="$HOME/kraftlab/infra"

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }

apt_install() {  # only what is missing: a machine you own may have it all and no sudo
  local missing=()
  for pkg in "$@"; do installed "$pkg" || missing+=("$pkg"); done
  if [ ${#missing[@]} -gt 0 ]; then
    sudo apt-get update -qq
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

install() {
  local wheel="$1"
  # Java 17 for RayDP's Spark (its executors are Ray actors, on whichever node Ray picks).
  # (rsync is not installed here: `ray up` needs it on the node before any command runs.)
  apt_install python3-venv openjdk-17-jre-headless
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "kraftlab needs Python >= 3.11" >&2; exit 1; }
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  # The wheel's metadata carries pyproject.toml's exact pins (ray[default], raydp, pyspark...):
  # the first install resolves them (a no-op once present). The wheel keeps one version number
  # while the code changes, so the second replaces whatever kraftlab an earlier `ray up` installed.
  "$VENV/bin/pip" install --quiet "$wheel"
  "$VENV/bin/pip" install --quiet --no-deps --force-reinstall "$wheel"
  # Ray runs every command through an interactive bash that reads ~/.bashrc: `ray start`, the
  # Ray workers it spawns (the venv's python, where kraftlab is), `ray exec` and `ray attach`.
  grep -q kraftlab-venv "$HOME/.bashrc" 2>/dev/null || echo "export PATH=\"$VENV/bin:\$PATH\"" >> "$HOME/.bashrc"
}

monitoring() {
  apt_install prometheus
  # Debian's prometheus service runs with PrivateTmp and ProtectHome: it could read neither Ray's
  # service-discovery file (/tmp/ray) nor this config (~/kraftlab), and it listens on every
  # address. start-monitoring runs Prometheus as this user, beside Ray, instead. Debian's package
  # enables that service when it installs it; it can only run where systemd is the init
  # (/run/systemd/system exists; not in a container), the only place it is disabled (with sudo).
  if [ -d /run/systemd/system ] && systemctl is-enabled --quiet prometheus 2>/dev/null; then
    sudo systemctl disable --now prometheus
  fi
  # (Asked of dpkg: grafana-server is in /usr/sbin, not on a user's PATH.)
  if [ "${1:-}" = "--grafana" ] && ! installed grafana; then
    # Not in Debian: Grafana's own signed repository. The dashboards use the Grafana 11.6 schema,
    # which later versions read.
    apt_install gpg wget
    sudo mkdir -p /etc/apt/keyrings
    wget -qO- https://apt.grafana.com/gpg.key | gpg --dearmor | sudo tee /etc/apt/keyrings/grafana.gpg >/dev/null
    echo "deb [signed-by=/etc/apt/keyrings/grafana.gpg] https://apt.grafana.com stable main" | sudo tee /etc/apt/sources.list.d/grafana.list >/dev/null
    apt_install grafana
  fi
  if installed grafana; then
    # infra/grafana/provisioning: the datasource (Prometheus on 127.0.0.1:9090, this machine) and
    # the dashboard provider, which reads /var/lib/grafana/dashboards/kraftlab.
    sudo cp -r "$INFRA/grafana/provisioning/." /etc/grafana/provisioning/
    sudo mkdir -p /var/lib/grafana/dashboards/kraftlab
    sudo cp "$INFRA"/grafana/dashboards/*.json /var/lib/grafana/dashboards/kraftlab/
    # Loopback only, like Prometheus: reached through an SSH tunnel (its first login is admin/admin).
    grep -q '^GF_SERVER_HTTP_ADDR=' /etc/default/grafana-server 2>/dev/null ||
      echo 'GF_SERVER_HTTP_ADDR=127.0.0.1' | sudo tee -a /etc/default/grafana-server >/dev/null
    sudo systemctl enable --quiet grafana-server
  fi
}

start_monitoring() {
  local pidfile="$HOME/prometheus.pid"
  # The Prometheus an earlier `ray up` started (its pid, checked to still be a prometheus).
  local old
  old="$(cat "$pidfile" 2>/dev/null || true)"
  if [ -n "$old" ] && [ "$(cat "/proc/$old/comm" 2>/dev/null)" = prometheus ]; then
    kill "$old"
    # It holds the TSDB's lock until it has ended.
    for _ in $(seq 100); do [ -e "/proc/$old" ] || break; sleep 0.1; done
  fi
  # infra/prometheus/prometheus.yml as it is: it scrapes kraftlab's exporter on 127.0.0.1:9400
  # (`kraftlab run ... --metrics-port 9400` on this head) and Ray's nodes through the file Ray
  # keeps at /tmp/ray/prom_metrics_service_discovery.json, which is where `ray start` on this
  # head writes it (the default temp dir). All descriptors redirected: `ray up`'s SSH session ends.
  nohup prometheus --config.file="$INFRA/prometheus/prometheus.yml" --storage.tsdb.path="$HOME/prometheus-data" \
    --web.listen-address=127.0.0.1:9090 >"$HOME/prometheus.log" 2>&1 </dev/null &
  echo $! >"$pidfile"
  if installed grafana; then sudo systemctl restart grafana-server; fi
}

case "${1:-}" in
  install) install "$2" ;;
  monitoring) monitoring "${2:-}" ;;
  start-monitoring) start_monitoring ;;
  *) echo "usage: node.sh install WHEEL | monitoring [--grafana] | start-monitoring" >&2; exit 2 ;;
esac
