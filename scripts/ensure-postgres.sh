#!/usr/bin/env bash
# Start the local PostgreSQL (and MariaDB, used by database-connector tests) if installed but stopped.
set -euo pipefail
pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
if command -v pg_isready >/dev/null 2>&1 && ! pg_up; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  fi
  for _ in $(seq 1 30); do pg_up && break; sleep 1; done
fi
if ! pg_up; then
  echo "PostgreSQL is not reachable on 127.0.0.1:5432 (trust auth, user postgres); the tests need it." >&2
  exit 1
fi
if command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; then
  if ! (echo > /dev/tcp/127.0.0.1/3306) 2>/dev/null; then
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd || true
    for _ in $(seq 1 30); do (echo > /dev/tcp/127.0.0.1/3306) 2>/dev/null && break; sleep 1; done
  fi
fi
