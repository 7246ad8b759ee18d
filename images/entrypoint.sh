#!/bin/sh
# Entrypoint of the Magnetar image: `magnetar-entrypoint COMPONENT ARGS...` runs `magnetar COMPONENT ARGS...`
# after deriving what a pod knows only at run time from its identity (POD_NAME, POD_NAMESPACE and
# MAGNETAR_SERVICE, the headless Service the operator sets):
#   bookie: advertised address <pod>.<service>.<namespace>.svc (its stable bookie id), and its rack,
#           entry (ordinal mod count) of the comma-separated MAGNETAR_RACKS;
#   broker: advertised address <pod>.<service>.<namespace>.svc (its broker id and lookup answers).
# Settings given explicitly in the environment always win.
set -eu

component="${1:-}"
if [ -n "${POD_NAME:-}" ] && [ -n "${MAGNETAR_SERVICE:-}" ]; then
  fqdn="${POD_NAME}.${MAGNETAR_SERVICE}.${POD_NAMESPACE:-default}.svc"
  case "$component" in
    bookie)
      export MAGNETAR_BOOKIE_ADVERTISED_ADDRESS="${MAGNETAR_BOOKIE_ADVERTISED_ADDRESS:-$fqdn}"
      if [ -n "${MAGNETAR_RACKS:-}" ] && [ -z "${MAGNETAR_BOOKIE_RACK:-}" ]; then
        ordinal="${POD_NAME##*-}"
        count=$(printf '%s\n' "$MAGNETAR_RACKS" | tr ',' '\n' | grep -c .)
        export MAGNETAR_BOOKIE_RACK="$(printf '%s' "$MAGNETAR_RACKS" | cut -d, -f$((ordinal % count + 1)))"
      fi
      ;;
    broker)
      export MAGNETAR_BROKER_ADVERTISED_ADDRESS="${MAGNETAR_BROKER_ADVERTISED_ADDRESS:-$fqdn}"
      ;;
  esac
fi
exec magnetar "$@"
