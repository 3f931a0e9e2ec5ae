# A controller pod's init step: node.id from the pod ordinal, then its volume
# formatted once, and the properties the process starts with.
#
# kraft.version 1 (KRAFT_VERSION=1, every release installed by this chart): an
# empty volume is formatted
# - with --initial-controllers when this node is one of the voters the release
#   is being installed with (the bootstrap file exists only in the install's
#   render: /etc/kraft-quorum-bootstrap/initial-controllers);
# - otherwise with --no-initial-controllers and a fresh random directory id, as
#   an observer: a controller added by a scale-up, or one whose volume was lost
#   (the new directory id tells it from the voter it replaces). Its volume keeps
#   a marker, so it runs as an observer (process.roles=broker, not in its own
#   controller.quorum.voters) on every start. Before its first start it removes
#   the voter entry of the volume it replaces, if any (voters.py retire; no
#   active controller: this script fails and runs again); the voter-change Job
#   then adds it. Once added it votes as the voter set in its log says,
#   whatever process.roles says.
# kraft.version 0 (a release of an older chart): static voters, formatted as before.
set -eu
ordinal="${POD_NAME##*-}"
node_id=$((NODE_ID_BASE + ordinal))
base=/etc/kraft-quorum/controller.properties
config=/var/run/kraft-quorum/controller.properties
bootstrap=/etc/kraft-quorum-bootstrap/initial-controllers
observer=/var/lib/kraft-quorum/observer
retired=/var/lib/kraft-quorum/observer-retired
meta=/var/lib/kraft-quorum/metadata/meta.properties

if [ "${KRAFT_VERSION:-0}" = 0 ]; then
  { cat "$base"; echo "node.id=$node_id"; } > "$config"
  exec quorumctl storage format --ignore-formatted --cluster-id "$CLUSTER_ID" --config "$config"
fi

initial=""
if [ -s "$bootstrap" ]; then
  initial="$(cat "$bootstrap")"
fi
if [ ! -e "$meta" ]; then
  rm -f "$retired"
  case ",$initial," in
    *",$node_id@"*) rm -f "$observer" ;;
    *) : > "$observer" ;;
  esac
fi

if [ -e "$observer" ]; then
  # Itself out of the static voters (and their principals), which a controller
  # with process.roles=broker may not be in.
  grep -v -e '^process\.roles=' -e '^controller\.quorum\.voters=' \
    -e '^controller\.quorum\.voter\.principals=' "$base" > "$config"
  voters="$(sed -n 's/^controller\.quorum\.voters=//p' "$base" | tr ',' '\n' \
    | grep -v "^$node_id@" | paste -sd, -)"
  principals="$(sed -n 's/^controller\.quorum\.voter\.principals=//p' "$base" | tr ';' '\n' \
    | grep -v "^$node_id@" | paste -sd';' -)" || true
  {
    echo "process.roles=broker"
    echo "controller.quorum.voters=$voters"
    if [ -n "$principals" ]; then echo "controller.quorum.voter.principals=$principals"; fi
    echo "node.id=$node_id"
  } >> "$config"
else
  { cat "$base"; echo "node.id=$node_id"; } > "$config"
fi

if [ -e "$meta" ]; then  # formatted: only checked (cluster id and node id)
  quorumctl storage format --ignore-formatted --cluster-id "$CLUSTER_ID" --config "$config"
elif [ -e "$observer" ]; then
  quorumctl storage format --no-initial-controllers --cluster-id "$CLUSTER_ID" --config "$config"
else
  quorumctl storage format --initial-controllers "$initial" --cluster-id "$CLUSTER_ID" \
    --config "$config"
fi

if [ -e "$observer" ] && [ ! -e "$retired" ]; then
  directory_id="$(sed -n 's/^directory\.id=//p' "$meta")"
  VOTERS_DEADLINE_S=120 python3 /etc/kraft-quorum/voters.py retire --node-id "$node_id" \
    --directory-id "$directory_id"
  : > "$retired"
fi
