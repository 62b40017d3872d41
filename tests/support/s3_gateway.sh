#!/usr/bin/env bash
# A real S3 for tests: a one-node Ceph cluster (one mon, one OSD on memstore) and its RADOS
# Gateway on 127.0.0.1, all state in DIR, from Debian's ceph-mon, ceph-osd and radosgw.
#
#   s3_gateway.sh DIR MON_PORT S3_PORT
#
# Runs in the foreground as the daemons' parent: each daemon gets setpriv's parent-death
# signal, so killing this script (as the test fixture's own parent-death signal does)
# takes the cluster with it. Once the gateway answers S3 requests and a user exists, it
# writes DIR/ready.env (ENDPOINT, ACCESS_KEY, SECRET_KEY lines) and waits. On failure:
# exit 1 with one line on stderr; the daemons' logs are in DIR/log.
#
# Ceph's own authentication is off inside the cluster (auth none, crc framing); the
# gateway's S3 authentication (SigV4, strictly verified) stays on. With `osd crush update
# on start` the OSD fails at random with "wrong fsid", so the OSD joins the crush map by
# hand. STS is on, its shortest session 1 s, with a role `session` the user may assume
# (s3:* on every bucket): a test can hold a session token and see it expire. The gateway's
# own users are looked up first, so that an unknown key is InvalidAccessKeyId, as on AWS
# (with STS first it is AccessDenied); an expired session's key is then unknown too. About 15 s
# and 400 MB.
set -euo pipefail
PATH=$PATH:/usr/sbin:/sbin
die() { echo "s3_gateway.sh: $*" >&2; exit 1; }
[[ $# -eq 3 ]] || die "usage: s3_gateway.sh DIR MON_PORT S3_PORT"
dir=$1 mon_port=$2 s3_port=$3
for tool in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool ceph-authtool; do
  command -v $tool > /dev/null || die "$tool is not installed (apt-get install ceph-mon ceph-osd radosgw ceph-common, or ./scripts/install-deps.sh --test)"
done
mkdir -p "$dir"/{run,log,mon,osd/osd.0,rgw}
fsid=$(cat /proc/sys/kernel/random/uuid)
conf=$dir/ceph.conf
sts_key=$(od -An -N8 -tx1 /dev/urandom | tr -d " \n")  # 16 characters, as RGW needs
cat > "$conf" <<CONF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
ms cluster mode = crc
ms service mode = crc
ms client mode = crc
ms mon cluster mode = crc
ms mon service mode = crc
ms mon client mode = crc
ms bind ipv6 = false
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon max pg per osd = 1000
osd objectstore = memstore
memstore device bytes = 1073741824
osd crush update on start = false
osd class update on start = false
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
mon data = $dir/mon/\$name
osd data = $dir/osd/\$name
keyring = $dir/keyring
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$s3_port
rgw dns name = localhost
rgw data = $dir/rgw
rgw s3 auth use sts = true
rgw sts key = $sts_key
rgw sts min session duration = 1
rgw s3 auth order = local, sts
CONF
c=(-c "$conf")
step() { "$@" >> "$dir/log/setup.log" 2>&1 || die "'$*' failed (log: $dir/log/setup.log)"; }
daemon() { setpriv --pdeathsig KILL "$@" >> "$dir/log/daemons.out" 2>&1 & }

step ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *'
step monmaptool --create --add a "127.0.0.1:$mon_port" --fsid "$fsid" "$dir/monmap"
step ceph-mon "${c[@]}" --mkfs -i a --monmap "$dir/monmap"
daemon ceph-mon "${c[@]}" -f -i a
step timeout 30 ceph "${c[@]}" --connect-timeout 30 osd create
step timeout 10 ceph "${c[@]}" osd crush add-bucket localhost host
step timeout 10 ceph "${c[@]}" osd crush move localhost root=default
step timeout 10 ceph "${c[@]}" osd crush add osd.0 1.0 host=localhost
step ceph-osd "${c[@]}" --mkfs -i 0
daemon ceph-osd "${c[@]}" -f -i 0
daemon radosgw "${c[@]}" -f -n client.rgw
for _ in $(seq 1 300); do
  curl -s -o /dev/null "http://127.0.0.1:$s3_port/" && break
  sleep 0.2
done
curl -s -o /dev/null "http://127.0.0.1:$s3_port/" || die "the gateway did not answer on port $s3_port within 60 s (log: $dir/log)"
random=$(cat /proc/sys/kernel/random/uuid /proc/sys/kernel/random/uuid)
random=${random//[-$'\n']/}
access_key=LOCKSTEP${random:0:12}
access_key=${access_key^^}
secret_key=${random:12:40}
step timeout 30 radosgw-admin "${c[@]}" user create --uid tester --display-name tester \
  --access-key "$access_key" --secret "$secret_key"
step timeout 30 radosgw-admin "${c[@]}" caps add --uid tester --caps "roles=*"
step timeout 30 radosgw-admin "${c[@]}" role create --role-name session --assume-role-policy-doc \
  '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam:::user/tester"]},"Action":["sts:AssumeRole"]}]}'
step timeout 30 radosgw-admin "${c[@]}" role-policy put --role-name session --policy-name all --policy-doc \
  '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*"],"Resource":["arn:aws:s3:::*"]}]}'
printf 'ENDPOINT=http://127.0.0.1:%s\nACCESS_KEY=%s\nSECRET_KEY=%s\n' "$s3_port" "$access_key" "$secret_key" > "$dir/ready.env.tmp"
mv "$dir/ready.env.tmp" "$dir/ready.env"
wait
