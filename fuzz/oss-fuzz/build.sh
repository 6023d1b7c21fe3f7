#!/bin/bash -eu
# OSS-Fuzz build script for nilfs-ref (projects/nilfs-ref/build.sh in an
# oss-fuzz checkout, beside Dockerfile and project.yaml from this folder).
# OSS-Fuzz's Rust builder image provides nightly cargo and cargo-fuzz and
# sets $SRC, $OUT and the sanitizer flags; this script also runs by hand:
#   SRC=/path/containing/nilfs-ref OUT=/tmp/out fuzz/oss-fuzz/build.sh
cd "$SRC/nilfs-ref/fuzz"
cargo fuzz build -O ${FUZZ_BUILD_FLAGS:-}
bin=target/x86_64-unknown-linux-gnu/release
for src in fuzz_targets/*.rs; do
  name=$(basename "$src" .rs)
  cp "$bin/$name" "$OUT/"
  # The committed corpus is the seed corpus; the image targets allocate a
  # few hundred MiB for their base images.
  (cd "corpus/$name" && zip -q -r "$OUT/${name}_seed_corpus.zip" .)
  printf '[libfuzzer]\nrss_limit_mb = 3072\ntimeout = 30\n' >"$OUT/$name.options"
done
