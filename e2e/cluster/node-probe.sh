#!/usr/bin/env bash
# Proves the node of node-up.sh runs real Pods (issue 31, feasibility), one line per
# check and `N passed, N failed` last. Uses only the images node-up.sh imports
# (localhost/mcc-busybox:1, localhost/mcc-pause:1) and namespace mcc-node-probe, which
# it deletes at the end. Optional: nothing in .ci/run calls it yet.
#
#   MCC_CLUSTER_NODE=1 e2e/cluster/up.sh && e2e/cluster/node-up.sh && e2e/cluster/node-probe.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${MCC_CLUSTER_DIR:-/tmp/mcc-cluster}
export KUBECONFIG=$dir/admin.kubeconfig
kubectl="$("$here/build.sh" --cached)/kubectl"
ns=mcc-node-probe
k() { "$kubectl" -n "$ns" "$@"; }
passed=0 failed=0
check() { # check NAME CONDITION-COMMAND...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; passed=$((passed + 1)); else echo "FAIL $name"; failed=$((failed + 1)); fi
}
wait_for() { # wait_for SECONDS COMMAND...: until COMMAND succeeds
  local end=$(( $(date +%s) + $1 )); shift
  until "$@" 2>/dev/null; do [ "$(date +%s)" -lt $end ] || return 1; sleep 0.5; done
}
phase() { [ "$(k get pod "$1" -o jsonpath='{.status.phase}')" = "$2" ]; }
ready() { [ "$(k get pod "$1" -o jsonpath='{.status.containerStatuses[0].ready}')" = true ]; }

"$kubectl" delete namespace "$ns" --ignore-not-found --wait >/dev/null
"$kubectl" create namespace "$ns" >/dev/null
"$kubectl" label namespace "$ns" pod-security.kubernetes.io/enforce=restricted >/dev/null
k wait --for=create serviceaccount/default --timeout=30s >/dev/null
bb=localhost/mcc-busybox:1
sec='securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}'
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  restartPolicy: Never
  securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: main
    image: $bb
    imagePullPolicy: Never
    command: [sh, -c, 'echo hello; id -u; grep -E "^(Seccomp|NoNewPrivs|CapEff):" /proc/self/status; ls /var/run/secrets/kubernetes.io/serviceaccount; echo x > /x 2>/dev/null || echo rootfs-read-only; echo err >&2; exit 3']
    $sec
---
apiVersion: v1
kind: Pod
metadata: {name: server, labels: {app: server}}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: main
    image: $bb
    imagePullPolicy: Never
    command: [sh, -c, 'while true; do echo pong | nc -l -p 8080; done']
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
    livenessProbe: {exec: {command: ['true']}, periodSeconds: 2}
    resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {cpu: 10m, memory: 16Mi}}
    $sec
---
apiVersion: v1
kind: Service
metadata: {name: server}
spec: {selector: {app: server}, ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Pod
metadata: {name: pause}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 65535, seccompProfile: {type: RuntimeDefault}}
  containers:
  - {name: main, image: localhost/mcc-pause:1, imagePullPolicy: Never, $sec}
---
apiVersion: v1
kind: Pod
metadata: {name: deadline}
spec:
  restartPolicy: Never
  activeDeadlineSeconds: 2
  terminationGracePeriodSeconds: 1
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - {name: main, image: $bb, imagePullPolicy: Never, command: [sleep, '300'], $sec}
---
apiVersion: v1
kind: Pod
metadata: {name: oom}
spec:
  restartPolicy: Never
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: main
    image: $bb
    imagePullPolicy: Never
    command: [sh, -c, 'x=a; while true; do x="\$x\$x"; done']
    resources: {limits: {memory: 16Mi}}
    $sec
---
apiVersion: v1
kind: Pod
metadata: {name: noimage}
spec:
  restartPolicy: Never
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - {name: main, image: localhost/mcc-does-not-exist:1, imagePullPolicy: IfNotPresent, $sec}
EOF

exit_code() { [ "$(k get pod hello -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')" = 3 ]; }
check "a restricted Pod runs to completion (exit code 3 reported)" bash -c "$(declare -f k wait_for phase exit_code); kubectl='$kubectl' ns='$ns'; wait_for 60 phase hello Failed && exit_code"
logs=$(k logs hello 2>&1)
check "kubectl logs through the kubelet (TLS both ways): stdout and stderr" \
  bash -c 'grep -q "^hello$" <<<"$1" && grep -q "^err$" <<<"$1"' _ "$logs"
check "runAsUser, seccomp filter, no_new_privs, no capabilities, read-only rootfs" \
  bash -c 'grep -q "^65532$" <<<"$1" && grep -q "^Seccomp:.*2" <<<"$1" && grep -q "^NoNewPrivs:.*1" <<<"$1" && grep -q "^CapEff:.*0000000000000000" <<<"$1" && grep -q rootfs-read-only <<<"$1"' _ "$logs"
check "projected ServiceAccount token mounted" grep -q '^token$' <<<"$logs"
check "readiness (tcp) and liveness (exec) probes: Ready" wait_for 60 ready server
check "the pause image (catatonit -P) runs" wait_for 60 phase pause Running
check "activeDeadlineSeconds: Failed, DeadlineExceeded" \
  wait_for 60 bash -c '[ "$("$0" -n "$1" get pod deadline -o jsonpath="{.status.reason}")" = DeadlineExceeded ]' "$kubectl" "$ns"
check "a memory limit: OOMKilled" \
  wait_for 60 bash -c '[ "$("$0" -n "$1" get pod oom -o jsonpath="{.status.containerStatuses[0].state.terminated.reason}")" = OOMKilled ]' "$kubectl" "$ns"
check "an image that is not there: ErrImagePull / ImagePullBackOff" \
  wait_for 60 bash -c '"$0" -n "$1" get pod noimage -o jsonpath="{.status.containerStatuses[0].state.waiting.reason}" | grep -qE "ErrImagePull|ImagePullBackOff"' "$kubectl" "$ns"
check "kubectl exec (API server -> kubelet -> containerd streaming)" bash -c '[ "$("$0" -n "$1" exec server -- echo exec-ok)" = exec-ok ]' "$kubectl" "$ns"
ip=$(k get pod server -o jsonpath='{.status.podIP}')
svc=$(k get service server -o jsonpath='{.spec.clusterIP}')
k run client --image $bb --image-pull-policy Never --restart Never \
  --overrides='{"spec":{"securityContext":{"runAsNonRoot":true,"runAsUser":65532,"seccompProfile":{"type":"RuntimeDefault"}},"containers":[{"name":"client","image":"'$bb'","imagePullPolicy":"Never","command":["sh","-c","for i in 1 2 3 4 5; do nc -w 3 '"$ip"' 8080 </dev/null | grep -q pong && echo pod-ok && break; sleep 1; done; for i in 1 2 3 4 5; do nc -w 3 '"$svc"' 80 </dev/null | grep -q pong && echo svc-ok && break; sleep 1; done"],"securityContext":{"allowPrivilegeEscalation":false,"readOnlyRootFilesystem":true,"capabilities":{"drop":["ALL"]}}}]}}' >/dev/null
wait_for 60 bash -c '[ "$("$0" -n "$1" get pod client -o jsonpath="{.status.phase}")" = Succeeded ]' "$kubectl" "$ns"
clogs=$(k logs client 2>&1)
check "Pod to Pod over the CNI bridge ($ip:8080)" grep -q pod-ok <<<"$clogs"
check "Pod to a Service's ClusterIP via kube-proxy ($svc:80)" grep -q svc-ok <<<"$clogs"
"$kubectl" delete namespace "$ns" --wait --timeout=60s >/dev/null
check "the namespace and its Pods are gone" bash -c '! "$0" get namespace "$1" >/dev/null 2>&1' "$kubectl" "$ns"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
