# shellcheck shell=bash
# A BNG's dataplane.grpcTls Secret reaches both real binaries as the operator wires it.
# Sourced by run.sh (its helpers: config_map_files, container_args, run_in_pod_fs,
# api_token_dir).

# tls_files DIR DNS: a CA (ca.crt) and a certificate it signs for DNS, for server and client
# authentication (tls.crt, tls.key), as cert-manager would write them into the Secret.
tls_files() {
  local dir=$1 ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  mkdir -p "$dir"
  (
    cd "$dir" &&
      openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.crt -days 2 -subj /CN=kbng-e2e-ca 2>/dev/null &&
      openssl req "${ec[@]}" -keyout tls.key -out tls.csr -subj /CN=kbng 2>/dev/null &&
      printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n' "$2" >leaf.ext &&
      openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days 2 \
        -extfile leaf.ext 2>/dev/null
  )
}

t_grpc_tls_secret_reaches_both_real_binaries() {
  local rc=0 out args=() numa='.' tls="$WORK/check/grpc-tls"
  [[ $(ls -d /sys/devices/system/node/node[0-9]* | wc -l) == 1 ]] && numa='.spec.dataplane.numaNode = 0'
  tls_files "$tls" "*.tls-dataplane.$NS.svc" || return 1
  k create secret generic tls-grpc --from-file="$tls/tls.crt" --from-file="$tls/tls.key" \
    --from-file="$tls/ca.crt" >/dev/null || return 1
  bng_json tls ".spec.dataplane.workerCores = 1 | .spec.dhcp.option82Identity = false |
      .spec.access = {\"vlanMode\": \"untagged\"} | .spec.dataplane.grpcTls = {\"secretName\": \"tls-grpc\"} | $numa" |
    kubectl apply -f - || return 1
  eventually 30 k get cm tls-control || return 1
  eventually 30 k get sts tls-dataplane || return 1
  expect_eq "$(k get sts tls-control tls-dataplane -o json | jq -c '[.items[].spec.template.spec.volumes[] | select(.name == "grpc-tls") | .secret.secretName]')" \
    '["tls-grpc","tls-grpc"]' "both pods mount the Secret" || rc=1
  # The control dials https:// with the mounted files.
  config_map_files tls-control "$WORK/check/tls" || return 1
  mapfile -d '' args < <(container_args tls-control)
  args[0]=$RELEASE_BIN/${args[0]}
  out=$(run_in_pod_fs "$WORK/check/tls:/etc/kbng" "$tls:/etc/kbng-grpc-tls" "$(api_token_dir)" -- "${args[@]}" --check-config 2>&1)
  expect_match "$out" "configuration valid: 1 dataplane\\(s\\) \\[\"https://tls-dataplane-0\\.tls-dataplane\\.$NS\\.svc:50051\"\\]" \
    "kbng-control takes dataplaneTls and https://" || rc=1
  # The dataplane serves mutual TLS with them.
  mapfile -d '' args < <(container_args tls-dataplane "POD_NAME=tls-dataplane-0")
  args[0]=$RELEASE_BIN/${args[0]}
  local dev=(env PCIDEVICE_INTEL_COM_SRIOV_ACCESS=0000:3b:02.1 PCIDEVICE_INTEL_COM_SRIOV_UPLINK=0000:3b:0a.1)
  out=$(run_in_pod_fs "$tls:/etc/kbng-grpc-tls" -- "${dev[@]}" "${args[@]}" --check-config 2>&1)
  expect_match "$out" "gRPC 0\\.0\\.0\\.0:50051 \\(mutual TLS\\)" "kbng-dataplane serves mutual TLS with the Secret" || rc=1
  # The check is real: a key that does not match the certificate stops the dataplane.
  cp "$tls/ca.key" "$tls/tls.key"
  if out=$(run_in_pod_fs "$tls:/etc/kbng-grpc-tls" -- "${dev[@]}" "${args[@]}" --check-config 2>&1); then
    echo "ACCEPTED a key of another certificate: $out"; rc=1
  else
    expect_match "$out" "--grpc-tls-cert, --grpc-tls-key: .*(Mismatch|mismatch|inconsistent|Inconsistent)" "refusal names the TLS flags" || rc=1
  fi
  k delete bng tls --wait=false
  k delete secret tls-grpc
  return $rc
}
