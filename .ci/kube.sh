#!/usr/bin/env bash
# A single-node Kubernetes cluster for the Helm tests (test/charts/cluster.test.ts), built from the
# Kubernetes and etcd sources that the Go module proxy serves, since no distribution can be
# downloaded here. Idempotent: the binaries are cached by version, and a second run finds the
# cluster running and takes seconds.
#   bash .ci/kube.sh build    the binaries only (what CI starts in the background)
#   bash .ci/kube.sh up       build if needed, then start etcd, the control plane, containerd, the
#                             kubelet, kube-proxy, kube-router (NetworkPolicy) and CoreDNS; stdout:
#                             the admin kubeconfig's path and nothing else
#   bash .ci/kube.sh down     stop them (the cache and the cluster's state stay)
# stderr: what it does and the seconds each step took. Exit 1 when no cluster can be had, the
# reason in the last line on stderr ("[kube] no cluster: ...").
set -Eeuo pipefail
export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1

# 1.34: the last minor whose kubelet runs on cgroups v1 (this VM's) without failCgroupV1=false;
# from 1.35 it refuses them by default and v1 support is on its way out.
KUBE_VERSION=v1.34.2
# The etcd that k8s.io/kubernetes v1.34.2 itself requires (its go.mod), so both build in one module.
ETCD_VERSION=v3.6.4
CACHE=${ATRIUM_KUBE_CACHE:-/var/cache/atrium-kube}
BIN=$CACHE/$KUBE_VERSION/bin
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
COREDNS_VERSION=v1.13.1 # built with the same client-go minor as the cluster (its go.mod: k8s.io/client-go v0.34.1)
# The NetworkPolicy enforcer (iptables and ipset, run on the node beside kube-proxy): the bridge CNI
# enforces no policy. The one release the module proxy serves.
KUBE_ROUTER_VERSION=v2.1.0

say() { printf '[kube] %s\n' "$*" >&2; }
die() {
  say "no cluster: $*"
  exit 1
}
# A command that fails outside a test (set -e) still says where, in the line CI reports.
trap 'die "line $LINENO failed: $BASH_COMMAND"' ERR
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

built() {
  local b
  for b in "${BINARIES[@]}" coredns kube-router; do [ -x "$BIN/$b" ] || return 1; done
}

# go install refuses k8s.io/kubernetes (its go.mod replaces its 31 staging modules with folders of
# its own tree), so a module of ours requires it and replaces each staging module by the release
# published for it (k8s.io/api v0.34.2 for v1.34.2...). etcd's server builds in the same module for
# the same reason.
build() {
  local start src staging minor gomod
  built && { say "Kubernetes $KUBE_VERSION binaries are there ($BIN)"; return 0; }
  start=$(now)
  src=$CACHE/$KUBE_VERSION/src
  rm -rf "$src" && mkdir -p "$src" "$BIN"
  gomod=$(cd "$src" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  [ -f "$gomod" ] || die "the Go module proxy did not serve k8s.io/kubernetes@$KUBE_VERSION"
  staging=$(sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => \./staging/src/k8s.io/.*#\1#p' "$gomod")
  [ "$(wc -l <<<"$staging")" -ge 20 ] || die "no staging modules found in $gomod"
  minor=${KUBE_VERSION#v1.}
  {
    echo "module atrium.local/kube-build"
    echo
    echo "go 1.24.0"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes $KUBE_VERSION"
    echo "	go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    echo ")"
    echo
    while read -r m; do echo "replace $m => $m v0.$minor"; done <<<"$staging"
  } >"$src/go.mod"
  {
    echo "//go:build tools"
    echo
    echo "package tools"
    echo
    echo "import ("
    echo "	_ \"go.etcd.io/etcd/server/v3\""
    for b in "${BINARIES[@]:1}"; do echo "	_ \"k8s.io/kubernetes/cmd/$b\""; done
    echo ")"
  } >"$src/tools.go"
  (cd "$src" && go mod tidy) >"$src.log" 2>&1 || die "go mod tidy failed: $(tail -n 3 "$src.log" | tr '\n' ' ')"
  say "module ready ($(since "$start"))"
  # Stamped as a release is: Helm compares the chart's kubeVersion with the API server's, and an
  # unstamped build says v0.0.0-master.
  local v=k8s.io/component-base/version major=${minor%%.*}
  local ldflags="-s -w -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$major -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
  local pkgs=()
  for b in "${BINARIES[@]:1}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  (
    cd "$src"
    export CGO_ENABLED=0
    go build -trimpath -ldflags "$ldflags" -o "$BIN.new/" "${pkgs[@]}" &&
      go build -trimpath -ldflags "-s -w" -o "$BIN.new/etcd" go.etcd.io/etcd/server/v3
  ) >"$src.log" 2>&1 || die "go build failed: $(tail -n 5 "$src.log" | tr '\n' ' ')"
  # CoreDNS and kube-router: modules without replace directives, so go install takes them.
  local tool
  for tool in "github.com/coredns/coredns@$COREDNS_VERSION" "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"; do
    (cd "$src" && GOBIN="$BIN.new" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "$tool") >"$src.log" 2>&1 ||
      die "could not build $tool: $(tail -n 3 "$src.log" | tr '\n' ' ')"
  done
  mv "$BIN.new"/* "$BIN/" && rmdir "$BIN.new"
  say "built ${BINARIES[*]} $KUBE_VERSION, CoreDNS $COREDNS_VERSION and kube-router $KUBE_ROUTER_VERSION ($(since "$start"))"
}

# The cluster's addresses: a bridge of its own, made before anything starts, so that the API server
# can listen on it (not on the host's network) and the pods reach it as their gateway. The API
# server's Service and the cluster DNS get addresses in SERVICE_CIDR.
BRIDGE=atrium-cni0
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
API_SERVICE_IP=10.96.0.1
DNS_IP=10.96.0.10
NODE_NAME=atrium-node
ETCD_PORT=12379 # not 2379: an etcd of the machine's own stays untouched
API_PORT=6443
PAUSE_IMAGE=registry.k8s.io/pause:3.10
COREDNS_IMAGE=registry.k8s.io/coredns/coredns:$COREDNS_VERSION
STATE=${ATRIUM_KUBE_STATE:-/var/lib/atrium-kube}
RUN=/run/atrium-kube
LOGS=/var/log/atrium-kube
PKI=$STATE/pki
KUBECONFIG_ADMIN=$STATE/admin.kubeconfig
CONTAINERD_SOCK=$RUN/containerd.sock
ctr_() { ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }
kubectl_() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

as_root() { [ "$(id -u)" = 0 ] || die "$1 needs root: run this script as root"; }

packages() {
  local missing=() log=/var/tmp/atrium-kube-apt.log
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v ipset >/dev/null || missing+=(ipset)
  command -v openssl >/dev/null || missing+=(openssl)
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing ${missing[*]}"
  { apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; }; } >"$log" 2>&1 ||
    die "apt-get install ${missing[*]} failed: $(tail -n 3 "$log" | tr '\n' ' ')"
}

# Certificates: one CA signs the API server's serving certificate and every client's (each
# component is its own user, the kubelet a node, so RBAC and the Node authorizer apply as on any
# cluster). ECDSA P-256, 10 years: a test cluster's, made once per state folder.
cert() { # name subject [subjectAltName]
  local name=$1 subj=$2 san=${3:-}
  [ -s "$PKI/$name.crt" ] && return 0
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"; else echo "extendedKeyUsage=clientAuth"; fi
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 \
    -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}
kubeconfig() { # file user-cert-name
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: atrium
  cluster: {server: "https://$NODE_IP:$API_PORT", certificate-authority: "$PKI/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$PKI/$2.crt", client-key: "$PKI/$2.key"}
contexts:
- name: atrium
  context: {cluster: atrium, user: $2}
current-context: atrium
KC
  chmod 600 "$1"
}
pki() {
  mkdir -p "$PKI" && chmod 700 "$PKI"
  if [ ! -s "$PKI/ca.crt" ]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=atrium-test-cluster-ca" -days 3650 -sha256 -out "$PKI/ca.crt" 2>/dev/null
  fi
  cert apiserver "/CN=kube-apiserver" "IP:$NODE_IP,IP:127.0.0.1,IP:$API_SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin "/O=system:masters/CN=atrium-admin"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  cert controller-manager "/CN=system:kube-controller-manager"
  cert scheduler "/CN=system:kube-scheduler"
  cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
  cert kube-proxy "/CN=system:kube-proxy"
  cert kube-router "/CN=atrium:kube-router"
  [ -s "$PKI/sa.key" ] || { openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null && openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null; }
  kubeconfig "$KUBECONFIG_ADMIN" admin
  local c
  for c in controller-manager scheduler kubelet kube-proxy kube-router; do kubeconfig "$STATE/$c.kubeconfig" "$c"; done
}

network() {
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge || die "cannot make the bridge $BRIDGE"
  ip -4 addr show dev "$BRIDGE" | grep -q " $NODE_IP/" || ip addr add "$NODE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # The addresses handed out live in $RUN (memory): a restarted machine has no pod left to hold one.
  # Pods on one bridge talk at layer 2: without br_netfilter their traffic skips iptables, and
  # neither kube-proxy's Services nor kube-router's policies would apply to it.
  [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || modprobe br_netfilter 2>/dev/null ||
    die "no br_netfilter in this kernel: bridged pod traffic would bypass iptables (Services, NetworkPolicy)"
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 >/dev/null
  mkdir -p "$STATE/cni"
  cat >"$STATE/cni/10-atrium.conflist" <<CNI
{
  "cniVersion": "0.4.0",
  "name": "atrium",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$RUN/cni-ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
}

# `alive NAME`: the component this script started is still running: the pid file's process runs
# the component's own binary (after a restart of the machine the pid may be anyone's).
alive() {
  local p exe
  p=$(cat "$RUN/$1.pid" 2>/dev/null) && [ -n "$p" ] || return 1
  exe=$(cat "$RUN/$1.exe" 2>/dev/null) && [ -n "$exe" ] && [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$exe" ]
}
stop() {
  local p
  alive "$1" || { rm -f "$RUN/$1".*; return 0; }
  p=$(cat "$RUN/$1.pid")
  kill "$p" 2>/dev/null && for _ in $(seq 1 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
  kill -9 "$p" 2>/dev/null || true # the API server can wait long on an etcd that is gone
  rm -f "$RUN/$1".*
}
# `start NAME command...`: in its own session (it outlives this script and the CI run), logging to
# $LOGS. One running with other arguments or configuration files (this script changed) is restarted.
start() {
  local name=$1 exe sig a
  shift
  exe=$(readlink -f "$(command -v "$1")")
  sig=$({
    printf '%s\n' "$@"
    for a in "${@:2}"; do if [ -f "$a" ]; then cat "$a"; fi; done # its files, not the binary
  } | sha256sum | cut -c1-16)
  if alive "$name"; then
    [ "$(cat "$RUN/$name.sig" 2>/dev/null)" = "$sig" ] && return 0
    say "restarting $name: its configuration changed"
    stop "$name"
  fi
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 9>&- &
  echo $! >"$RUN/$name.pid"
  echo "$exe" >"$RUN/$name.exe"
  echo "$sig" >"$RUN/$name.sig"
}
# `wait_for WHAT SECONDS command...`
wait_for() {
  local what=$1 secs=$2 i
  shift 2
  for i in $(seq 1 $((secs * 2))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  return 1
}
last_lines() { { tail -n "${2:-3}" "$LOGS/$1.log" 2>/dev/null || true; } | cut -c1-400 | tr '\n' ' '; }

control_plane() {
  start etcd "$BIN/etcd" --name atrium --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
    --initial-cluster atrium=http://127.0.0.1:12380 --listen-metrics-urls "" --log-level warn
  wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health" || die "etcd did not start: $(last_lines etcd)"
  # Pod Security admission is on by default (each namespace's labels choose its level); RBAC and
  # the Node authorizer as a kubeadm cluster has them.
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$API_PORT" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" --client-ca-file "$PKI/ca.crt" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local --service-account-key-file "$PKI/sa.pub" \
    --service-account-signing-key-file "$PKI/sa.key" --service-cluster-ip-range "$SERVICE_CIDR" \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged=true
  wait_for kube-apiserver 90 kubectl_ get --raw /readyz || die "kube-apiserver is not ready: $(last_lines kube-apiserver)"
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$STATE/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" --use-service-account-credentials \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" --leader-elect=false --bind-address 127.0.0.1
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$STATE/scheduler.kubeconfig" \
    --authentication-kubeconfig "$STATE/scheduler.kubeconfig" --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1
}

runtime() {
  mkdir -p "$STATE/containerd"
  cat >"$STATE/containerd.toml" <<TOML
version = 2
root = "$STATE/containerd"
state = "$RUN/containerd"
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # This VM's root lacks CAP_SYS_RESOURCE, so runc cannot lower a container's oom_score_adj below
  # its own (the sandbox's -998 failed: "failed to update /proc/self/oom_score_adj: Permission
  # denied"); containerd then clamps it, as it does for rootless runs.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
TOML
  start containerd containerd --config "$STATE/containerd.toml"
  wait_for containerd 30 ctr_ version || die "containerd did not start: $(last_lines containerd)"
}

# `scratch_image NAME FILE USER`: an image of one static binary, built with the engine
# (.ci/engine.sh) and imported into the cluster's containerd, unless it is there: nothing can be
# pulled here.
scratch_image() {
  local name=$1 file=$2 user=$3 dir
  ctr_ images ls -q | grep -qxF "$name" && return 0
  command -v docker >/dev/null && docker info >/dev/null 2>&1 || die "$name is built with the container engine: run .ci/engine.sh first"
  dir=$(mktemp -d)
  cp "$file" "$dir/entry"
  printf 'FROM scratch\nCOPY entry /entry\nUSER %s\nENTRYPOINT ["/entry"]\n' "$user" >"$dir/Dockerfile"
  docker build --quiet -t "$name" "$dir" >/dev/null && docker save "$name" | ctr_ images import - >/dev/null ||
    die "could not build or import $name"
  rm -rf "$dir"
}

# The pause image (the pod sandbox) from Kubernetes' own pause.c, built as its release is.
pause_image() {
  ctr_ images ls -q | grep -qxF "$PAUSE_IMAGE" && return 0
  local pause=$STATE/pause
  gcc -Os -static -DVERSION=3.10-atrium -o "$pause" "$(go env GOMODCACHE)/k8s.io/kubernetes@$KUBE_VERSION/build/pause/linux/pause.c" ||
    die "could not compile pause.c"
  scratch_image "$PAUSE_IMAGE" "$pause" 65535:65535
}

node_ready() { [ "$(kubectl_ get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }

node_agent() {
  mkdir -p "$STATE/kubelet"
  cat >"$STATE/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: Webhook}
address: "$NODE_IP"
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
cgroupDriver: cgroupfs
# This VM has cgroups v1 (kubelet 1.34 still runs on them when told so).
failCgroupV1: false
containerRuntimeEndpoint: "unix://$CONTAINERD_SOCK"
clusterDNS: ["$DNS_IP"]
clusterDomain: cluster.local
failSwapOn: false
resolvConf: /etc/resolv.conf
serializeImagePulls: false
# A test machine's disk is shared with everything else: evict only when it is really full, and
# never collect images: containerd 1.6 does not protect the pause image, which cannot be pulled
# again. The tests remove the images they import (test/helpers/cluster.ts).
evictionHard: {"nodefs.available": "2%", "imagefs.available": "2%", "memory.available": "200Mi"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
YAML
  start kubelet "$BIN/kubelet" --config "$STATE/kubelet.yaml" --kubeconfig "$STATE/kubelet.kubeconfig" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --root-dir "$STATE/kubelet"
  start kube-proxy "$BIN/kube-proxy" --kubeconfig "$STATE/kube-proxy.kubeconfig" --hostname-override "$NODE_NAME" \
    --cluster-cidr "$POD_CIDR" --proxy-mode iptables --metrics-bind-address 127.0.0.1:10249 --healthz-bind-address 127.0.0.1:10256
  # Its own health first: after a restart the Node object still says Ready from before.
  wait_for kubelet 60 curl -sf http://127.0.0.1:10248/healthz || die "the kubelet did not start: $(last_lines kubelet 5)"
  wait_for node 120 node_ready ||
    die "the node did not become Ready: $(last_lines kubelet 5)"
}

# NetworkPolicy enforced (kube-router's firewall only: pods are wired by the bridge CNI and Services
# by kube-proxy), with the rights it reads policies, pods and namespaces by.
policies() {
  kubectl_ apply -f - >/dev/null <<YAML || die "could not grant kube-router its rights"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "atrium:kube-router"}
rules:
- {apiGroups: [""], resources: [namespaces, pods, services, nodes, endpoints], verbs: [get, list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [get, list, watch]}
- {apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "atrium:kube-router"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "atrium:kube-router"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "atrium:kube-router"}]
YAML
  start kube-router "$BIN/kube-router" --kubeconfig "$STATE/kube-router.kubeconfig" --hostname-override "$NODE_NAME" \
    --run-firewall=true --run-router=false --run-service-proxy=false --service-cluster-ip-range "$SERVICE_CIDR" \
    --health-port 20244 --metrics-port 0
  wait_for kube-router 60 curl -sf http://127.0.0.1:20244/healthz || die "kube-router did not start: $(last_lines kube-router 5)"
}

# The cluster DNS (CoreDNS, as kubeadm deploys it: kube-system, label k8s-app=kube-dns, the
# Service at $DNS_IP), so that pods reach Services by name. Non-root, on port 53 by the pod's
# unprivileged-port sysctl (a capability in the pod spec alone does not reach a non-root process;
# the upstream image sets a file capability instead).
dns() {
  scratch_image "$COREDNS_IMAGE" "$BIN/coredns" 65532:65532
  kubectl_ apply -f - >/dev/null <<YAML || die "could not deploy CoreDNS"
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
           pods insecure
           fallthrough in-addr.arpa ip6.arpa
        }
        cache 30
        loop
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      # Port 53 without root or a file capability: a policy that lets DNS out names port 53, and
      # kube-router matches the pod's port.
      securityContext:
        sysctls: [{name: net.ipv4.ip_unprivileged_port_start, value: "53"}]
      containers:
      - name: coredns
        image: $COREDNS_IMAGE
        imagePullPolicy: Never
        args: ["-conf", "/etc/coredns/Corefile"]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        securityContext:
          allowPrivilegeEscalation: false
          capabilities: {drop: [ALL]}
          runAsNonRoot: true
          readOnlyRootFilesystem: true
        readinessProbe: {httpGet: {path: /ready, port: 8181}}
        volumeMounts: [{name: config, mountPath: /etc/coredns}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $DNS_IP
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
YAML
  kubectl_ -n kube-system rollout status deployment/coredns --timeout 120s >/dev/null ||
    die "CoreDNS did not become ready: $(kubectl_ -n kube-system get pods -l k8s-app=kube-dns -o wide 2>&1 | tail -n 2 | tr '\n' ' ')"
}

up() {
  local start
  start=$(now)
  as_root "a cluster"
  build
  packages
  mkdir -p "$STATE" "$RUN" "$LOGS"
  # The tests find kubectl beside the kubeconfig (test/helpers/cluster.ts).
  ln -sfn "$BIN" "$STATE/bin"
  pki
  network
  control_plane
  say "control plane ready ($(since "$start"))"
  runtime
  pause_image
  node_agent
  # A run stopped during the Helm test's drain leaves the node cordoned (its teardown never ran):
  # the next run's pods would find no node to schedule on.
  kubectl_ uncordon "$NODE_NAME" >/dev/null || die "could not uncordon $NODE_NAME"
  # Its namespaces too (test/charts/cluster.test.ts labels each): their pods would hold the node's CPU.
  left=$({ kubectl_ get namespaces -l atrium.test/namespace=true -o name 2>/dev/null || true; } | wc -l)
  if [ "$left" -gt 0 ]; then
    kubectl_ delete namespaces -l atrium.test/namespace=true --timeout=180s >/dev/null 2>&1 ||
      say "namespaces a stopped run left are still being deleted"
    say "deleted $left namespace(s) a stopped run left"
  fi
  say "node $NODE_NAME Ready ($(since "$start"))"
  policies
  dns
  say "cluster ready in $(since "$start"): kubectl --kubeconfig $KUBECONFIG_ADMIN"
  echo "$KUBECONFIG_ADMIN"
}

down() {
  local c
  # The pods' containers first (their shims outlive containerd otherwise); the firewall rules of
  # kube-proxy and kube-router stay until the next `up` rewrites them.
  if alive containerd; then
    ctr_ tasks ls -q 2>/dev/null | while read -r id; do ctr_ tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
  fi
  for c in kube-router kube-proxy kubelet containerd kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$c"; done
  say "stopped; state kept in $STATE"
}

exec 9>/tmp/atrium-kube.lock
flock -w 1800 9 || die "another .ci/kube.sh has held /tmp/atrium-kube.lock for 30 minutes"
case "${1:-up}" in
  build) build ;;
  up) up ;;
  down) down ;;
  *) die "unknown command ${1:-}: build, up or down" ;;
esac
