# Functions to run a throwaway PostgreSQL server on 127.0.0.1 for the tests (sourced by scripts/test).
start_test_postgres() {
  local bindir port dir runas
  bindir="$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)")"
  dir="$(mktemp -d /tmp/thoughtmap-pg.XXXXXX)"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  runas=()
  # The server refuses to run as root: use the postgres account Debian's package creates.
  if [ "$(id -u)" -eq 0 ]; then chown postgres "$dir"; runas=(runuser -u postgres --); fi
  "${runas[@]}" "$bindir/initdb" -D "$dir/data" -U thoughtmap --auth=trust -E UTF8 >/dev/null
  "${runas[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
    -o "-h 127.0.0.1 -p $port -k $dir -F" start >/dev/null
  "${runas[@]}" "$bindir/createdb" -h 127.0.0.1 -p "$port" -U thoughtmap thoughtmap_test
  export THOUGHTMAP_TEST_POSTGRES_URL="postgresql+psycopg://thoughtmap@127.0.0.1:$port/thoughtmap_test"
  export _TM_PG_DIR="$dir" _TM_PG_BIN="$bindir" _TM_PG_RUNAS="${runas[*]}"
  echo "test: PostgreSQL on 127.0.0.1:$port" >&2
}

stop_test_postgres() {
  [ -n "${_TM_PG_DIR:-}" ] || return 0
  # shellcheck disable=SC2086
  $_TM_PG_RUNAS "$_TM_PG_BIN/pg_ctl" -D "$_TM_PG_DIR/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$_TM_PG_DIR"
}
